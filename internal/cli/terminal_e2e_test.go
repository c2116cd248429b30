package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
	"github.com/clawconnect/clawconnect/termapi"
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
	envm := codexEnv(t)
	ctx := t.Context()
	row := waitSendableRow(t, envm)
	if row.Agent != "codex" || row.ManagementState != "unmanaged" || row.AvailableActions[0].Scope != terminal.ScopeTerminalFollowCurrent {
		t.Fatalf("row = %+v", row)
	}
	out, stderr, err := runTerminal(ctx, envm, "send", "--terminal", row.ID, "--wait", "--timeout", "90s", "--json", "ECHO=cli-terminal-ok")
	if err != nil {
		t.Fatalf("send --wait: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}
	var v termapi.TurnView
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
	// A caller acting for an OpenClaw session (the plugin) reaches only
	// the Turns that session sent; this one was sent from the command line.
	for _, cmd := range []string{"status", "close", "retry-callback"} {
		_, _, err := runTerminal(ctx, envm, cmd, "--for-session", "agent:main:other", v.TurnID)
		if ExitCode(err) != ExitFailure || !strings.Contains(err.Error(), "not started from this OpenClaw session") {
			t.Fatalf("%s --for-session of another's Turn: exit %d (%v)", cmd, ExitCode(err), err)
		}
	}
	if out, _, err := runTerminal(ctx, envm, "status", "--json", v.TurnID); err != nil || !strings.Contains(out, `"status": "idle"`) {
		t.Fatalf("after refused closes: %v\n%s", err, out)
	}
	if _, _, err := runTerminal(ctx, envm, "status", "turn-nope!"); ExitCode(err) != ExitUsage {
		t.Fatalf("status of a malformed id: exit %d (%v)", ExitCode(err), err)
	}
	if _, _, err := runTerminal(ctx, envm, "status", "turn-20260101T000000-00000000"); ExitCode(err) != ExitNotFound {
		t.Fatalf("status of an unknown id: exit %d (%v)", ExitCode(err), err)
	}
}

// codexEnv starts a real Codex TUI on the fake model in a private tmux
// server and returns the environment of a command that finds it: a home
// of its own and that server's socket, without the default server.
func codexEnv(t *testing.T) map[string]string {
	t.Helper()
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{Width: 200, Height: 50})
	return map[string]string{
		"CLAWCONNECT_HOME": t.TempDir(), "CLAWCONNECT_TMUX_SOCKETS": tui.Socket,
		"CLAWCONNECT_TMUX_DEFAULT_SERVER": "off",
	}
}

// waitSendableRow waits until `terminal list` in envm shows exactly one
// agent pane that takes a send, and returns its row.
func waitSendableRow(t *testing.T, envm map[string]string) termapi.TerminalRow {
	t.Helper()
	var row termapi.TerminalRow
	out := ""
	if !poll.WithinEvery(60*time.Second, 300*time.Millisecond, func() bool {
		var stderr string
		var err error
		out, stderr, err = runTerminal(t.Context(), envm, "list", "--json")
		if err != nil {
			t.Fatalf("list: %v\n%s", err, stderr)
		}
		var res termapi.ListResult
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("list --json: %v\n%s", err, out)
		}
		// The same process twice in a row: Codex's launcher hands over to
		// its native binary during start-up.
		if len(res.Terminals) == 1 && len(res.Terminals[0].AvailableActions) > 0 {
			if res.Terminals[0].ID == row.ID {
				return true
			}
			row = res.Terminals[0]
		}
		return false
	}) {
		t.Fatalf("no sendable agent pane listed:\n%s", out)
	}
	return row
}

// startHelperDaemon runs `clawconnect terminal daemon` in envm as a child
// process (TestHelperTerminalDaemon) until the test ends, once it is a live
// monitor host on the store, and returns it and the path of its log.
func startHelperDaemon(t *testing.T, envm map[string]string) (*exec.Cmd, string) {
	t.Helper()
	return startHelper(t, envm, "TestHelperTerminalDaemon")
}

