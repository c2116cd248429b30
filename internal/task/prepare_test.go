package task

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
)

// preparingGW is the fake gateway with PrepareSession: it notes, by
// session, how many interests are held and what each store write and
// StartRun saw of them.
type preparingGW struct {
	*fakeGW
	mu      sync.Mutex
	held    map[string]int
	atStart map[string]int // interests held when StartRun came
}

func (g *preparingGW) PrepareSession(key string) func() {
	g.mu.Lock()
	g.held[key]++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.held[key]--
			g.mu.Unlock()
		})
	}
}

func (g *preparingGW) StartRun(ctx context.Context, req RunRequest) (Run, error) {
	g.mu.Lock()
	g.atStart[req.SessionKey] = g.held[req.SessionKey]
	g.mu.Unlock()
	return g.fakeGW.StartRun(ctx, req)
}

func (g *preparingGW) heldFor(key string) (held, atStart int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[key], g.atStart[key]
}

// createSpy sees, at each CreateTask, whether the session was prepared,
// and fails it when told to.
type createSpy struct {
	store.Store
	gw       *preparingGW
	fail     error
	prepared int
}

func (s *createSpy) CreateTask(ctx context.Context, t *store.Task) error {
	s.prepared, _ = s.gw.heldFor(t.SessionKey)
	if s.fail != nil {
		return s.fail
	}
	return s.Store.CreateTask(ctx, t)
}

// TestSubmitPreparesTheSessionBeforeRecording: the gateway starts
// subscribing to the task's session before the task is written, the
// interest lasts until the run has subscribed itself, and it is given up
// when the write fails.
func TestSubmitPreparesTheSessionBeforeRecording(t *testing.T) {
	e := newEnv(t)
	gw := &preparingGW{fakeGW: e.gw, held: map[string]int{}, atStart: map[string]int{}}
	spy := &createSpy{Store: e.st, gw: gw}
	m := e.manager(func(o *Options) { o.Store, o.Gateway = spy, gw })
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "run the tests"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "done"})
	await(t, m, res.JobID)
	held, atStart := gw.heldFor(res.SessionKey)
	if spy.prepared != 1 || atStart != 1 || held != 0 {
		t.Errorf("interests in the session: %d at the write, %d at the run's start, %d after; want 1, 1, 0", spy.prepared, atStart, held)
	}

	spy.fail = errors.New("disk full")
	if _, err := m.Submit(t.Context(), SubmitRequest{Task: "again", SessionKey: res.SessionKey}); err == nil {
		t.Fatal("submit with a failing write succeeded")
	}
	if held, _ := gw.heldFor(res.SessionKey); spy.prepared != 1 || held != 0 {
		t.Errorf("a failed write: %d interests at it, %d after; want 1, 0", spy.prepared, held)
	}
}
