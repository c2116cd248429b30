package cli

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/transition"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestE2ETerminalNewThreadShowsTheGeneration drives a real Claude Code TUI
// through the CLI: `terminal list --json` shows binding generation 1 after
// the first Turn, new-thread --json commits a transition, and the row then
// shows generation 2 and the new native thread; threads lists the old one.
func TestE2ETerminalNewThreadShowsTheGeneration(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.ClaudeCode, model, realtui.Options{Width: 200, Height: 50})
	envm := map[string]string{
		"CLAWCONNECT_HOME": t.TempDir(), "CLAWCONNECT_TMUX_SOCKETS": tui.Socket,
		"CLAWCONNECT_TMUX_DEFAULT_SERVER": "off",
	}
	ctx := t.Context()
	list := func() termapi.TerminalRow {
		t.Helper()
		out, stderr, err := runTerminal(ctx, envm, "list", "--json")
		if err != nil {
			t.Fatalf("list: %v\n%s", err, stderr)
		}
		var res termapi.ListResult
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Terminals) != 1 {
			t.Fatalf("list --json: %v\n%s", err, out)
		}
		return res.Terminals[0]
	}
	var row termapi.TerminalRow
	if !poll.WithinEvery(60*time.Second, 300*time.Millisecond, func() bool { row = list(); return len(row.AvailableActions) > 0 }) {
		t.Fatalf("no sendable Claude pane: %+v", row)
	}
	out, stderr, err := runTerminal(ctx, envm, "send", "--terminal", row.ID, "--wait", "--timeout", "90s", "--json", "remember MARK-CLI-5 ECHO=cli-one")
	if err != nil || !strings.Contains(out, "cli-one") {
		t.Fatalf("send --wait: %v\n%s\n%s", err, out, stderr)
	}
	before := list()
	if before.BindingGeneration != 1 || before.ManagementState != "managed" || before.NativeThreadID == "" {
		t.Fatalf("row before new-thread = %+v", before)
	}
	if !poll.WithinEvery(20*time.Second, 200*time.Millisecond, func() bool {
		if len(before.AvailableActions) > 0 {
			return true
		}
		before = list()
		return len(before.AvailableActions) > 0
	}) {
		t.Fatalf("pane not sendable after the Turn: %+v", before)
	}
	out, stderr, err = runTerminal(ctx, envm, "new-thread", "--json", row.ID)
	if err != nil {
		t.Fatalf("new-thread: %v\n%s\n%s", err, out, stderr)
	}
	var v termapi.TransitionView
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Status != "committed" || v.Generation != 2 || v.FromGeneration != 1 {
		t.Fatalf("new-thread --json = %+v, %v\n%s", v, err, out)
	}
	after := list()
	if after.BindingGeneration != 2 || after.SessionID != v.SessionID || after.NativeThreadID == before.NativeThreadID || after.NativeThreadID != v.ThreadID {
		t.Fatalf("row after new-thread = %+v (before %+v)", after, before)
	}
	out, _, err = runTerminal(ctx, envm, "threads", "--json", row.ID)
	var th transition.ThreadsResult
	if err != nil || json.Unmarshal([]byte(out), &th) != nil || len(th.Threads) != 1 || th.Threads[0].ID != before.NativeThreadID || !strings.Contains(th.Threads[0].Title, "MARK-CLI-5") {
		t.Fatalf("threads --json = %v\n%s", err, out)
	}
	out, _, err = runTerminal(ctx, envm, "transition", v.TransitionID)
	if err != nil || !strings.Contains(out, "status:     committed") || !strings.Contains(out, "generation 2") {
		t.Fatalf("transition = %v\n%s", err, out)
	}
	// Bad input: usage errors, nothing typed.
	_, _, err = runTerminal(ctx, envm, "resolve-transition", v.TransitionID)
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUsage {
		t.Fatalf("resolve-transition without --adopt/--abort: %v", err)
	}
	_, _, err = runTerminal(ctx, envm, "resume-thread", row.ID, "not-a-uuid")
	if !errors.As(err, &ee) || ee.Code != ExitUsage {
		t.Fatalf("resume-thread with a partial id: %v", err)
	}
}
