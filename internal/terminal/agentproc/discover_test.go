package agentproc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/clawconnect/clawconnect/internal/terminal/proc"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakePanes is a PaneLister over a fixed listing.
type fakePanes struct {
	panes []tmux.Pane
	err   error // returned by Resolve when set
}

func (f *fakePanes) ListPanes(context.Context) ([]tmux.Pane, error) { return f.panes, nil }

func (f *fakePanes) Resolve(_ context.Context, socket, id string) (tmux.Pane, error) {
	if f.err != nil {
		return tmux.Pane{}, f.err
	}
	for _, p := range f.panes {
		if p.Socket == socket && p.ID == id {
			return p, nil
		}
	}
	return tmux.Pane{}, fmt.Errorf("fake resolve %s: %w", id, tmux.ErrPaneGone)
}

// fakeProcs is a ProcReader over a process list; Read fills Cwd and Exe.
type fakeProcs struct {
	procs   map[int]proc.Process
	snapErr error
}

func newFakeProcs(ps ...proc.Process) *fakeProcs {
	f := &fakeProcs{procs: map[int]proc.Process{}}
	for _, p := range ps {
		f.procs[p.PID] = p
	}
	return f
}

func (f *fakeProcs) Snapshot() (*proc.Table, error) {
	if f.snapErr != nil {
		return nil, f.snapErr
	}
	var ps []proc.Process
	for _, p := range f.procs {
		p.Cwd, p.Exe = "", ""
		ps = append(ps, p)
	}
	return proc.NewTable(ps)
}

func (f *fakeProcs) Read(pid int) (proc.Process, error) {
	p, ok := f.procs[pid]
	if !ok {
		return proc.Process{}, fmt.Errorf("fake read %d: %w", pid, proc.ErrNoProcess)
	}
	return p, nil
}

func (f *fakeProcs) ReadStat(pid int) (proc.Process, error) { return f.Read(pid) }

const sockA = "/tmp/tmux-0/default"

func pane(id string, session string, pid int, path string) tmux.Pane {
	var n int
	fmt.Sscanf(id, "%%%d", &n)
	return tmux.Pane{Session: session, Window: 0, Index: n, PID: pid, Command: "zsh", Path: path, Socket: sockA, ID: id, Queried: sockA}
}

func pr(pid, ppid int, start uint64, cwd string, argv ...string) proc.Process {
	return proc.Process{PID: pid, PPID: ppid, State: 'S', StartTicks: start, Argv: argv, Cwd: cwd, Exe: "/usr/bin/" + argv[0]}
}

// world is a typical machine: a tmux server with panes, a shell in each.
func world() (*fakePanes, *fakeProcs) {
	panes := &fakePanes{panes: []tmux.Pane{
		pane("%1", "work", 100, "/src/a"), // shell -> node codex -> native codex
		pane("%2", "work", 200, "/src/b"), // shell -> claude
		pane("%3", "work", 300, "/src/c"), // shell only
		pane("%4", "work", 400, "/src/d"), // codex and claude side by side
		pane("%5", "work", 500, "/src/e"), // codex as the pane process itself
	}}
	procs := newFakeProcs(
		pr(1, 0, 1, "/", "init"),
		pr(50, 1, 5, "/", "tmux"),
		pr(100, 50, 10, "/src/a", "-zsh"),
		pr(101, 100, 11, "/src/a", "node", "/opt/bin/codex"),
		pr(102, 101, 12, "/src/a", "/opt/vendor/bin/codex"),
		pr(103, 102, 13, "/src/a", "bash", "-c", "make test"),
		pr(200, 50, 20, "/src/b", "-zsh"),
		pr(201, 200, 21, "/src/b", "claude", "--model", "m"),
		pr(300, 50, 30, "/src/c", "-zsh"),
		pr(301, 300, 31, "/src/c", "vim", "codex"),
		pr(400, 50, 40, "/src/d", "-zsh"),
		pr(401, 400, 41, "/src/d", "codex"),
		pr(402, 400, 42, "/src/d", "claude"),
		pr(500, 50, 50, "/src/e", "codex"),
		// Codex forking a shell: until execve the child shows its argv.
		pr(501, 500, 51, "/src/e", "codex"),
		pr(600, 1, 60, "/src/z", "codex"), // outside every pane
		pr(700, 1, 70, "/", "/opt/releases/0.171.0/bin/codex", "app-server", "--listen", "unix://"),
	)
	return panes, procs
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	panes, procs := world()
	f, err := New(Options{Panes: panes, Procs: procs})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := f.Discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	get := func(pid int) proc.Process { p, _ := procs.Read(pid); return p }
	snap := func(pid int) proc.Process { p := get(pid); p.Cwd, p.Exe = "", ""; return p }
	want := []Row{
		{TerminalID: "terminal:v2:tmux:codex:work:0.1:102", Agent: Codex, Pane: panes.panes[0], Process: get(102), Launchers: []int{101}, Controllable: true},
		{TerminalID: "terminal:v2:tmux:claude:work:0.2:201", Agent: Claude, Pane: panes.panes[1], Process: get(201), Controllable: true},
		{TerminalID: "terminal:v2:tmux:codex:work:0.4:401", Agent: Codex, Pane: panes.panes[3], Process: snap(401),
			Reason: "the pane holds 2 agent processes (codex 401, claude 402); exactly one is required", Candidates: []int{401, 402}},
		{TerminalID: "terminal:v2:tmux:codex:work:0.5:500", Agent: Codex, Pane: panes.panes[4], Process: get(500), Controllable: true},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("Discover (-want +got):\n%s", diff)
	}
	if got := rows[0].Incarnation(); got != "pid:102:start:12" {
		t.Errorf("Incarnation() = %q", got)
	}
}

