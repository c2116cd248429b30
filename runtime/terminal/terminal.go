// Package terminal is the executor adapter over terminal Turns: a run is
// one Turn typed into a Codex or Claude Code TUI in a tmux pane (runtime ids
// codex-tmux and claude-code-tmux), and its events come from tailing the
// agent's own session file (Codex rollout, Claude Code transcript) from
// the Turn's anchor: assistant text, tool calls with their results, usage
// when the file records it, and exactly one done. The pane stays a human's
// to watch and type into; a run is refused while it is busy.
//
// A pane of another terminal host (another machine on the same store) is
// driven through that host, and its session file is on that machine: a run
// there streams what the Turn's record in the store holds — running, each
// approval prompt, the reply as one text event and exactly one done — and
// no tool calls or usage. No local file is opened for it, and
// WriteContext refuses it.
package terminal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/termapi"
)

// Runtime ids of the adapter.
const (
	IDCodex      executor.RuntimeID = "codex-tmux"
	IDClaudeCode executor.RuntimeID = "claude-code-tmux"
)

// DefaultPoll is how often a followed run reads its Turn and session file.
const DefaultPoll = 100 * time.Millisecond

// Turns is what the adapter needs from a Turn service, in termapi's types
// (the clawconnect commands pass their in-process service or a client of
// the monitor host; a host may bring its own). Implementations must be
// safe for concurrent use. A service whose panes live on several machines
// also has OtherHost (as terminal.Service does), which Health asks.
type Turns interface {
	List(ctx context.Context) (termapi.ListResult, error)
	Send(ctx context.Context, r termapi.SendRequest) (termapi.SendResult, error)
	Status(ctx context.Context, turnID string) (termapi.TurnView, error)
	Cancel(ctx context.Context, turnID string) (termapi.TurnView, error)
	SessionFile(ctx context.Context, turnID string) (termapi.SessionFile, error)
}

// Options configures an Adapter. Zero values are the documented defaults.
type Options struct {
	// ID is IDCodex or IDClaudeCode; required.
	ID executor.RuntimeID
	// Turns is the Turn service; required.
	Turns Turns
	// TerminalID is the pane a run goes to when StartOptions.AgentID names
	// none (a terminal_id from `clawconnect terminal list`).
	TerminalID string
	// Poll is the follow interval; DefaultPoll when zero.
	Poll time.Duration
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
}

