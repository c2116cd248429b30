// Package oneshot is the shared substrate of the subprocess runtime adapters
// (Claude Code, Codex): it spawns one CLI process per run in its own process
// group with a scrubbed environment, splits its stdout into lines for a
// runtime-specific Decoder, fans the normalized events out to subscribers
// (buffering them until the first one), guarantees exactly one terminal
// event per run, and aborts with SIGTERM to the group, then SIGKILL after a
// grace period.
package oneshot

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clawconnect/clawconnect/executor"
)

// Defaults of Options.
const (
	DefaultKillGrace    = 3 * time.Second
	DefaultMaxLineBytes = 16 << 20
	// DefaultSessionIdleTTL is how long a session with no live run is kept
	// after its last run ended.
	DefaultSessionIdleTTL = time.Hour
	// pipeDrain is how long stdout and stderr are still read after the
	// process leader exits (a grandchild may hold the pipes open).
	pipeDrain = 500 * time.Millisecond
	// maxAccumulated bounds the text kept for abort summaries.
	maxAccumulated = 64 << 10
	stderrTail     = 4 << 10
)

// Decoder maps a runtime's stdout lines to normalized payloads. One decoder
// serves one run and is called from one goroutine.
type Decoder interface {
	// Decode maps one non-blank line (without its newline) by calling emit
	// for each payload, in order, and returns the runtime's native session
	// id when the line carries one. The line is only valid during the call.
	Decode(line []byte, emit func(executor.Payload)) (nativeID string)
}

// Command is one process to run.
type Command struct {
	Path  string
	Args  []string // without the program name
	Dir   string
	Env   []string
	Stdin string // written to the process's stdin; empty means /dev/null
}

// Spec is what a runtime-specific adapter supplies to the engine.
type Spec struct {
	ID   executor.RuntimeID
	Name string // short program name for messages ("claude", "codex")
	Caps executor.Capabilities
	// Command builds the process for a run. model is the effective model
	// (the start option, else the session's SetModel value); it may be empty.
	Command func(opts executor.StartOptions, model string) (Command, error)
	// NewDecoder returns the decoder of one run; model is as for Command.
	NewDecoder func(opts executor.StartOptions, model string) Decoder
	// LookPath resolves the binary for Health; it returns the path or an
	// error naming what is missing.
	LookPath func() (string, error)
}

// Options tune the engine. Zero values are the defaults.
type Options struct {
	// Logger receives one record per side effect (abort, set model, write
	// context) and process lifecycle; nil discards.
	Logger *slog.Logger
	// KillGrace is the wait between SIGTERM and SIGKILL on abort;
	// 0 means DefaultKillGrace.
	KillGrace time.Duration
	// MaxLineBytes bounds one stdout line; longer lines are skipped and
	// reported as a non-fatal error. 0 means DefaultMaxLineBytes.
	MaxLineBytes int
	// QueueMax bounds each subscriber's stream; 0 means the executor default.
	QueueMax int
	// SessionIdleTTL is how long the engine keeps a session (its last run's
	// events, model and native id) once no run of it is live; a long-lived
	// host would otherwise keep every session it ever ran. Later calls
	// naming an evicted session fail with executor.ErrNoSession, as after
	// Forget. 0 means DefaultSessionIdleTTL.
	SessionIdleTTL time.Duration
}

// Engine implements executor.RuntimeAdapter for a Spec. It is safe for
// concurrent use. Runs are keyed by session key; a second Start on a key
// replaces the key's current run (the previous process runs to its end).
type Engine struct {
	spec Spec
	opts Options
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[string]*session
	procs    map[*executor.RunHandle]*proc // each session's current run, and older runs still live
	live     map[*proc]struct{}
	liveDone chan struct{} // closed and replaced whenever live shrinks
	swept    time.Time     // last evictIdle pass
}

type session struct {
	cur      *proc
	model    string // from SetModel; used by the next run
	cwd      string
	nativeID string    // latest native session id seen
	idleAt   time.Time // when its last live run ended; zero while one is live
}

