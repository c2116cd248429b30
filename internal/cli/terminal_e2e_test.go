package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
)

// runTerminal runs `clawconnect terminal args...` in env and returns stdout.
func runTerminal(ctx context.Context, envm map[string]string, args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := Run(ctx, Env{Args: append([]string{"terminal"}, args...), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return envm[k] }})
	return out.String(), errb.String(), err
}

// TestE2ETerminalSendWaitPrintsExactReply drives a real Codex TUI through
// the CLI: list finds it, send --wait prints the fake model's exact reply.
func TestE2ETerminalSendWaitPrintsExactReply(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{Width: 200, Height: 50})
	envm := map[string]string{
		"CLAWCONNECT_HOME": t.TempDir(), "CLAWCONNECT_TMUX_SOCKETS": tui.Socket,
		"CLAWCONNECT_TMUX_DEFAULT_SERVER": "off",
	}
	ctx := t.Context()
	var row terminal.TerminalRow
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, stderr, err := runTerminal(ctx, envm, "list", "--json")
		if err != nil {
			t.Fatalf("list: %v\n%s", err, stderr)
		}
		var res terminal.ListResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("list --json: %v\n%s", err, out)
		}
		if len(res.Terminals) == 1 && len(res.Terminals[0].AvailableActions) > 0 {
			row = res.Terminals[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sendable Codex pane listed:\n%s", out)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if row.Agent != "codex" || row.ManagementState != "unmanaged" || row.AvailableActions[0].Scope != terminal.ScopeTerminalFollowCurrent {
		t.Fatalf("row = %+v", row)
	}
	out, stderr, err := runTerminal(ctx, envm, "send", "--terminal", row.ID, "--wait", "--timeout", "90s", "--json", "ECHO=cli-terminal-ok")
	if err != nil {
		t.Fatalf("send --wait: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	var v terminal.TurnView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("send --wait --json: %v\n%s", err, out)
	}
	if v.Status != "idle" || v.Result == nil || v.Result.Outcome != "completed" || v.Result.Text != "cli-terminal-ok" {
		t.Fatalf("turn = %+v", v)
	}
	out, _, err = runTerminal(ctx, envm, "status", v.TurnID)
	if err != nil || !strings.Contains(out, "cli-terminal-ok") || !strings.Contains(out, "status:   idle") {
		t.Fatalf("status: %v\n%s", err, out)
	}
	if _, _, err := runTerminal(ctx, envm, "status", "turn-nope!"); ExitCode(err) != ExitUsage {
		t.Fatalf("status of a malformed id: exit %d (%v)", ExitCode(err), err)
	}
	if _, _, err := runTerminal(ctx, envm, "status", "turn-20260101T000000-00000000"); ExitCode(err) != ExitNotFound {
		t.Fatalf("status of an unknown id: exit %d (%v)", ExitCode(err), err)
	}
}
