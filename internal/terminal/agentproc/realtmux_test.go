package agentproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/proc"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

// tmuxServer is a private tmux server on a socket in a short temporary
// directory, with a bin directory holding stand-ins for the agents:
// bin/node is sh, bin/codex an npm-style launcher script that starts
// vendor/bin/codex (sleep under another name) as its child, and
// bin/claude is sleep.
type tmuxServer struct {
	dir, socket, bin string
}

func newTmuxServer(tb testing.TB) *tmuxServer {
	tb.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		tb.Skip("tmux not installed")
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		tb.Skip("sleep not installed")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		tb.Skip("sh not installed")
	}
	dir, err := os.MkdirTemp("", "ccagent")
	if err != nil {
		tb.Fatal(err)
	}
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		tb.Fatal(err)
	}
	s := &tmuxServer{dir: dir, socket: filepath.Join(dir, "s"), bin: filepath.Join(dir, "bin")}
	tb.Cleanup(func() {
		_ = exec.Command("tmux", "-S", s.socket, "kill-server").Run()
		_ = os.RemoveAll(dir)
	})
	for _, d := range []string{s.bin, filepath.Join(dir, "vendor", "bin")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	links := map[string]string{
		filepath.Join(s.bin, "node"):              sh,
		filepath.Join(s.bin, "claude"):            sleep,
		filepath.Join(dir, "vendor/bin/codex"):    sleep,
		filepath.Join(dir, "vendor/bin/helper"):   sleep,
		filepath.Join(s.bin, "not-an-agent-here"): sleep,
	}
	for link, target := range links {
		if err := os.Symlink(target, link); err != nil {
			tb.Fatal(err)
		}
	}
	script := "#!/bin/sh\n" + filepath.Join(dir, "vendor/bin/codex") + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(s.bin, "codex"), []byte(script), 0o755); err != nil {
		tb.Fatal(err)
	}
	return s
}

