// Package openclaw is the executor adapter for agents on an OpenClaw
// Gateway, over package gateway: a run starts with chat.send to a session
// key; the gateway's chat and agent events for that session become
// normalized executor events (cumulative chat text turned into true deltas,
// tool and lifecycle frames mapped); abort is two-tier (chat.abort of the
// run, then sessions.abort of the session); the model is set with
// sessions.patch and context written with agents.files.set.
package openclaw

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/gateway"
)

// ID is the adapter's runtime id.
const ID = executor.RuntimeOpenClaw

// Client is the slice of *gateway.Client the adapter uses.
type Client interface {
	Call(ctx context.Context, method string, params any) (json.RawMessage, error)
	Subscribe(fn func(gateway.Event), names ...string) (cancel func())
	// WatchSession makes a session-scoped gateway send the session's
	// events to this client until release.
	WatchSession(ctx context.Context, key string) (release func(), err error)
	CanonicalSessionKey(key string) string
}

// Options configure the adapter. Zero values are the documented defaults.
type Options struct {
	// Logger receives one record per side effect; nil discards.
	Logger *slog.Logger
	// QueueMax bounds each stream; 0 means the executor default.
	QueueMax int
}

// ErrNoRun is returned by Start when the gateway acknowledged chat.send
// without starting a run.
var ErrNoRun = errors.New("openclaw: chat.send was acknowledged but did not start a run")

// Adapter drives OpenClaw agents through a gateway connection it does not
// own (the caller dials and closes the client). It implements
// executor.RuntimeAdapter and is safe for concurrent use.
type Adapter struct {
	c    Client
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	pending   map[string]*backlog // session key → frames since Start, until the first Events
	observers map[string]int      // session key → open streams
}

// New returns an adapter over c.
func New(c Client, o Options) *Adapter {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Adapter{c: c, opts: o, log: log, pending: map[string]*backlog{}, observers: map[string]int{}}
}

// ID implements executor.RuntimeAdapter.
func (a *Adapter) ID() executor.RuntimeID { return ID }

// ParticipantKind implements executor.RuntimeAdapter.
func (a *Adapter) ParticipantKind() executor.ParticipantKind { return executor.ParticipantAgent }

// Capabilities implements executor.RuntimeAdapter: a connected substrate
// that owns its home, skills, memory and channels.
func (a *Adapter) Capabilities() executor.Capabilities {
	return executor.Capabilities{
		Streaming: true, Resume: true, ToolApproval: true,
		Models:          []string{},
		RuntimeClass:    executor.ClassConnectedSubstrate,
		NativeSkills:    executor.Preserve,
		NativeMemory:    executor.Preserve,
		NativeChannels:  executor.ChannelsGateway,
		NativeScheduler: true,
	}
}

// Health implements executor.RuntimeAdapter: agents.list must answer
// within executor.HealthTimeout.
func (a *Adapter) Health(ctx context.Context) executor.Health {
	ctx, cancel := context.WithTimeout(ctx, executor.HealthTimeout)
	defer cancel()
	if _, err := a.c.Call(ctx, "agents.list", map[string]any{}); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return executor.Health{OK: false, Message: "health check timed out"}
		}
		return executor.Health{OK: false, Message: "gateway: " + err.Error()}
	}
	return executor.Health{OK: true, Message: "gateway answered agents.list"}
}

// noRunStatuses are chat.send acknowledgements that started nothing.
var noRunStatuses = []string{"no-active-run", "no_active_run", "dropped", "rejected", "no_session"}

