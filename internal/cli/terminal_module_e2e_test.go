package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/cli"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestE2ETerminalSessionAnswersRunTask: a run_task whose context attaches
// a Codex-in-tmux terminal Session (runtime tmux-terminal, served by
// `clawconnect terminal module` as an operator-configured module), and
// whose OpenClaw parent turn ends with no text, is answered from the
// Session's last Turn (tier 3, resultSource "agent-session"); then exec
// --runtime codex-tmux --terminal drives the same pane through the executor.
func TestE2ETerminalSessionAnswersRunTask(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{Width: 200, Height: 50})
	bin, _ := e2eBinaries(t)
	home := t.TempDir()
	envm := map[string]string{"CLAWCONNECT_HOME": home, "CLAWCONNECT_TMUX_SOCKETS": tui.Socket, "CLAWCONNECT_TMUX_DEFAULT_SERVER": "off"}
	run := func(ctx context.Context, args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := cli.Run(ctx, cli.Env{Args: args, Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return envm[k] }})
		if err != nil {
			return out.String(), fmt.Errorf("%v: %w\n%s", args, err, errb.String())
		}
		return out.String(), nil
	}

	// A monitor host follows the Turns on the shared store.
	dctx, stopDaemon := context.WithCancel(context.Background())
	daemonDone := make(chan error, 1)
	go func() { _, err := run(dctx, "terminal", "daemon"); daemonDone <- err }()
	t.Cleanup(func() {
		stopDaemon()
		if err := <-daemonDone; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(home, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		if _, ok, err := hostpkg.Live(ctx, st); err == nil && ok {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the daemon never registered as a live monitor host")
		case <-time.After(50 * time.Millisecond):
		}
	}

	// sendable waits until the pane is listed with a send action of scope
	// in two listings in a row (Codex's launcher hands over to its native
	// binary; the TUI redraws a moment after a Turn ends; the Session's
	// checkpoint is written just after its Turn is stored done).
	sendable := func(scope string) termapi.TerminalRow {
		t.Helper()
		var row termapi.TerminalRow
		for {
			out, err := run(ctx, "terminal", "list", "--json")
			if err != nil {
				t.Fatal(err)
			}
			var res termapi.ListResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("list --json: %v\n%s", err, out)
			}
			if len(res.Terminals) == 1 && slices.ContainsFunc(res.Terminals[0].AvailableActions, func(a termapi.Action) bool { return a.Scope == scope }) {
				if res.Terminals[0].ID == row.ID {
					return row
				}
				row = res.Terminals[0]
			} else {
				row = termapi.TerminalRow{}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("no sendable Codex pane listed:\n%s", out)
			case <-time.After(300 * time.Millisecond):
			}
		}
	}

	// A first Turn makes the pane a managed Session.
	row := sendable(terminal.ScopeTerminalFollowCurrent)
	out, err := run(ctx, "terminal", "send", "--terminal", row.ID, "--wait", "--timeout", "90s", "--json", "ECHO=first-turn")
	if err != nil {
		t.Fatal(err)
	}
	var first termapi.TurnView
	if err := json.Unmarshal([]byte(out), &first); err != nil || first.Status != "idle" || first.SessionID == "" {
		t.Fatalf("first turn: %v\n%s", err, out)
	}

	// ask runs a task attached to the Session through a fresh `clawconnect
	// mcp` with the module configured: while the parent turn runs, the
	// Session answers a new Turn; then the parent ends with no text. It
	// returns check_task's final snapshot.
	ask := func(answer string) map[string]any {
		t.Helper()
		sendable(terminal.ScopeSessionExact)
		fg := fakegateway.New(t, fakegateway.Options{Password: "pw"})
		sendErr := make(chan error, 1)
		fg.SetScript(func(sub fakegateway.Submit) fakegateway.Turn {
			go func() {
				_, err := run(ctx, "terminal", "send", "--session", first.SessionID, "--wait", "--timeout", "90s", "ECHO="+answer)
				fg.Release(sub.IdempotencyKey)
				sendErr <- err
			}()
			return fakegateway.Turn{Hold: true, EmptyFinal: true, NoTranscript: true}
		})
		cmd := exec.Command(bin, "mcp")
		cmd.Env = []string{
			"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "CLAWCONNECT_HOME=" + home, "CLAWCONNECT_LOG_LEVEL=debug",
			"OPENCLAW_URL=" + fg.URL(), "OPENCLAW_PASSWORD=pw",
			"CLAWCONNECT_RECOVERY_IDLE_MS=300", "CLAWCONNECT_RECOVERY_INTERVAL_MS=50",
			"CLAWCONNECT_LAZY_RECHECK_SPACING_MS=100", "CLAWCONNECT_LAZY_RECHECK_INTERVAL_MS=20",
			"CLAWCONNECT_TMUX_SOCKETS=" + tui.Socket, "CLAWCONNECT_TMUX_DEFAULT_SERVER=off",
			// The documented opt-in: the binary's absolute path and its args.
			"CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES=" + bin + " terminal module",
		}
		stderr := &lockedBuffer{}
		cmd.Stderr = stderr
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "terminal-module-e2e", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatalf("connect: %v\nstderr:\n%s", err, stderr)
		}
		defer func() {
			_ = cs.Close()
			if t.Failed() {
				t.Logf("clawconnect mcp stderr:\n%s", stderr)
			}
		}()
		marker := fmt.Sprintf(`<agent-session>{"runtime":"tmux-terminal","sessionId":%q,"state":"running"}</agent-session>`, first.SessionID)
		res := callTool(ctx, t, cs, "run_task", map[string]any{"task": "Report what the terminal agent answered.", "context": "Delegated to Codex in tmux.\n" + marker})
		if res.IsError {
			t.Fatalf("run_task: %s", toolText(res))
		}
		jobID, _ := structuredOf(t, res)["jobId"].(string)
		var snap map[string]any
		for {
			snap = structuredOf(t, callTool(ctx, t, cs, "check_task", map[string]any{"jobId": jobID, "waitMs": 20000}))
			if snap["isTerminal"] == true {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("task %s not terminal in time: %v", jobID, snap)
			}
		}
		if err := <-sendErr; err != nil {
			t.Fatalf("the Session's turn: %v", err)
		}
		t.Logf("status %v resultSource %v summary %q agentSession %v", snap["status"], snap["resultSource"], snap["summary"], snap["agentSession"])
		if snap["status"] != "completed" || snap["resultSource"] != agentsession.ResultSourceAgentSession || snap["summary"] != answer {
			t.Errorf("status %v resultSource %v summary %q, want completed from the agent session with %q", snap["status"], snap["resultSource"], snap["summary"], answer)
		}
		return snap
	}

	// The module reaches the Turns through the daemon's socket.
	ask("terminal-session-answer")

	// Without a monitor host the module opens the shared store itself.
	stopDaemon()
	if err := <-daemonDone; err != nil {
		t.Fatalf("daemon: %v", err)
	}
	daemonDone <- nil // for the cleanup
	ask("answer-through-the-store")

	// The same pane through the executor (no monitor host runs: exec
	// follows its Turn itself): exec --runtime codex-tmux.
	sendable(terminal.ScopeTerminalFollowCurrent)
	out, err = run(ctx, "exec", "--runtime", "codex-tmux", "--terminal", row.ID, "--json", "ECHO=exec-terminal-ok")
	if err != nil {
		t.Fatalf("exec: %v\n%s", err, out)
	}
	var kinds []string
	var text, reason string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("exec --json line %q: %v", line, err)
		}
		k, _ := ev["kind"].(string)
		kinds = append(kinds, k)
		if k == "text-delta" {
			text += ev["text"].(string)
		}
		if k == "done" {
			reason, _ = ev["reason"].(string)
		}
	}
	if text != "exec-terminal-ok" || reason != "success" || kinds[len(kinds)-1] != "done" {
		t.Errorf("exec events %v, text %q, done %q; want the reply and done: success", kinds, text, reason)
	}
}