// session starts a detached session running cmd in workdir (created) and
// returns its pane id.
func (s *tmuxServer) session(tb testing.TB, name, workdir, cmd string) string {
	tb.Helper()
	if err := os.MkdirAll(workdir, 0o755); err != nil {
		tb.Fatal(err)
	}
	out, err := exec.Command("tmux", "-S", s.socket, "new-session", "-d", "-P", "-F", "#{pane_id}",
		"-s", name, "-x", "80", "-y", "24", "-c", workdir, "PATH="+s.bin+":$PATH; "+cmd).CombinedOutput()
	if err != nil {
		tb.Fatalf("new-session: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}

func (s *tmuxServer) finder(tb testing.TB) *Finder {
	tb.Helper()
	f, err := New(Options{Panes: tmux.New(tmux.Options{NoDefaultServer: true, Sockets: []string{s.socket}})})
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// discoverUntil runs Discover until ok accepts the rows (bounded).
func discoverUntil(tb testing.TB, f *Finder, ok func([]Row) bool) []Row {
	tb.Helper()
	return discoverUntilFor(tb, f, 15*time.Second, ok)
}

func TestDiscoverRealTmux(t *testing.T) {
	s := newTmuxServer(t)
	workA := filepath.Join(s.dir, "work a")
	workB := filepath.Join(s.dir, "workb")
	paneA := s.session(t, "cx", workA, "exec node "+filepath.Join(s.bin, "codex")+" 600")
	paneB := s.session(t, "cc", workB, "exec claude 601")
	s.session(t, "plain", s.dir, "not-an-agent-here 602")
	f := s.finder(t)
	rows := discoverUntil(t, f, func(rows []Row) bool {
		return len(rows) == 2 && rows[0].Controllable && rows[1].Controllable && len(rows[0].Launchers) == 1
	})
	a, b := rows[0], rows[1]
	if a.Pane.ID != paneA || a.Agent != Codex || a.Process.Cwd != workA || !slices.Equal(a.Process.Argv, []string{filepath.Join(s.dir, "vendor/bin/codex"), "600"}) {
		t.Errorf("codex row = %+v", a)
	}
	if launcher, err := proc.Read(a.Launchers[0]); err != nil || !slices.Equal(launcher.Argv, []string{"node", filepath.Join(s.bin, "codex"), "600"}) {
		t.Errorf("launcher = %+v, %v", launcher, err)
	}
	if a.TerminalID != fmt.Sprintf("terminal:v2:tmux:codex:cx:0.0:%d", a.Process.PID) {
		t.Errorf("codex terminal_id = %q", a.TerminalID)
	}
	if b.Pane.ID != paneB || b.Agent != Claude || b.Process.PID != b.Pane.PID || b.Process.Cwd != workB {
		t.Errorf("claude row (the pane's own process after exec) = %+v", b)
	}
	if alive, err := proc.Alive(a.Process.PID, a.Process.StartTicks); !alive || err != nil {
		t.Errorf("Alive(codex) = %v, %v", alive, err)
	}

	v, err := f.Verify(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	if v.Incarnation() != a.Incarnation() {
		t.Errorf("Verify changed the incarnation: %s -> %s", a.Incarnation(), v.Incarnation())
	}
	// The pane is renamed: same identity, new target.
	if out, err := exec.Command("tmux", "-S", s.socket, "rename-session", "-t", "cx", "renamed").CombinedOutput(); err != nil {
		t.Fatalf("rename: %v: %s", err, out)
	}
	if v, err = f.Verify(t.Context(), a); err != nil || v.Pane.Target() != "renamed:0.0" || !strings.Contains(v.TerminalID, ":renamed:0.0:") {
		t.Errorf("Verify after rename = %+v, %v", v, err)
	}
	// The agent is killed: its launcher ends too, the pane closes.
	if err := exec.Command("kill", fmt.Sprint(a.Process.PID)).Run(); err != nil {
		t.Fatal(err)
	}
	if !poll.Within(10*time.Second, func() bool { _, err = f.Verify(t.Context(), a); return err != nil }) {
		t.Fatal("Verify still succeeds after the agent was killed")
	}
	if !errors.Is(err, ErrIdentity) || !(errors.Is(err, ErrProcessGone) || errors.Is(err, ErrPaneChanged) || errors.Is(err, ErrNotInPane)) {
		t.Errorf("Verify after kill: %v", err)
	}
}

// BenchmarkDiscover measures Discover over 50 agent panes on a private
// tmux server: one list-panes, one /proc snapshot, one full read per
// agent.
func BenchmarkDiscover(b *testing.B) {
	s := newTmuxServer(b)
	const n = 50
	for i := range n {
		s.session(b, fmt.Sprintf("s%02d", i), filepath.Join(s.dir, "w", fmt.Sprint(i)), "exec node "+filepath.Join(s.bin, "codex")+" 600")
	}
	f := s.finder(b)
	discoverUntil(b, f, func(rows []Row) bool {
		if len(rows) != n {
			return false
		}
		for _, r := range rows {
			if !r.Controllable {
				return false
			}
		}
		return true
	})
	tab, err := proc.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	lister := tmux.New(tmux.Options{NoDefaultServer: true, Sockets: []string{s.socket}})
	b.Run("discover", func(b *testing.B) {
		b.ReportMetric(float64(tab.Len()), "procs")
		for b.Loop() {
			rows, err := f.Discover(b.Context())
			if err != nil || len(rows) != n {
				b.Fatalf("Discover = %d rows, %v", len(rows), err)
			}
		}
	})
	// The parts: the one tmux spawn, and the /proc snapshot.
	b.Run("list-panes", func(b *testing.B) {
		for b.Loop() {
			if panes, err := lister.ListPanes(b.Context()); err != nil || len(panes) != n {
				b.Fatalf("ListPanes = %d, %v", len(panes), err)
			}
		}
	})
	b.Run("snapshot-all-argv", func(b *testing.B) {
		for b.Loop() {
			if _, err := proc.Snapshot(); err != nil {
				b.Fatal(err)
			}
		}
	})
	panes, err := lister.ListPanes(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	roots := make([]int, len(panes))
	for i, p := range panes {
		roots[i] = p.PID
	}
	b.Run("snapshot-under-panes", func(b *testing.B) {
		for b.Loop() {
			if _, err := (proc.FS{}).SnapshotUnder(roots); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-agent", func(b *testing.B) {
		for b.Loop() {
			if _, err := proc.Read(roots[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