// Start implements executor.RuntimeAdapter. It sets the model first when
// opts.Model is given, then sends the message (Context first) with
// chat.send under a fresh idempotency key. Frames of the session that
// arrive before the first Events call are kept for it (unless a stream of
// the session is already open: it sees them).
func (a *Adapter) Start(ctx context.Context, _ executor.Task, opts executor.StartOptions) (*executor.RunHandle, error) {
	if opts.SessionKey == "" {
		return nil, fmt.Errorf("start openclaw: empty session key")
	}
	key := a.c.CanonicalSessionKey(opts.SessionKey)
	if opts.Model != "" {
		if err := a.patchModel(ctx, key, opts.Model); err != nil {
			return nil, fmt.Errorf("start openclaw: %w", err)
		}
	}
	// Watch before sending, so that the session's first events reach the
	// backlog; the backlog (or the stream that takes it over) keeps it.
	release, err := a.c.WatchSession(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("start openclaw: %w", err)
	}
	bl := a.ensureBacklog(key, release)
	raw, err := a.c.Call(ctx, "chat.send", map[string]any{
		"sessionKey": key, "message": opts.Prompt(), "deliver": false, "idempotencyKey": newKey(),
	})
	if err != nil {
		a.dropBacklog(key, bl)
		return nil, fmt.Errorf("start openclaw: chat.send: %w", err)
	}
	var ack struct {
		Accepted *bool  `json:"accepted"`
		Status   string `json:"status"`
	}
	_ = json.Unmarshal(raw, &ack)
	for _, s := range noRunStatuses {
		if ack.Status == s {
			a.dropBacklog(key, bl)
			return nil, fmt.Errorf("start openclaw: %w (status: %s)", ErrNoRun, s)
		}
	}
	if ack.Accepted != nil && !*ack.Accepted {
		a.dropBacklog(key, bl)
		return nil, fmt.Errorf("start openclaw: %w", ErrNoRun)
	}
	a.log.Info("run started", "runtime", string(ID), "session_key", key)
	return executor.NewRunHandle(ID, key), nil
}

func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// backlog holds one session's frames from Start until the first Events
// call, which takes its subscription over.
type backlog struct {
	key    string
	mu     sync.Mutex
	frames []gateway.Event
	sink   func(gateway.Event) // set when a stream took over
	cancel func()
}

const maxBacklog = 10 * executor.DefaultQueueMax

