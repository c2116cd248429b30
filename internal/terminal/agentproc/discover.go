package agentproc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/clawconnect/clawconnect/internal/terminal/proc"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
)

// PaneLister lists and re-resolves tmux panes; *tmux.Client is one.
type PaneLister interface {
	ListPanes(ctx context.Context) ([]tmux.Pane, error)
	Resolve(ctx context.Context, socket, paneID string) (tmux.Pane, error)
}

// ProcReader reads processes; proc.FS is one.
type ProcReader interface {
	Snapshot() (*proc.Table, error)
	Read(pid int) (proc.Process, error)
	ReadStat(pid int) (proc.Process, error)
}

// subtreeSnapshotter is a ProcReader that can skip reading argv outside
// the panes (proc.FS.SnapshotUnder).
type subtreeSnapshotter interface {
	SnapshotUnder(roots []int) (*proc.Table, error)
}

// Options configures a Finder. Panes is required; Procs defaults to the
// host's /proc.
type Options struct {
	Panes  PaneLister
	Procs  ProcReader
	Logger *slog.Logger
}

// Finder discovers agent panes and verifies their identity. It holds no
// state between calls and is safe for concurrent use.
type Finder struct {
	panes PaneLister
	procs ProcReader
	log   *slog.Logger
}

// New returns a Finder for opts.
func New(opts Options) (*Finder, error) {
	if opts.Panes == nil {
		return nil, errors.New("agentproc: new finder: Options.Panes is required")
	}
	f := &Finder{panes: opts.Panes, procs: opts.Procs, log: opts.Logger}
	if f.procs == nil {
		f.procs = proc.FS{}
	}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	return f, nil
}

// Row is one tmux pane that holds a coding agent.
type Row struct {
	// TerminalID is the public id (FormatTerminalID of Agent, the pane's
	// target and the agent pid).
	TerminalID string
	// Agent is the coding agent.
	Agent Agent
	// Pane is the pane as listed; its Socket and ID are its identity.
	Pane tmux.Pane
	// Process is the agent process read in full (Cwd, Exe); its PID and
	// StartTicks fence the incarnation.
	Process proc.Process
	// Launchers are processes of the same agent between the pane and
	// Process, nearest first: the npm script `node …/codex` when it
	// spawns the native binary as a child (older Node). They are not the
	// agent. On Node 24 the script replaces itself with the native binary
	// (execve keeps pid and start time), so there is no launcher, and a
	// row read in the instant before shows Exe node (Version still comes
	// from the script's package).
	Launchers []int
	// Version is the agent's x.y.z version, or "" when unknown.
	Version string
	// Controllable is false when the pane cannot be driven safely; Reason
	// says why (several agent processes in the pane, a process inside
	// several panes, a legacy pane without a stable id, a pane path that
	// differs from the agent's cwd, an id that would not parse).
	Controllable bool
	Reason       string
	// Candidates lists every agent process found in the pane when there
	// was more than one (Controllable is then false); Agent, Process and
	// TerminalID then describe the first candidate as the snapshot saw it
	// (no Cwd or Exe).
	Candidates []int
}

// Incarnation is the agent process fence "pid:<pid>:start:<ticks>".
func (r Row) Incarnation() string { return r.Process.Incarnation() }

// Discover lists every pane on the configured tmux servers, takes one
// /proc snapshot, and returns one row per pane that holds at least one
// agent process by ancestry (the pane's process or a descendant),
// ordered by socket and pane id. A pane with no agent has no row; a pane
// with several, or whose agent descends from several panes, has a row
// with Controllable false. Apart from the one list-panes per socket it
// spawns nothing. A snapshot that cannot be read completely is an error,
// never an empty list.
func (f *Finder) Discover(ctx context.Context) ([]Row, error) {
	panes, err := f.panes.ListPanes(ctx)
	if err != nil {
		return nil, fmt.Errorf("discover agents: %w", err)
	}
	if len(panes) == 0 {
		return nil, nil
	}
	var tab *proc.Table
	if u, ok := f.procs.(subtreeSnapshotter); ok {
		roots := make([]int, len(panes))
		for i, p := range panes {
			roots[i] = p.PID
		}
		tab, err = u.SnapshotUnder(roots)
	} else {
		tab, err = f.procs.Snapshot()
	}
	if err != nil {
		return nil, fmt.Errorf("discover agents: %w", err)
	}
	return f.join(ctx, panes, tab)
}