func TestDiscoverNotControllable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edit   func(*fakePanes, *fakeProcs)
		pane   string
		reason string
	}{
		{name: "process inside two panes", pane: "%1", reason: "descends from 2 panes",
			edit: func(p *fakePanes, _ *fakeProcs) {
				// A second pane whose process is the first pane's node launcher.
				p.panes = append(p.panes, pane("%9", "other", 101, "/src/a"))
			}},
		{name: "legacy pane", pane: "", reason: "legacy form",
			edit: func(p *fakePanes, _ *fakeProcs) { p.panes[1].Socket, p.panes[1].ID = "", "" }},
		{name: "pane path differs from the agent's cwd", pane: "%2", reason: `the pane's path "/elsewhere" differs`,
			edit: func(p *fakePanes, _ *fakeProcs) { p.panes[1].Path = "/elsewhere" }},
		{name: "cwd unreadable", pane: "%2", reason: "cannot be read",
			edit: func(_ *fakePanes, pr *fakeProcs) { q := pr.procs[201]; q.Cwd = ""; pr.procs[201] = q }},
		{name: "session name with a space", pane: "%2", reason: "valid terminal_id",
			edit: func(p *fakePanes, _ *fakeProcs) { p.panes[1].Session = "my work" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			panes, procs := world()
			tc.edit(panes, procs)
			f, _ := New(Options{Panes: panes, Procs: procs})
			rows, err := f.Discover(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, r := range rows {
				if r.Pane.ID != tc.pane || (tc.pane == "" && r.Agent != Claude) {
					continue
				}
				found = true
				if r.Controllable || !strings.Contains(r.Reason, tc.reason) {
					t.Errorf("row %s: controllable %v, reason %q; want not controllable because %q", r.TerminalID, r.Controllable, r.Reason, tc.reason)
				}
				if _, err := f.Verify(t.Context(), r); !errors.Is(err, ErrNotControllable) || !errors.Is(err, ErrIdentity) {
					t.Errorf("Verify of a non-controllable row: %v", err)
				}
			}
			if !found {
				t.Errorf("no row for pane %q in %+v", tc.pane, rows)
			}
		})
	}
}

// racyProcs changes the process table between Snapshot and Read.
type racyProcs struct {
	*fakeProcs
	after func(*fakeProcs)
}

func (r racyProcs) Snapshot() (*proc.Table, error) {
	t, err := r.fakeProcs.Snapshot()
	r.after(r.fakeProcs)
	return t, err
}

func TestDiscoverRaces(t *testing.T) {
	t.Parallel()
	for name, after := range map[string]func(*fakeProcs){
		"agent exited":   func(p *fakeProcs) { delete(p.procs, 201) },
		"pid reused":     func(p *fakeProcs) { q := p.procs[201]; q.StartTicks = 999; p.procs[201] = q },
		"nothing at all": func(*fakeProcs) {},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			panes, procs := world()
			f, _ := New(Options{Panes: panes, Procs: racyProcs{procs, after}})
			rows, err := f.Discover(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			has := false
			for _, r := range rows {
				has = has || r.Process.PID == 201
			}
			if want := name == "nothing at all"; has != want {
				t.Errorf("row for 201 present = %v, want %v", has, want)
			}
		})
	}
}