// New returns an engine for spec.
func New(spec Spec, opts Options) *Engine {
	if opts.KillGrace <= 0 {
		opts.KillGrace = DefaultKillGrace
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.SessionIdleTTL <= 0 {
		opts.SessionIdleTTL = DefaultSessionIdleTTL
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{spec: spec, opts: opts, log: log, sessions: map[string]*session{}, procs: map[*executor.RunHandle]*proc{}, live: map[*proc]struct{}{}, liveDone: make(chan struct{})}
}

// ID implements executor.RuntimeAdapter.
func (e *Engine) ID() executor.RuntimeID { return e.spec.ID }

// ParticipantKind implements executor.RuntimeAdapter.
func (e *Engine) ParticipantKind() executor.ParticipantKind { return executor.ParticipantAgent }

// Capabilities implements executor.RuntimeAdapter.
func (e *Engine) Capabilities() executor.Capabilities {
	c := e.spec.Caps
	if c.Models == nil {
		c.Models = []string{}
	}
	return c
}

// Health implements executor.RuntimeAdapter: the binary must resolve to an
// executable file.
func (e *Engine) Health(context.Context) executor.Health {
	p, err := e.spec.LookPath()
	if err != nil {
		return executor.Health{OK: false, Message: err.Error()}
	}
	return executor.Health{OK: true, Message: e.spec.Name + " at " + p}
}

// Start implements executor.RuntimeAdapter: it spawns the run's process
// and returns once it is running. ctx bounds only the spawn; the process
// lives until it exits or is aborted.
func (e *Engine) Start(_ context.Context, _ executor.Task, opts executor.StartOptions) (*executor.RunHandle, error) {
	if opts.SessionKey == "" {
		return nil, fmt.Errorf("start %s: empty session key", e.spec.Name)
	}
	e.mu.Lock()
	e.evictIdle(time.Now())
	sess := e.sessions[opts.SessionKey]
	if sess == nil {
		sess = &session{}
		e.sessions[opts.SessionKey] = sess
	}
	model := opts.Model
	if model == "" {
		model = sess.model
	}
	e.mu.Unlock()

	cmdSpec, err := e.spec.Command(opts, model)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", e.spec.Name, err)
	}
	run := executor.NewRunHandle(e.spec.ID, opts.SessionKey)
	p := &proc{e: e, run: run, dec: e.spec.NewDecoder(opts, model), subs: map[*executor.Stream]struct{}{}, done: make(chan struct{})}
	if err := p.spawn(cmdSpec); err != nil {
		return nil, fmt.Errorf("start %s: %w", e.spec.Name, err)
	}
	e.mu.Lock()
	if old := sess.cur; old != nil && !e.isLive(old) {
		delete(e.procs, old.run)
	}
	sess.cur = p
	sess.cwd = cmdSpec.Dir
	sess.idleAt = time.Time{}
	e.procs[run] = p
	e.live[p] = struct{}{}
	e.mu.Unlock()
	e.log.Info("run started", "runtime", string(e.spec.ID), "session_key", opts.SessionKey, "pid", p.pid)
	go p.wait()
	go p.readStderr()
	go p.readStdout()
	return run, nil
}

// lookup finds run's session and process; the process is nil for a handle
// this engine did not start (or whose run it no longer keeps).
func (e *Engine) lookup(run *executor.RunHandle) (*session, *proc, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	sess := e.sessions[run.SessionKey]
	if sess == nil {
		return nil, nil, fmt.Errorf("%s session %q: %w", e.spec.Name, run.SessionKey, executor.ErrNoSession)
	}
	return sess, e.procs[run], nil
}

func (e *Engine) isLive(p *proc) bool {
	_, ok := e.live[p]
	return ok
}

// Events implements executor.RuntimeAdapter. The first subscriber of a run
// receives everything the process printed so far; the stream ends after
// the run's terminal event once the process has exited.
func (e *Engine) Events(_ context.Context, run *executor.RunHandle) (*executor.Stream, error) {
	_, p, err := e.lookup(run)
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	if p == nil {
		// A run this engine does not keep (a restored handle): an ended
		// stream.
		s := executor.NewStream(executor.StreamOptions{})
		s.Finish()
		return s, nil
	}
	return p.subscribe(), nil
}

// Abort implements executor.RuntimeAdapter: SIGTERM to the run's process
// group now, SIGKILL after the grace period if it is still alive. The
// stream then ends with done: aborted. Aborting an ended run does nothing.
func (e *Engine) Abort(_ context.Context, run *executor.RunHandle) error {
	_, p, err := e.lookup(run)
	if err != nil {
		return fmt.Errorf("abort: %w", err)
	}
	if p == nil {
		return nil
	}
	p.abort()
	return nil
}

// SetModel implements executor.RuntimeAdapter. A CLI fixes its model when
// it starts, so the model applies to the session's next run (a resume).
func (e *Engine) SetModel(_ context.Context, run *executor.RunHandle, model string) error {
	sess, _, err := e.lookup(run)
	if err != nil {
		return fmt.Errorf("set model: %w", err)
	}
	e.mu.Lock()
	sess.model = model
	e.mu.Unlock()
	e.log.Info("set model", "runtime", string(e.spec.ID), "session_key", run.SessionKey, "model", model)
	return nil
}

// WriteContext implements executor.RuntimeAdapter: it writes key as a file
// (a path local to the run's working directory, parents created) holding
// value.
func (e *Engine) WriteContext(_ context.Context, run *executor.RunHandle, key, value string) error {
	sess, _, err := e.lookup(run)
	if err != nil {
		return fmt.Errorf("write context: %w", err)
	}
	if !filepath.IsLocal(key) {
		return fmt.Errorf("write context: key %q is not a local relative path", key)
	}
	e.mu.Lock()
	dir := sess.cwd
	e.mu.Unlock()
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return fmt.Errorf("write context: %w", err)
		}
	}
	path := filepath.Join(dir, key)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write context: %w", err)
	}
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("write context: %w", err)
	}
	e.log.Info("write context", "runtime", string(e.spec.ID), "session_key", run.SessionKey, "key", key, "path", path, "bytes", len(value))
	return nil
}