// join builds the rows from a pane listing and a process table.
func (f *Finder) join(ctx context.Context, panes []tmux.Pane, tab *proc.Table) ([]Row, error) {
	byPID := map[int][]int{} // pane pid -> indexes into panes
	for i, p := range panes {
		byPID[p.PID] = append(byPID[p.PID], i)
	}
	type cand struct {
		pid   int
		agent Agent
		panes []int // every pane it descends from
	}
	perPane := map[int][]cand{}
	for _, pid := range tab.PIDs() {
		p, _ := tab.Get(pid)
		agent, ok := Classify(p.Argv)
		if !ok {
			continue
		}
		if parent, ok := tab.Get(p.PPID); ok && slices.Equal(parent.Argv, p.Argv) {
			// A child the agent forked and that has not called execve yet
			// (Codex starting a shell): the agent itself, not another one
			// or a launcher.
			continue
		}
		var in []int
		in = append(in, byPID[pid]...)
		for _, a := range tab.Ancestors(pid) {
			in = append(in, byPID[a]...)
		}
		if len(in) == 0 {
			continue
		}
		c := cand{pid: pid, agent: agent, panes: in}
		for _, i := range in {
			perPane[i] = append(perPane[i], c)
		}
	}
	var rows []Row
	for i, pane := range panes {
		cands := perPane[i]
		if len(cands) == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("discover agents: %w", err)
		}
		// A process of the same agent above another one is its launcher.
		var agents []cand
		launchers := map[int][]int{}
		for _, c := range cands {
			launcher := false
			for _, d := range cands {
				if d.pid != c.pid && d.agent == c.agent && slices.Contains(tab.Ancestors(d.pid), c.pid) {
					launcher = true
					break
				}
			}
			if !launcher {
				agents = append(agents, c)
			}
		}
		for _, a := range agents {
			for _, anc := range tab.Ancestors(a.pid) {
				if slices.ContainsFunc(cands, func(c cand) bool { return c.pid == anc && c.agent == a.agent }) {
					launchers[a.pid] = append(launchers[a.pid], anc)
				}
			}
		}
		chosen := agents[0]
		row := Row{Agent: chosen.agent, Pane: pane, Controllable: true, Launchers: launchers[chosen.pid]}
		switch {
		case len(agents) > 1:
			pids := make([]string, len(agents))
			for j, a := range agents {
				row.Candidates = append(row.Candidates, a.pid)
				pids[j] = string(a.agent) + " " + strconv.Itoa(a.pid)
			}
			row.Launchers = nil
			row.Controllable = false
			row.Reason = fmt.Sprintf("the pane holds %d agent processes (%s); exactly one is required", len(agents), strings.Join(pids, ", "))
			row.Process, _ = tab.Get(chosen.pid)
			row.TerminalID = FormatTerminalID(row.Agent, pane.Target(), chosen.pid)
			rows = append(rows, row)
			continue
		case len(chosen.panes) > 1:
			row.Controllable = false
			row.Reason = fmt.Sprintf("agent process %d descends from %d panes; it must belong to exactly one", chosen.pid, len(chosen.panes))
		case pane.ID == "":
			row.Controllable = false
			row.Reason = "the pane was listed in the legacy form without a socket and pane id"
		}
		p, err := f.procs.Read(chosen.pid)
		if errors.Is(err, proc.ErrNoProcess) {
			continue // it exited since the snapshot
		}
		if err != nil {
			return nil, fmt.Errorf("discover agents: %w", err)
		}
		snap, _ := tab.Get(chosen.pid)
		if p.StartTicks != snap.StartTicks {
			continue // the pid was recycled since the snapshot
		}
		row.Process = p
		row.TerminalID = FormatTerminalID(row.Agent, pane.Target(), p.PID)
		row.Version = processVersion(row.Agent, p)
		if row.Controllable {
			if _, err := ParseTerminalID(row.TerminalID); err != nil {
				row.Controllable = false
				row.Reason = fmt.Sprintf("the pane's target %q does not make a valid terminal_id (rename the session without spaces)", pane.Target())
			} else if p.Cwd == "" {
				row.Controllable = false
				row.Reason = "the agent's working directory cannot be read (another user's process?)"
			} else if filepath.Clean(pane.Path) != filepath.Clean(p.Cwd) {
				row.Controllable = false
				row.Reason = fmt.Sprintf("the pane's path %q differs from the agent's working directory %q", pane.Path, p.Cwd)
			}
		}
		rows = append(rows, row)
	}
	slices.SortFunc(rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Pane.Socket, b.Pane.Socket), comparePaneID(a.Pane.ID, b.Pane.ID), cmp.Compare(a.Pane.Target(), b.Pane.Target()))
	})
	return rows, nil
}

// processVersion reads the agent's version from its executable, or, for
// an agent still running as `node <script>` (the npm launcher before it
// replaces itself with the native binary), from the script's package.
func processVersion(agent Agent, p proc.Process) string {
	if v, err := Version(agent, p.Exe); err == nil {
		return v
	}
	if base := filepath.Base(p.Exe); base != "node" && base != "nodejs" {
		return ""
	}
	for _, a := range p.Argv[min(1, len(p.Argv)):] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if !filepath.IsAbs(a) {
			a = filepath.Join(p.Cwd, a)
		}
		if script, err := filepath.EvalSymlinks(a); err == nil {
			if v, err := Version(agent, script); err == nil {
				return v
			}
		}
		break
	}
	return ""
}

func comparePaneID(a, b string) int {
	x, _ := strconv.Atoi(strings.TrimPrefix(a, "%"))
	y, _ := strconv.Atoi(strings.TrimPrefix(b, "%"))
	return cmp.Compare(x, y)
}