// Adapter is the executor.RuntimeAdapter over terminal Turns. It is safe
// for concurrent use.
type Adapter struct {
	o     Options
	agent string
	log   *slog.Logger

	mu     sync.Mutex
	runs   map[*executor.RunHandle]*run
	model  string
	ctx    context.Context // cancelled by Dispose
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type run struct {
	turnID, sessionID string
}

// New returns an Adapter. A missing ID or Turns makes every Start fail
// with a message saying what to configure.
func New(o Options) *Adapter {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	agent := termapi.AgentCodex
	if o.ID == IDClaudeCode {
		agent = termapi.AgentClaude
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Adapter{o: o, agent: agent, log: o.Logger, runs: map[*executor.RunHandle]*run{}, ctx: ctx, cancel: cancel}
}

var (
	_ executor.RuntimeAdapter = (*Adapter)(nil)
	_ executor.Disposer       = (*Adapter)(nil)
)

// ID implements executor.Identity.
func (a *Adapter) ID() executor.RuntimeID { return a.o.ID }

// ParticipantKind implements executor.Identity.
func (a *Adapter) ParticipantKind() executor.ParticipantKind { return executor.ParticipantAgent }

// Capabilities implements executor.Identity: whole messages (no deltas),
// tool approvals surface (the Turn waits for terminal approve), Resume
// continues a terminal Session (session_exact). A run on another
// terminal host's pane streams its status, approvals and reply only (see
// the package doc).
func (a *Adapter) Capabilities() executor.Capabilities {
	return executor.Capabilities{ToolApproval: true, Resume: true, Models: []string{},
		RuntimeClass: executor.ClassConnectedSubstrate}
}

// paneHosts is the optional part of a Turn service on several machines
// that tells another host's pane from one of this machine's.
type paneHosts interface {
	OtherHost(terminalID string) (host string, ok bool)
}

// Health implements executor.Identity: healthy when a pane of the
// adapter's agent is listed, or when Options.TerminalID is a pane of
// another terminal host (the Turn service says so), which that host
// checks when a run starts.
func (a *Adapter) Health(ctx context.Context) executor.Health {
	if a.o.Turns == nil {
		return executor.Health{Message: "no terminal Turn service configured"}
	}
	if p, ok := a.o.Turns.(paneHosts); ok && a.o.TerminalID != "" {
		if host, other := p.OtherHost(a.o.TerminalID); other {
			return executor.Health{OK: true, Message: a.o.TerminalID + " runs on terminal host " + host +
				", which types and follows the run; a start is refused while that host is away"}
		}
	}
	res, err := a.o.Turns.List(ctx)
	if err != nil {
		return executor.Health{Message: "list terminals: " + err.Error()}
	}
	for _, r := range res.Terminals {
		if r.Agent == a.agent && (a.o.TerminalID == "" || r.ID == a.o.TerminalID) {
			return executor.Health{OK: true, Message: r.ID + " is " + r.ActivityState}
		}
	}
	return executor.Health{Message: "no " + a.agent + " pane found in tmux; start one, or check CLAWCONNECT_TMUX_SOCKETS"}
}

// Start types the run's prompt into the pane as a new Turn and returns once
// the agent took it. The pane is StartOptions.AgentID, else
// Options.TerminalID; StartOptions.Resume, a terminal session_id, sends to
// that Session instead (session_exact). A pane that cannot take the
// request now is an error and nothing is typed.
func (a *Adapter) Start(ctx context.Context, _ executor.Task, opts executor.StartOptions) (*executor.RunHandle, error) {
	if a.o.Turns == nil || (a.o.ID != IDCodex && a.o.ID != IDClaudeCode) {
		return nil, errors.New("terminal: start: the adapter needs Options.ID (codex-tmux or claude-code-tmux) and Options.Turns")
	}
	if opts.SessionKey == "" || strings.TrimSpace(opts.Message) == "" {
		return nil, errors.New("terminal: start: SessionKey and Message are required")
	}
	req := termapi.SendRequest{Request: opts.Prompt()}
	switch {
	case strings.HasPrefix(opts.Resume, "session-"):
		req.SessionID = opts.Resume
	case opts.Resume != "":
		return nil, fmt.Errorf("terminal: start: resume %q is not a terminal session_id (session-…)", opts.Resume)
	case opts.AgentID != "":
		req.TerminalID = opts.AgentID
	default:
		req.TerminalID = a.o.TerminalID
	}
	if req.SessionID == "" && req.TerminalID == "" {
		return nil, errors.New("terminal: start: no pane: pass a terminal id (clawconnect exec --terminal ID; see `clawconnect terminal list`)")
	}
	res, err := a.o.Turns.Send(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("terminal: start: %w", err)
	}
	a.log.Info("turn sent", "turn_id", res.TurnID, "session_id", res.SessionID, "submission_outcome", res.SubmissionOutcome)
	h := executor.NewRunHandle(a.o.ID, opts.SessionKey)
	a.mu.Lock()
	a.runs[h] = &run{turnID: res.TurnID, sessionID: res.SessionID}
	a.mu.Unlock()
	return h, nil
}

func (a *Adapter) lookup(h *executor.RunHandle) (*run, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.runs[h]
	if !ok {
		return nil, executor.ErrNoSession
	}
	return r, nil
}

// Events implements executor.Runner: every stream reads the Turn's records
// from its anchor, so a late subscriber gets the whole run. The stream
// ends (io.EOF after its done) when the Turn ends.
func (a *Adapter) Events(ctx context.Context, h *executor.RunHandle) (*executor.Stream, error) {
	r, err := a.lookup(h)
	if err != nil {
		return nil, err
	}
	fctx, cancel := context.WithCancel(a.ctx)
	s := executor.NewStream(executor.StreamOptions{Release: cancel})
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer cancel()
		a.follow(fctx, r, h, s)
	}()
	return s, nil
}

// follow emits the Turn's events into s until the Turn ends or ctx does.
func (a *Adapter) follow(ctx context.Context, r *run, h *executor.RunHandle, s *executor.Stream) {
	defer s.Finish()
	emit := func(p executor.Payload) {
		h.BindRunIDOnce(r.turnID)
		s.Emit(r.turnID, r.sessionID, p)
	}
	// The agent took the request (native evidence): the run is live.
	emit(executor.Status{Phase: executor.PhaseRunning, Detail: "turn " + r.turnID + " accepted"})
	dec := newDecoder(a.agent)
	var (
		path    string
		remote  bool // the pane is another host's: its session file is on that machine
		off     int64
		partial []byte
		shown   string // the approval prompt reported last
		lastErr string
	)
	tick := time.NewTicker(a.o.Poll)
	defer tick.Stop()
	for {
		// The Turn first, then the file: a Turn seen ended has its
		// completion records in the file already.
		v, err := a.o.Turns.Status(ctx, r.turnID)
		if err != nil && ctx.Err() == nil && err.Error() != lastErr {
			lastErr = err.Error()
			emit(executor.Error{Code: "status", Message: err.Error()})
		}
		if path == "" && !remote {
			f, ferr := a.o.Turns.SessionFile(ctx, r.turnID)
			switch {
			case errors.Is(ferr, termapi.ErrOtherHost):
				remote = true
				a.log.Info("following a Turn of another host from its record", "turn_id", r.turnID, "reason", ferr.Error())
				emit(executor.Status{Phase: executor.PhaseRunning, Detail: "turn " + r.turnID +
					" runs on another terminal host: the stream carries its status, approvals and reply, not its tool calls or usage"})
			case ferr == nil:
				path, off = f.Path, f.Offset
			}
		}
		if path != "" {
			var lines [][]byte
			lines, off, partial = readLines(path, off, partial)
			for _, l := range lines {
				for _, p := range dec.line(l) {
					emit(p)
				}
			}
		}
		if err == nil {
			if ap := v.Approval; v.Status == termapi.TurnWaitingForOpenClaw && ap != nil && ap.Fingerprint != shown {
				shown = ap.Fingerprint
				emit(executor.Status{Phase: executor.PhaseRunning, Detail: "awaiting approval (" + ap.Kind + ") " + ap.Command +
					": clawconnect terminal approve " + r.turnID + " --fingerprint " + ap.Fingerprint})
			}
			if done, ok := doneOf(v, dec.usage()); ok {
				if remote && v.Status == termapi.TurnIdle && done.Summary != "" {
					emit(executor.TextDelta{Text: done.Summary}) // the reply, as the owning host recorded it
				}
				if u := dec.usage(); u != nil {
					emit(executor.Cost{Usage: *u, Estimated: true})
				}
				if done.Reason == executor.DoneError {
					emit(executor.Error{Code: string(v.Status), Message: done.Summary, Fatal: true})
				}
				emit(done)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// doneOf is the done event of a Turn that has ended.
func doneOf(v termapi.TurnView, u *executor.Usage) (executor.Done, bool) {
	text := ""
	if v.Result != nil {
		text = v.Result.Text
	}
	switch v.Status {
	case termapi.TurnIdle:
		return executor.Done{Reason: executor.DoneSuccess, Summary: text, Usage: u}, true
	case termapi.TurnCancelled, termapi.TurnClosed:
		return executor.Done{Reason: executor.DoneAborted, Summary: text, Usage: u}, true
	case termapi.TurnFailed:
		if text == "" {
			text = "the turn failed"
		}
		if v.DetectorDiagnostic != "" {
			text += " (" + v.DetectorDiagnostic + ")"
		}
		return executor.Done{Reason: executor.DoneError, Summary: text, Usage: u}, true
	case termapi.TurnStalled:
		return executor.Done{Reason: executor.DoneError, Summary: "the turn stalled: " + v.StalledReason, Usage: u}, true
	}
	return executor.Done{}, false
}

// readLines reads path from off and returns the complete lines, the offset
// after them and the partial last line (kept for the next read).
func readLines(path string, off int64, partial []byte) ([][]byte, int64, []byte) {
	f, err := os.Open(path)
	if err != nil {
		return nil, off, partial
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, off, partial
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil || len(b) == 0 {
		return nil, off, partial
	}
	off += int64(len(b))
	b = append(partial, b...)
	var lines [][]byte
	for {
		i := indexNL(b)
		if i < 0 {
			break
		}
		if i > 0 {
			lines = append(lines, b[:i])
		}
		b = b[i+1:]
	}
	return lines, off, append([]byte(nil), b...)
}

func indexNL(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return -1
}

// Abort implements executor.Runner: it interrupts the agent (the Turn's
// cancel: the key a human would press); the stream then ends in done:
// aborted.
func (a *Adapter) Abort(ctx context.Context, h *executor.RunHandle) error {
	r, err := a.lookup(h)
	if err != nil {
		return err
	}
	a.log.Info("abort", "turn_id", r.turnID)
	if _, err := a.o.Turns.Cancel(ctx, r.turnID); err != nil {
		return fmt.Errorf("terminal: abort: %w", err)
	}
	return nil
}

// SetModel implements executor.Controller. A TUI's model is chosen in the
// pane (its /model command, which a Turn never types), so the wish is only
// recorded in the log; it is not applied.
func (a *Adapter) SetModel(_ context.Context, h *executor.RunHandle, model string) error {
	r, err := a.lookup(h)
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.model = model
	a.mu.Unlock()
	a.log.Info("set model (not applied: choose the model in the pane)", "turn_id", r.turnID, "model", model)
	return nil
}

// WriteContext implements executor.Controller: it writes key (a file name
// such as AGENTS.md) with value into the working directory of the run's
// pane, which the agent reads on its next turn. A pane of another terminal
// host is refused (termapi.ErrRefused, naming the host): its working
// directory is on that machine, and nothing is written on this one.
func (a *Adapter) WriteContext(ctx context.Context, h *executor.RunHandle, key, value string) error {
	r, err := a.lookup(h)
	if err != nil {
		return err
	}
	if key == "" || key != filepath.Base(key) || key == "." || key == ".." {
		return fmt.Errorf("terminal: write context: key %q must be a plain file name such as AGENTS.md", key)
	}
	// The session file's answer says whose machine the pane is on.
	if _, err := a.o.Turns.SessionFile(ctx, r.turnID); errors.Is(err, termapi.ErrOtherHost) {
		return fmt.Errorf("terminal: write context: %w: nothing was written on this machine, since the pane's working directory is on its own host (%w); write %s there, or run on a pane of this machine",
			termapi.ErrRefused, err, key)
	} else if err != nil {
		return fmt.Errorf("terminal: write context: %w", err)
	}
	v, err := a.o.Turns.Status(ctx, r.turnID)
	if err != nil {
		return fmt.Errorf("terminal: write context: %w", err)
	}
	list, err := a.o.Turns.List(ctx)
	if err != nil {
		return fmt.Errorf("terminal: write context: %w", err)
	}
	for _, row := range list.Terminals {
		if row.ID == v.TerminalID && row.Cwd != "" {
			path := filepath.Join(row.Cwd, key)
			if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
				return fmt.Errorf("terminal: write context: %w", err)
			}
			a.log.Info("write context", "turn_id", r.turnID, "path", path, "bytes", len(value))
			return nil
		}
	}
	return fmt.Errorf("terminal: write context: the pane %s of turn %s is gone", v.TerminalID, r.turnID)
}

// Dispose implements executor.Disposer: it stops every stream's follower
// and waits for them. The Turns keep running in their panes. It is
// idempotent.
func (a *Adapter) Dispose(context.Context) error {
	a.cancel()
	a.wg.Wait()
	return nil
}