// codecBlob is the serialized form of a session.
type codecBlob struct {
	SessionKey string  `json:"sessionKey"`
	SessionID  *string `json:"sessionId"`
}

// SerializeSession implements executor.SessionCodec: the session key and
// the latest native session id (the resume id).
func (e *Engine) SerializeSession(_ context.Context, run *executor.RunHandle) (string, error) {
	e.mu.Lock()
	var id string
	if sess := e.sessions[run.SessionKey]; sess != nil {
		id = sess.nativeID
	}
	e.mu.Unlock()
	if id == "" {
		if rid, ok := run.RunID(); ok && rid != run.SessionKey {
			id = rid
		}
	}
	b := codecBlob{SessionKey: run.SessionKey}
	if id != "" {
		b.SessionID = &id
	}
	out, err := json.Marshal(b)
	if err != nil {
		return "", fmt.Errorf("serialize session: %w", err)
	}
	return string(out), nil
}

// RestoreSession implements executor.SessionCodec: a handle whose run id is
// the native session id, to pass as StartOptions.Resume.
func (e *Engine) RestoreSession(_ context.Context, blob string) (*executor.RunHandle, error) {
	var b codecBlob
	if err := json.Unmarshal([]byte(blob), &b); err != nil {
		return nil, fmt.Errorf("restore session: %w", err)
	}
	h := executor.NewRunHandle(e.spec.ID, b.SessionKey)
	if b.SessionID != nil {
		h.BindRunID(*b.SessionID)
	}
	return h, nil
}