func (b *backlog) add(ev gateway.Event) {
	if f, ok := parseFrame(ev.Payload); !ok || f.SessionKey != b.key {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sink != nil {
		b.sink(ev)
		return
	}
	if len(b.frames) >= maxBacklog {
		b.frames = b.frames[1:]
	}
	b.frames = append(b.frames, ev)
}

// ensureBacklog returns the session's backlog, creating it with the
// session watch release unless a backlog or an open stream already watches
// the session (release is then called at once).
func (a *Adapter) ensureBacklog(key string, release func()) *backlog {
	a.mu.Lock()
	defer a.mu.Unlock()
	if bl := a.pending[key]; bl != nil {
		release()
		return bl
	}
	if a.observers[key] > 0 {
		release()
		return nil // an open stream already observes the session
	}
	bl := &backlog{key: key}
	cancel := a.c.Subscribe(bl.add, "chat", "agent")
	bl.cancel = func() { cancel(); release() }
	a.pending[key] = bl
	return bl
}

func (a *Adapter) dropBacklog(key string, bl *backlog) {
	if bl == nil {
		return
	}
	a.mu.Lock()
	if a.pending[key] == bl {
		delete(a.pending, key)
	}
	a.mu.Unlock()
	bl.cancel()
}

// Events implements executor.RuntimeAdapter. The first call after Start
// takes over the subscription Start made (replaying what it buffered);
// later calls subscribe afresh. Frames of other sessions are ignored; the
// run id rebinds from every frame, so the handle tracks the session's
// latest run. The stream never ends by itself: Close it.
func (a *Adapter) Events(ctx context.Context, run *executor.RunHandle) (*executor.Stream, error) {
	key := a.c.CanonicalSessionKey(run.SessionKey)
	m := newMapper()
	var (
		s      *executor.Stream
		mu     sync.Mutex // serializes the mapper
		cancel func()
	)
	handle := func(ev gateway.Event) {
		f, ok := parseFrame(ev.Payload)
		if !ok || f.SessionKey != key || f.RunID == "" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		run.BindRunID(f.RunID)
		m.mapEvent(ev.Name, &f, func(p executor.Payload) { s.Emit(f.RunID, key, p) })
	}
	var once sync.Once
	s = executor.NewStream(executor.StreamOptions{Max: a.opts.QueueMax, Release: func() {
		once.Do(func() {
			cancel()
			a.mu.Lock()
			if a.observers[key]--; a.observers[key] <= 0 {
				delete(a.observers, key)
			}
			a.mu.Unlock()
		})
	}})

	a.mu.Lock()
	bl := a.pending[key]
	delete(a.pending, key)
	a.observers[key]++
	a.mu.Unlock()
	if bl == nil {
		release, err := a.c.WatchSession(ctx, key)
		if err != nil {
			cancel = func() {}
			_ = s.Close() // releases the observer count
			return nil, fmt.Errorf("events openclaw: %w", err)
		}
		unsub := a.c.Subscribe(handle, "chat", "agent")
		cancel = func() { unsub(); release() }
		return s, nil
	}
	bl.mu.Lock()
	for _, ev := range bl.frames {
		handle(ev)
	}
	bl.frames = nil
	bl.sink = handle
	bl.mu.Unlock()
	cancel = bl.cancel
	return s, nil
}

// Abort implements executor.RuntimeAdapter with a two-tier teardown:
// chat.abort of the bound run, then always sessions.abort of the session
// (covering a run id not bound yet and queued work). The stream reports
// done: aborted when the gateway confirms. It fails only when both tiers
// failed.
func (a *Adapter) Abort(ctx context.Context, run *executor.RunHandle) error {
	key := a.c.CanonicalSessionKey(run.SessionKey)
	runID, bound := run.RunID()
	var errs []error
	if bound {
		a.log.Info("abort", "runtime", string(ID), "session_key", key, "run_id", runID, "method", "chat.abort")
		if _, err := a.c.Call(ctx, "chat.abort", map[string]any{"sessionKey": key, "runId": runID}); err != nil {
			errs = append(errs, fmt.Errorf("chat.abort: %w", err))
		}
	}
	p := map[string]any{"key": key}
	if bound {
		p["runId"] = runID
	}
	a.log.Info("abort", "runtime", string(ID), "session_key", key, "run_id", runID, "method", "sessions.abort")
	if _, err := a.c.Call(ctx, "sessions.abort", p); err != nil {
		errs = append(errs, fmt.Errorf("sessions.abort: %w", err))
	}
	if len(errs) > 0 && (len(errs) == 2 || !bound) {
		return fmt.Errorf("abort openclaw: %w", errors.Join(errs...))
	}
	for _, err := range errs {
		a.log.Warn("abort tier failed", "session_key", key, "err", err)
	}
	return nil
}

// SetModel implements executor.RuntimeAdapter with sessions.patch.
func (a *Adapter) SetModel(ctx context.Context, run *executor.RunHandle, model string) error {
	if err := a.patchModel(ctx, a.c.CanonicalSessionKey(run.SessionKey), model); err != nil {
		return fmt.Errorf("set model: %w", err)
	}
	return nil
}

func (a *Adapter) patchModel(ctx context.Context, key, model string) error {
	a.log.Info("set model", "runtime", string(ID), "session_key", key, "model", model)
	if _, err := a.c.Call(ctx, "sessions.patch", map[string]any{"key": key, "model": model}); err != nil {
		return fmt.Errorf("sessions.patch: %w", err)
	}
	return nil
}

// WriteContext implements executor.RuntimeAdapter with agents.files.set:
// key names an agent file (AGENTS.md, SOUL.md, MEMORY.md, ...) of the
// session's agent. The running session does not re-read it mid-run.
func (a *Adapter) WriteContext(ctx context.Context, run *executor.RunHandle, key, value string) error {
	sk := a.c.CanonicalSessionKey(run.SessionKey)
	agent := AgentID(sk)
	a.log.Info("write context", "runtime", string(ID), "session_key", sk, "agent_id", agent, "name", key, "bytes", len(value))
	ctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	if _, err := a.c.Call(ctx, "agents.files.set", map[string]any{"agentId": agent, "name": key, "content": value}); err != nil {
		return fmt.Errorf("write context: agents.files.set: %w", err)
	}
	return nil
}

// Dispose implements executor.Disposer: it drops the subscriptions of runs
// started but never observed. The gateway client stays open (the caller
// owns it).
func (a *Adapter) Dispose(context.Context) error {
	a.mu.Lock()
	pending := a.pending
	a.pending = map[string]*backlog{}
	a.mu.Unlock()
	for _, bl := range pending {
		bl.cancel()
	}
	return nil
}

// AgentID is the agent of a session key "agent:<id>:<rest>", or the whole
// key when it has no such prefix.
func AgentID(sessionKey string) string {
	if rest, ok := strings.CutPrefix(sessionKey, "agent:"); ok {
		if id, _, ok := strings.Cut(rest, ":"); ok && id != "" {
			return id
		}
	}
	return sessionKey
}