func TestDiscoverFailsWhole(t *testing.T) {
	t.Parallel()
	panes, procs := world()
	procs.snapErr = errors.New("proc: snapshot processes: permission denied")
	f, _ := New(Options{Panes: panes, Procs: procs})
	if rows, err := f.Discover(t.Context()); err == nil {
		t.Errorf("Discover with a failed snapshot = %d rows, want an error", len(rows))
	}
	// No panes: nothing to join, and /proc is not read.
	f, _ = New(Options{Panes: &fakePanes{}, Procs: procs})
	if rows, err := f.Discover(t.Context()); err != nil || len(rows) != 0 {
		t.Errorf("Discover without panes = %v, %v", rows, err)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without Panes succeeded")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	panes, procs = world()
	f, _ = New(Options{Panes: panes, Procs: procs})
	if _, err := f.Discover(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Discover with an ended context: %v", err)
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(*fakePanes, *fakeProcs)
		want error
	}{
		{name: "unchanged"},
		{name: "session renamed", edit: func(p *fakePanes, _ *fakeProcs) { p.panes[0].Session = "renamed" }},
		{name: "pane gone", want: ErrPaneChanged, edit: func(p *fakePanes, _ *fakeProcs) { p.panes = p.panes[1:] }},
		{name: "pane ambiguous", want: ErrPaneChanged, edit: func(p *fakePanes, _ *fakeProcs) { p.err = tmux.ErrAmbiguous }},
		{name: "tmux timed out", want: tmux.ErrUncertain, edit: func(p *fakePanes, _ *fakeProcs) { p.err = tmux.ErrUncertain }},
		{name: "pane respawned", want: ErrPaneChanged, edit: func(p *fakePanes, _ *fakeProcs) { p.panes[0].PID = 999 }},
		{name: "agent exited", want: ErrProcessGone, edit: func(_ *fakePanes, p *fakeProcs) { delete(p.procs, 102) }},
		{name: "pid reused", want: ErrProcessChanged, edit: func(_ *fakePanes, p *fakeProcs) { q := p.procs[102]; q.StartTicks++; p.procs[102] = q }},
		{name: "no longer codex", want: ErrProcessChanged, edit: func(_ *fakePanes, p *fakeProcs) { q := p.procs[102]; q.Argv = []string{"bash"}; p.procs[102] = q }},
		{name: "reparented out of the pane", want: ErrNotInPane, edit: func(_ *fakePanes, p *fakeProcs) { q := p.procs[102]; q.PPID = 1; p.procs[102] = q }},
		{name: "launcher exited", want: ErrNotInPane, edit: func(_ *fakePanes, p *fakeProcs) { delete(p.procs, 101) }},
		{name: "agent cwd changed", want: ErrCwdChanged, edit: func(_ *fakePanes, p *fakeProcs) { q := p.procs[102]; q.Cwd = "/tmp"; p.procs[102] = q }},
		{name: "pane path changed", want: ErrCwdChanged, edit: func(p *fakePanes, _ *fakeProcs) { p.panes[0].Path = "/tmp" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			panes, procs := world()
			f, _ := New(Options{Panes: panes, Procs: procs})
			rows, err := f.Discover(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			row := rows[0]
			if tc.edit != nil {
				tc.edit(panes, procs)
			}
			got, err := f.Verify(t.Context(), row)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got.Pane.Session != panes.panes[0].Session || got.TerminalID != FormatTerminalID(Codex, panes.panes[0].Target(), 102) {
					t.Errorf("Verify = %+v; want the refreshed pane", got)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify: %v; want %v", err, tc.want)
			}
			if tc.want != tmux.ErrUncertain && !errors.Is(err, ErrIdentity) {
				t.Errorf("Verify: %v does not match ErrIdentity", err)
			}
			if tc.want == tmux.ErrUncertain && errors.Is(err, ErrIdentity) {
				t.Errorf("a timed-out tmux says nothing about identity: %v", err)
			}
			if !strings.Contains(err.Error(), row.TerminalID) {
				t.Errorf("error %q does not name the terminal", err)
			}
		})
	}
}