// Dispose implements executor.Disposer: it aborts every live run and waits
// until their processes have exited (or ctx ends).
func (e *Engine) Dispose(ctx context.Context) error {
	for {
		e.mu.Lock()
		procs := make([]*proc, 0, len(e.live))
		for p := range e.live {
			procs = append(procs, p)
		}
		ch := e.liveDone
		e.mu.Unlock()
		if len(procs) == 0 {
			return nil
		}
		for _, p := range procs {
			p.abort() // takes p.mu; never under e.mu
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("dispose %s: %w", e.spec.Name, ctx.Err())
		}
	}
}

// Forget drops what the engine keeps about a session (its last run and
// buffered events, the model set on it, its native id). A live run is not
// stopped; Abort it first. Later calls naming the session fail with
// executor.ErrNoSession.
func (e *Engine) Forget(sessionKey string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.forgetLocked(sessionKey)
}

func (e *Engine) forgetLocked(sessionKey string) {
	delete(e.sessions, sessionKey)
	for run := range e.procs {
		if run.SessionKey == sessionKey {
			delete(e.procs, run)
		}
	}
}

// Wait blocks until no run of the engine is live or ctx ends.
func (e *Engine) Wait(ctx context.Context) error {
	for {
		e.mu.Lock()
		n, ch := len(e.live), e.liveDone
		e.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// evictIdle drops the sessions idle for longer than SessionIdleTTL. It runs
// at most once per quarter TTL, so a Start costs O(1) amortized. e.mu held.
func (e *Engine) evictIdle(now time.Time) {
	ttl := e.opts.SessionIdleTTL
	if now.Sub(e.swept) < ttl/4 {
		return
	}
	e.swept = now
	for key, sess := range e.sessions {
		if !sess.idleAt.IsZero() && now.Sub(sess.idleAt) >= ttl {
			e.forgetLocked(key)
		}
	}
}

func (e *Engine) ended(p *proc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.live, p)
	if sess := e.sessions[p.run.SessionKey]; sess == nil || sess.cur != p {
		delete(e.procs, p.run) // superseded by a newer run of the session
	} else {
		sess.idleAt = time.Now()
	}
	close(e.liveDone)
	e.liveDone = make(chan struct{})
}

func (e *Engine) recordNativeID(key, id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if sess := e.sessions[key]; sess != nil {
		sess.nativeID = id
	}
}

// item is one mapped payload with the native id of the line it came from.
type item struct {
	p        executor.Payload
	nativeID string
}

// proc is one run's process and its fan-out.
type proc struct {
	e   *Engine
	run *executor.RunHandle
	dec Decoder
	cmd *exec.Cmd
	pid int

	stdout, stderr *os.File
	exited         chan struct{} // closed when the leader has been reaped
	stderrDone     chan struct{} // closed when stderr is drained
	done           chan struct{} // closed when the run is finished
	waitErr        error

	mu       sync.Mutex
	subs     map[*executor.Stream]struct{}
	backlog  []item
	attached bool
	finished bool
	aborted  bool
	terminal bool
	// fallbackBound is set while the run id is the session key standing in
	// for a native id not seen yet.
	fallbackBound bool
	accumulated   strings.Builder
	killTimer     *time.Timer
	stderrTail    []byte
}

func (p *proc) spawn(c Command) error {
	outR, outW, err := os.Pipe()
	if err != nil {
		return err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return err
	}
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Dir = c.Dir
	cmd.Env = c.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	if c.Stdin != "" {
		cmd.Stdin = strings.NewReader(c.Stdin)
	}
	cmd.Stdout = outW
	cmd.Stderr = errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return err
	}
	p.cmd, p.pid, p.stdout, p.stderr = cmd, cmd.Process.Pid, outR, errR
	p.exited = make(chan struct{})
	p.stderrDone = make(chan struct{})
	return nil
}