// Identity errors of Verify; every one also matches ErrIdentity.
var (
	// ErrIdentity matches any identity failure of Verify.
	ErrIdentity = errors.New("terminal identity changed")
	// ErrNotControllable: the row was not controllable when discovered.
	ErrNotControllable = identityError("the terminal is not controllable")
	// ErrPaneChanged: the pane is gone, ambiguous, or its process changed.
	ErrPaneChanged = identityError("the pane is gone or changed")
	// ErrProcessGone: the agent process exited.
	ErrProcessGone = identityError("the agent process is gone")
	// ErrProcessChanged: the pid now names another incarnation or a
	// process that is no longer the agent.
	ErrProcessChanged = identityError("the agent process changed")
	// ErrNotInPane: the agent process no longer descends from the pane.
	ErrNotInPane = identityError("the agent process is no longer inside the pane")
	// ErrCwdChanged: the agent's or the pane's working directory changed.
	ErrCwdChanged = identityError("the working directory changed")
)

type identityErr struct{ msg string }

func identityError(msg string) error        { return &identityErr{msg} }
func (e *identityErr) Error() string        { return e.msg }
func (e *identityErr) Is(target error) bool { return target == ErrIdentity }

// Verify checks, right before terminal access, that row still describes
// the same thing: the pane resolves again by its socket and pane id with
// the same pane process; the agent pid is the same incarnation (start
// ticks) and still classifies as the same agent; it still descends from
// the pane's process; and both its cwd and the pane's path equal the
// cwd recorded in row. It returns the row refreshed with the re-listed
// pane (its target may change if the session was renamed, its identity
// may not). A failure wraps one of the identity errors (all matching
// ErrIdentity) and, for the pane, the tmux error (tmux.ErrUncertain when
// tmux timed out, which says nothing about the identity).
func (f *Finder) Verify(ctx context.Context, row Row) (Row, error) {
	id := row.TerminalID
	if !row.Controllable {
		return Row{}, fmt.Errorf("verify %s: %w: %s", id, ErrNotControllable, row.Reason)
	}
	pane, err := f.panes.Resolve(ctx, row.Pane.Socket, row.Pane.ID)
	if errors.Is(err, tmux.ErrUncertain) {
		return Row{}, fmt.Errorf("verify %s: %w", id, err)
	}
	if err != nil {
		return Row{}, fmt.Errorf("verify %s: %w: %w", id, ErrPaneChanged, err)
	}
	if pane.PID != row.Pane.PID {
		return Row{}, fmt.Errorf("verify %s: %w: pane %s now runs process %d, not %d", id, ErrPaneChanged, pane.ID, pane.PID, row.Pane.PID)
	}
	p, err := f.procs.Read(row.Process.PID)
	if errors.Is(err, proc.ErrNoProcess) {
		return Row{}, fmt.Errorf("verify %s: %w: %w", id, ErrProcessGone, err)
	}
	if err != nil {
		return Row{}, fmt.Errorf("verify %s: %w", id, err)
	}
	if p.StartTicks != row.Process.StartTicks {
		return Row{}, fmt.Errorf("verify %s: %w: pid %d is now %s, not %s", id, ErrProcessChanged, p.PID, p.Incarnation(), row.Incarnation())
	}
	if agent, ok := Classify(p.Argv); !ok || agent != row.Agent {
		return Row{}, fmt.Errorf("verify %s: %w: pid %d no longer runs %s (argv %q)", id, ErrProcessChanged, p.PID, row.Agent, clipArgv(p.Argv))
	}
	if err := f.inside(p.PID, pane.PID); err != nil {
		return Row{}, fmt.Errorf("verify %s: %w", id, err)
	}
	want := filepath.Clean(row.Process.Cwd)
	if row.Process.Cwd == "" || filepath.Clean(p.Cwd) != want {
		return Row{}, fmt.Errorf("verify %s: %w: the agent's working directory is %q, want %q", id, ErrCwdChanged, p.Cwd, row.Process.Cwd)
	}
	if filepath.Clean(pane.Path) != want {
		return Row{}, fmt.Errorf("verify %s: %w: the pane's path is %q, want %q", id, ErrCwdChanged, pane.Path, row.Process.Cwd)
	}
	out := row
	out.Pane = pane
	out.Process = p
	out.TerminalID = FormatTerminalID(row.Agent, pane.Target(), p.PID)
	return out, nil
}

// inside walks pid's parents through /proc until it meets panePID.
func (f *Finder) inside(pid, panePID int) error {
	for range 4096 {
		if pid == panePID {
			return nil
		}
		p, err := f.procs.ReadStat(pid)
		if errors.Is(err, proc.ErrNoProcess) {
			return fmt.Errorf("%w: an ancestor (%d) exited", ErrNotInPane, pid)
		}
		if err != nil {
			return err
		}
		if p.PPID <= 0 {
			break
		}
		pid = p.PPID
	}
	return fmt.Errorf("%w: it does not descend from the pane's process %d", ErrNotInPane, panePID)
}

func clipArgv(argv []string) []string {
	if len(argv) > 4 {
		return append(slices.Clone(argv[:4]), "…")
	}
	return argv
}
