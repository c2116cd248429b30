package task

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/taskapi"
)

// fakeGW is an in-process Gateway: tests start, drive and end runs by
// idempotency key. A resubmitted key joins the same run (as OpenClaw does);
// a key that already ended answers at once with its outcome.
type fakeGW struct {
	mu      sync.Mutex
	runs    map[string]*fakeRunState
	started chan string // receives each StartRun's key
	waiting chan string // receives a run's key each time its follower waits on it
	history map[string]*History
	// historyErr, if set, fails every History call (a gateway that died).
	historyErr error
	abortOK    bool
	abortErr   error
	aborts     int
	startErr   error
	starts     map[string]int
	messages   map[string]string
	// instant, if set, answers every run inside StartRun: events first
	// (before StartRun returns), then the outcome.
	instant func(req RunRequest) Outcome

	// down makes Connected report false: the gateway connection is not up.
	down bool
}

type fakeRunState struct {
	key     string
	req     RunRequest // the latest subscriber
	done    chan struct{}
	outcome Outcome
}

type fakeRun struct {
	gw     *fakeGW
	st     *fakeRunState
	closed chan struct{}
	once   sync.Once
}

func newFakeGW() *fakeGW {
	return &fakeGW{runs: map[string]*fakeRunState{}, started: make(chan string, 1<<16), waiting: make(chan string, 1<<16),
		history: map[string]*History{}, starts: map[string]int{}, messages: map[string]string{}}
}

func (g *fakeGW) StartRun(ctx context.Context, req RunRequest) (Run, error) {
	g.mu.Lock()
	if g.startErr != nil {
		err := g.startErr
		g.mu.Unlock()
		return nil, err
	}
	st := g.runs[req.IdempotencyKey]
	if st == nil {
		st = &fakeRunState{key: req.IdempotencyKey, done: make(chan struct{})}
		g.runs[req.IdempotencyKey] = st
	}
	st.req = req
	g.starts[req.IdempotencyKey]++
	g.messages[req.IdempotencyKey] = req.Message
	instant := g.instant
	g.mu.Unlock()
	if instant != nil {
		req.OnEvent(Event{Kind: EventLifecycle, Phase: "start", Seq: 1})
		g.end(req.IdempotencyKey, instant(req))
		return &fakeRun{gw: g, st: st, closed: make(chan struct{})}, nil
	}
	g.started <- req.IdempotencyKey
	return &fakeRun{gw: g, st: st, closed: make(chan struct{})}, nil
}

func (g *fakeGW) Connected() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.down
}

func (r *fakeRun) ID() string { return r.st.key }
func (r *fakeRun) Close()     { r.once.Do(func() { close(r.closed) }) }
func (r *fakeRun) Wait(ctx context.Context) (Outcome, error) {
	select {
	case r.gw.waiting <- r.st.key:
	default:
	}
	select {
	case <-r.st.done:
		r.gw.mu.Lock()
		defer r.gw.mu.Unlock()
		return r.st.outcome, nil
	case <-r.closed:
		return Outcome{}, errors.New("run closed")
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	}
}

func (g *fakeGW) History(ctx context.Context, sessionKey string) (*History, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.historyErr != nil {
		return nil, g.historyErr
	}
	h := g.history[sessionKey]
	if h == nil {
		return &History{}, nil
	}
	c := *h
	c.Messages = append([]HistoryMessage(nil), h.Messages...)
	return &c, nil
}

func (g *fakeGW) setHistory(key string, h *History) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.history[key] = h
}

func (g *fakeGW) Abort(ctx context.Context, sessionKey, runID string) (bool, error) {
	g.mu.Lock()
	g.aborts++
	ok, err := g.abortOK, g.abortErr
	st := g.runs[runID]
	g.mu.Unlock()
	if ok && err == nil && st != nil {
		g.end(runID, Outcome{RunID: runID, Status: OutcomeAborted})
	}
	return ok, err
}

// waitStarted blocks until a run with key (or any key, "") starts.
func (g *fakeGW) waitStarted(t *testing.T, key string) string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case k := <-g.started:
			if key == "" || k == key {
				return k
			}
		case <-timeout:
			t.Fatalf("run %q did not start", key)
		}
	}
}