// wait reaps the leader, then gives the pipes a short drain before forcing
// the readers to stop (a grandchild may hold them open).
func (p *proc) wait() {
	p.waitErr = p.cmd.Wait()
	close(p.exited)
	deadline := time.Now().Add(pipeDrain)
	_ = p.stdout.SetReadDeadline(deadline)
	_ = p.stderr.SetReadDeadline(deadline)
}

func (p *proc) readStderr() {
	defer close(p.stderrDone)
	defer p.stderr.Close()
	buf := make([]byte, 4096)
	for {
		n, err := p.stderr.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.stderrTail = append(p.stderrTail, buf[:n]...)
			if over := len(p.stderrTail) - stderrTail; over > 0 {
				p.stderrTail = append(p.stderrTail[:0], p.stderrTail[over:]...)
			}
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// readStdout is the run's owner goroutine: it decodes every line, then
// waits for the exit and closes the run with exactly one terminal.
func (p *proc) readStdout() {
	defer close(p.done)
	defer p.e.ended(p)
	r := bufio.NewReaderSize(p.stdout, 64<<10)
	emit := func(pl executor.Payload) { p.deliver(item{p: pl}) }
	var nativeID string
	emitWithID := func(pl executor.Payload) { p.deliver(item{p: pl, nativeID: nativeID}) }
	var long []byte
	skipping := false
	for {
		chunk, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if !skipping && len(long)+len(chunk) > p.e.opts.MaxLineBytes {
				skipping = true
				long = long[:0]
				emit(executor.Error{Code: "line_too_long", Message: fmt.Sprintf("%s: skipped a stdout line longer than %d bytes", p.e.spec.Name, p.e.opts.MaxLineBytes)})
			}
			if !skipping {
				long = append(long, chunk...)
			}
			continue
		}
		line := chunk
		if len(long) > 0 {
			long = append(long, chunk...)
			line = long
		}
		if skipping {
			skipping = false
		} else if line = trimLine(line); len(line) > 0 {
			// Lines from one decode share the native id the line carries,
			// which is only known after decoding: collect, then deliver.
			var batch []executor.Payload
			nativeID = p.dec.Decode(line, func(pl executor.Payload) { batch = append(batch, pl) })
			if nativeID != "" {
				p.e.recordNativeID(p.run.SessionKey, nativeID)
			}
			for _, pl := range batch {
				emitWithID(pl)
			}
		}
		long = long[:0]
		if err != nil {
			break
		}
	}
	<-p.exited
	p.stdout.Close()
	<-p.stderrDone // the exit terminal carries the stderr tail
	p.finish()
}

func trimLine(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r' || b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

// deliver applies the terminal rules and fans one payload out (or buffers
// it until the first subscriber).
func (p *proc) deliver(it item) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch pl := it.p.(type) {
	case executor.Done:
		if p.terminal {
			return // exactly one terminal per run
		}
		p.terminal = true
		if p.aborted && pl.Reason == executor.DoneError {
			pl.Reason = executor.DoneAborted
		}
		if pl.Summary == "" && pl.Reason != executor.DoneSuccess {
			pl.Summary = p.accumulated.String()
		}
		it.p = pl
	case executor.Error:
		if p.terminal && pl.Fatal {
			return // belongs to a second terminal
		}
	case executor.TextDelta:
		if pl.Channel != executor.ChannelReasoning && p.accumulated.Len() < maxAccumulated {
			p.accumulated.WriteString(pl.Text)
		}
	case executor.ToolCall, executor.ToolResult, executor.Status, executor.Cost:
	}
	if !p.attached {
		if len(p.backlog) >= executor.DefaultQueueMax*10 {
			p.backlog = p.backlog[1:]
		}
		p.backlog = append(p.backlog, it)
		return
	}
	p.emitLocked(it)
}

func (p *proc) emitLocked(it item) {
	switch {
	case it.nativeID != "" && p.fallbackBound:
		// The first events came before the native id: replace the
		// session-key stand-in once the real id is known.
		p.run.BindRunID(it.nativeID)
		p.fallbackBound = false
	case it.nativeID != "":
		p.run.BindRunIDOnce(it.nativeID)
	}
	runID := p.run.RunIDOr("")
	if runID == "" {
		// Never an empty envelope: stand in with the session key until the
		// runtime names its session.
		if p.run.BindRunIDOnce(p.run.SessionKey) {
			p.fallbackBound = true
		}
		runID = p.run.RunIDOr(p.run.SessionKey)
	}
	for s := range p.subs {
		s.Emit(runID, p.run.SessionKey, it.p)
	}
}

func (p *proc) subscribe() *executor.Stream {
	var s *executor.Stream
	s = executor.NewStream(executor.StreamOptions{Max: p.e.opts.QueueMax, Release: func() {
		p.mu.Lock()
		delete(p.subs, s)
		p.mu.Unlock()
	}})
	p.mu.Lock()
	defer p.mu.Unlock()
	p.subs[s] = struct{}{}
	if !p.attached {
		p.attached = true
		for _, it := range p.backlog {
			p.emitLocked(it)
		}
		p.backlog = nil
	}
	if p.finished {
		s.Finish()
	}
	return s
}

// finish synthesizes the terminal from the exit when the stream gave none,
// then ends every subscriber's stream.
func (p *proc) finish() {
	p.mu.Lock()
	terminal, aborted := p.terminal, p.aborted
	tail := strings.TrimSpace(string(p.stderrTail))
	p.mu.Unlock()
	if !terminal {
		for _, pl := range p.exitPayloads(aborted, tail) {
			p.deliver(item{p: pl})
		}
	}
	p.mu.Lock()
	p.finished = true
	for s := range p.subs {
		s.Finish()
	}
	// Keep only what a late first subscriber still needs (the backlog).
	p.dec, p.stderrTail = nil, nil
	p.accumulated = strings.Builder{}
	if p.killTimer != nil && !groupAlive(p.pid) {
		p.killTimer.Stop()
	}
	p.mu.Unlock()
	p.e.log.Info("run ended", "runtime", string(p.e.spec.ID), "session_key", p.run.SessionKey, "pid", p.pid, "exit", exitString(p.cmd.ProcessState))
}

func (p *proc) exitPayloads(aborted bool, stderr string) []executor.Payload {
	st := p.cmd.ProcessState
	signaled := false
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signaled = ws.Signal() == syscall.SIGTERM || ws.Signal() == syscall.SIGKILL
	}
	switch {
	case aborted || signaled:
		return []executor.Payload{executor.Done{Reason: executor.DoneAborted}}
	case st.Success():
		p.mu.Lock()
		summary := p.accumulated.String()
		p.mu.Unlock()
		return []executor.Payload{executor.Done{Reason: executor.DoneSuccess, Summary: summary}}
	default:
		msg := stderr
		if msg == "" {
			msg = fmt.Sprintf("%s exited with %s", p.e.spec.Name, exitString(st))
		}
		return []executor.Payload{
			executor.Error{Code: fmt.Sprintf("exit_%d", st.ExitCode()), Message: msg, Fatal: true},
			executor.Done{Reason: executor.DoneError, Summary: msg},
		}
	}
}

func exitString(st *os.ProcessState) string {
	if st == nil {
		return "unknown"
	}
	return st.String()
}

func (p *proc) abort() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return
	}
	first := !p.aborted
	p.aborted = true
	p.e.log.Info("abort", "runtime", string(p.e.spec.ID), "session_key", p.run.SessionKey, "pid", p.pid, "signal", "SIGTERM")
	_ = syscall.Kill(-p.pid, syscall.SIGTERM)
	if first {
		pid, log := p.pid, p.e.log
		p.killTimer = time.AfterFunc(p.e.opts.KillGrace, func() {
			if groupAlive(pid) {
				log.Warn("abort escalated", "pid", pid, "signal", "SIGKILL")
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		})
	}
}

func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) == nil
}