// startHelper runs the helper test named (TestHelperTerminalDaemon,
// TestHelperServe) as a child process in envm until the test ends, once it
// is a live monitor host on the store of envm's home, and returns it and
// the path of its log.
func startHelper(t *testing.T, envm map[string]string, helper string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$")
	cmd.Env = append(os.Environ(), "CLAWCONNECT_TEST_HELPER_DAEMON=1")
	for k, v := range envm {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logs, err := os.CreateTemp(t.TempDir(), "host-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if !poll.WithinEvery(30*time.Second, 50*time.Millisecond, func() bool { return hostRegistered(t, envm["CLAWCONNECT_HOME"]) }) {
		b, _ := os.ReadFile(logs.Name())
		t.Fatalf("%s did not register as a live monitor host:\n%s", helper, b)
	}
	return cmd, logs.Name()
}

// TestHelperTerminalDaemon is not a test: TestE2ETerminalDaemonKill9 runs
// the test binary with it as `clawconnect terminal daemon`, so it can kill
// it with SIGKILL.
func TestHelperTerminalDaemon(t *testing.T) {
	runHelper(t, "terminal", "daemon")
}

// TestHelperServe is not a test: the E2E tests run the test binary with
// it as `clawconnect serve` on a free port.
func TestHelperServe(t *testing.T) {
	runHelper(t, "serve", "--addr", "127.0.0.1:0")
}

// runHelper runs clawconnect args in the helper process until SIGTERM.
func runHelper(t *testing.T, args ...string) {
	if os.Getenv("CLAWCONNECT_TEST_HELPER_DAEMON") != "1" {
		t.Skip("helper process only")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := Run(ctx, Env{Args: args, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
	if err != nil {
		t.Fatal(err)
	}
}

// TestE2ETerminalDaemonKill9 kills the monitor host with SIGKILL in the
// middle of a Turn; a restarted host resumes the Turn from the store and
// records exactly one completion.
func TestE2ETerminalDaemonKill9(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{Width: 200, Height: 50})
	home := t.TempDir()
	envm := map[string]string{
		"CLAWCONNECT_HOME": home, "CLAWCONNECT_TMUX_SOCKETS": tui.Socket,
		"CLAWCONNECT_TMUX_DEFAULT_SERVER": "off", "CLAWCONNECT_TERMINAL_RECHECK_MS": "1000",
	}
	ctx := t.Context()
	envm["CLAWCONNECT_LOG_LEVEL"] = "debug"
	var logPath string
	startDaemon := func() *exec.Cmd {
		cmd, path := startHelperDaemon(t, envm)
		logPath = path
		return cmd
	}
	a := startDaemon()
	row := waitSendableRow(t, envm)
	out, stderr, err := runTerminal(ctx, envm, "send", "--terminal", row.ID, "--json", "tell a long story SLOW")
	if err != nil {
		t.Fatalf("send: %v\n%s\n%s", err, out, stderr)
	}
	var sent termapi.SendResult
	if err := json.Unmarshal([]byte(out), &sent); err != nil || sent.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("send = %s (%v)", out, err)
	}
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	b := startDaemon()
	var v termapi.TurnView
	if !poll.WithinEvery(90*time.Second, 200*time.Millisecond, func() bool {
		out, _, err = runTerminal(ctx, envm, "status", sent.TurnID, "--json")
		return err == nil && json.Unmarshal([]byte(out), &v) == nil && !terminal.Running(v.Status)
	}) {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("turn not done after the restart: %s (%v)\ndaemon log:\n%s", out, err, b)
	}
	if v.Status != "idle" || v.Result == nil || !strings.HasPrefix(v.Result.Text, fakemodel.DefaultPrefix) {
		t.Fatalf("turn = %+v", v)
	}
	_ = b.Process.Signal(syscall.SIGTERM)
	_ = b.Wait()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(home, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ev, err := st.TurnEvents(ctx, sent.TurnID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ev {
		if e.Type == "terminal_bridge_completion_claimed" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d completions recorded, want exactly 1", n)
	}
}