// waitFollowed blocks until the follower of the run with key took its
// answer to StartRun and waits for the run's end.
func (g *fakeGW) waitFollowed(t *testing.T, key string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case k := <-g.waiting:
			if k == key {
				return
			}
		case <-timeout:
			t.Fatalf("run %q is not followed", key)
		}
	}
}

// emit delivers an event to the run's current subscriber.
func (g *fakeGW) emit(key string, e Event) {
	g.mu.Lock()
	st := g.runs[key]
	g.mu.Unlock()
	st.req.OnEvent(e)
}

// end finishes the run (idempotent).
func (g *fakeGW) end(key string, o Outcome) {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.runs[key]
	select {
	case <-st.done:
		return
	default:
	}
	o.RunID = key
	st.outcome = o
	close(st.done)
}

func (g *fakeGW) startCount(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.starts[key]
}

// env is one test's store, gateway and manager factory.
type env struct {
	t    *testing.T
	st   store.Store
	gw   *fakeGW
	reg  *agentsession.Registry
	opts Options
}

func fastOptions() Options {
	o := DefaultOptions()
	o.Agent = "main"
	o.ChatTimeout = time.Minute
	o.RecoveryTimeout = 2 * time.Second
	o.RecoveryIdleTimeout = 150 * time.Millisecond
	o.RecoveryInterval = 10 * time.Millisecond
	o.ReconcileQuiet = time.Hour
	o.ReconcileSampleInterval = 10 * time.Millisecond
	o.LazyRecheckInterval = 5 * time.Millisecond
	o.LazyRecheckSpacing = time.Millisecond
	o.ForeignPollInterval = 10 * time.Millisecond
	o.PollDebounce = 20 * time.Millisecond
	o.CheckWait = 10 * time.Second
	o.Retention = -1
	return o
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), "clawconnect.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	o := fastOptions()
	o.PayloadDir = filepath.Join(t.TempDir(), "payloads")
	return &env{t: t, st: st, gw: newFakeGW(), reg: agentsession.NewRegistry(), opts: o}
}

// manager starts a manager over the env (with a book) and closes it at
// cleanup.
func (e *env) manager(mod func(o *Options)) *Manager {
	e.t.Helper()
	o := e.opts
	o.Store, o.Gateway = e.st, e.gw
	if mod != nil {
		mod(&o)
	}
	if o.Book == nil {
		b, err := agentsession.NewBook(e.t.Context(), AttachmentStore(e.st, o.Agent), agentsession.BookOptions{Registry: e.reg})
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(b.Close)
		o.Book = b
	}
	m, err := New(o)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := m.Start(e.t.Context()); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(m.Close)
	return m
}

func waitMs(ms float64) *float64 { return &ms }

// await checks (wait mode) until the task is terminal or fails the test.
func await(t *testing.T, m *Manager, id string) *taskapi.Snapshot {
	t.Helper()
	for range 20 {
		s, err := m.Check(t.Context(), CheckRequest{JobID: id, WaitMs: waitMs(5000)})
		if err != nil {
			t.Fatal(err)
		}
		if s.IsTerminal {
			return s
		}
	}
	t.Fatalf("task %s did not end", id)
	return nil
}

type contextT = context.Context

const millis = time.Millisecond

func timeNowPlus(ms int) time.Time { return time.Now().Add(time.Duration(ms) * time.Millisecond) }

// crash stops the manager's goroutines the way kill -9 would: nothing is
// written on the way down (no lease released, the process stays
// registered). A later Close does nothing.
func (m *Manager) crash() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// markDead rewrites owner's process-registry row as a process on this host
// whose pid has been reused by a later process, which proves it dead.
func markDead(t *testing.T, st store.Store, ownerID string) {
	t.Helper()
	self := owner.Self()
	if self.Host == "" {
		t.Skip("proving a process dead needs /proc")
	}
	p := self.Process("serve", 1)
	p.ID, p.Start = ownerID, "another-boot:1"
	if err := st.Heartbeat(t.Context(), p); err != nil {
		t.Fatal(err)
	}
}
