package agentproc

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/proc"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
)

// TestDiscoverRealAgents starts the real Codex and Claude Code TUIs (and a
// Codex app-server, as the shared daemon runs) in panes of a private tmux
// server and checks that Discover finds each TUI with the right agent,
// pid, cwd and version, that Verify accepts them, and that the app-server
// is never taken for an agent. Gated by CLAWCONNECT_E2E=1.
func TestDiscoverRealAgents(t *testing.T) {
	peers.RequireE2E(t)
	model := fakemodel.New(t, fakemodel.Options{})
	codex := realcli.Require(t, realcli.Codex, model)
	claude := realcli.Require(t, realcli.ClaudeCode, model)
	s := newTmuxServer(t) // its cleanup (kill-server) runs before the CLIs'
	codexWork, err := filepath.EvalSymlinks(codex.WorkDir)
	if err != nil {
		t.Fatal(err)
	}
	claudeWork, err := filepath.EvalSymlinks(claude.WorkDir)
	if err != nil {
		t.Fatal(err)
	}
	cxPane := s.session(t, "cx", codexWork, "exec "+codex.ShellCommand(codex.InteractiveArgs()...))
	ccPane := s.session(t, "cc", claudeWork, "exec "+claude.ShellCommand(claude.InteractiveArgs()...))
	dPane := s.session(t, "daemon", codexWork, "exec "+codex.ShellCommand("app-server"))

	f := s.finder(t)
	var started []int
	t.Cleanup(func() {
		// kill-server hangs the panes up; make sure nothing we started stays.
		_ = exec.Command("tmux", "-S", s.socket, "kill-server").Run()
		for _, pid := range started {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	// The npm script runs under node and, on Node 24, replaces itself
	// with the native binary (execve: same pid and start time); wait for
	// that steady state.
	rows := discoverUntilFor(t, f, 90*time.Second, func(rows []Row) bool {
		found := 0
		for _, r := range rows {
			// Codex's node script execs the native binary in place; until the
			// exec has finished, exe and argv may still be the script's (or
			// argv briefly empty).
			execd := filepath.Base(r.Process.Exe) == "codex" && len(r.Process.Argv) > 0 && r.Process.Argv[0] == r.Process.Exe
			if r.Controllable && (r.Pane.ID == cxPane && r.Agent == Codex && execd || r.Pane.ID == ccPane && r.Agent == Claude) {
				found++
			}
		}
		return found == 2
	})
	byPane := map[string]Row{}
	for _, r := range rows {
		byPane[r.Pane.ID] = r
		started = append(started, r.Process.PID)
		started = append(started, r.Launchers...)
		t.Logf("row %s: exe %s version %q launchers %v", r.TerminalID, r.Process.Exe, r.Version, r.Launchers)
	}
	if r, ok := byPane[dPane]; ok {
		t.Errorf("the app-server pane has a row: %+v", r)
	}

	cx := byPane[cxPane]
	if cx.Process.Cwd != codexWork || cx.Version != "0.171.0" || filepath.Base(cx.Process.Exe) != "codex" {
		t.Errorf("codex row: cwd %q (want %q), version %q, exe %q", cx.Process.Cwd, codexWork, cx.Version, cx.Process.Exe)
	}
	if len(cx.Launchers) != 0 || len(cx.Process.Argv) == 0 || cx.Process.Argv[0] != cx.Process.Exe {
		t.Errorf("codex: launchers %v, argv %q; want the native binary exec'd in place of the script", cx.Launchers, cx.Process.Argv)
	}
	cc := byPane[ccPane]
	if cc.Process.Cwd != claudeWork || cc.Version != "2.1.332" {
		t.Errorf("claude row: cwd %q (want %q), version %q, exe %q", cc.Process.Cwd, claudeWork, cc.Version, cc.Process.Exe)
	}
	// The TUI is up (its footer names the fake model), and still the same
	// process.
	client := tmux.New(tmux.Options{NoDefaultServer: true, Sockets: []string{s.socket}})
	screen := ""
	if !poll.WithinEvery(60*time.Second, 50*time.Millisecond, func() bool {
		screen, err = client.Capture(t.Context(), cx.Pane, tmux.CaptureOptions{})
		return err != nil || strings.Contains(screen, model.Model())
	}) {
		t.Fatalf("the Codex TUI never showed its footer; screen:\n%s", screen)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Row{cx, cc} {
		if _, err := ParseTerminalID(r.TerminalID); err != nil {
			t.Error(err)
		}
		if v, err := f.Verify(t.Context(), r); err != nil || v.Incarnation() != r.Incarnation() {
			t.Errorf("Verify(%s) = %s, %v", r.TerminalID, v.Incarnation(), err)
		}
	}

	// The app-server runs in its pane and is classified as no agent.
	panes, err := f.panes.ListPanes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dPID := 0
	for _, p := range panes {
		if p.ID == dPane {
			dPID = p.PID
		}
	}
	var servers []proc.Process
	native := func() bool { // the node script has exec'd the native binary
		return slices.ContainsFunc(servers, func(p proc.Process) bool { return filepath.Base(p.Argv[0]) == "codex" })
	}
	if !poll.WithinEvery(30*time.Second, 50*time.Millisecond, func() bool {
		var tab *proc.Table
		if tab, err = proc.Snapshot(); err != nil {
			return true
		}
		servers = servers[:0]
		for _, pid := range append([]int{dPID}, tab.Descendants(dPID)...) {
			if p, ok := tab.Get(pid); ok && slices.Contains(p.Argv, "app-server") {
				servers = append(servers, p)
			}
		}
		return native()
	}) {
		t.Fatalf("the app-server never ran under pane %s (pid %d): %+v", dPane, dPID, servers)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range servers {
		started = append(started, p.PID)
		if agent, ok := Classify(p.Argv); ok {
			t.Errorf("Classify(%q) = %s, want no agent", p.Argv, agent)
		}
		t.Logf("app-server process %d: %s", p.PID, strings.Join(p.Argv, " "))
	}
}

// discoverUntilFor runs Discover until ok accepts the rows, for at most
// bound.
func discoverUntilFor(tb testing.TB, f *Finder, bound time.Duration, ok func([]Row) bool) []Row {
	tb.Helper()
	var rows []Row
	var err error
	if !poll.WithinEvery(bound, 50*time.Millisecond, func() bool {
		rows, err = f.Discover(tb.Context())
		return err != nil || ok(rows)
	}) {
		tb.Fatalf("Discover never settled; last rows: %+v", rows)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return rows
}
