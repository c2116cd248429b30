package terminal

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// errHostStopped is what a store wrapped by stopAfterCompletion returns
// once the host is "killed".
var errHostStopped = errors.New("the host process was stopped (kill -9)")

// stopAfterCompletion models a host killed right after a completion
// commits: every later Session or Turn write of this host fails.
type stopAfterCompletion struct {
	*sqlstore.DB
	armed, stopped atomic.Bool
	stop           sync.Once
	stoppedCh      chan struct{} // closed once stopped is set
}

func newStopAfterCompletion(db *sqlstore.DB) *stopAfterCompletion {
	return &stopAfterCompletion{DB: db, stoppedCh: make(chan struct{})}
}

func (s *stopAfterCompletion) WriteTurn(ctx context.Context, w store.TurnWrite) error {
	if s.stopped.Load() {
		return errHostStopped
	}
	// Armed is read before the write: the test arms once it has seen the
	// previous completion committed, which may be before that write's
	// WriteTurn has returned here.
	armed := s.armed.Load()
	err := s.DB.WriteTurn(ctx, w)
	if err == nil && w.Claim != nil && armed {
		s.stopped.Store(true)
		s.stop.Do(func() { close(s.stoppedCh) })
	}
	return err
}

func (s *stopAfterCompletion) SaveTermSession(ctx context.Context, sess *store.TermSession) error {
	if s.stopped.Load() {
		return errHostStopped
	}
	return s.DB.SaveTermSession(ctx, sess)
}

// TestCheckpointCommitsWithTheCompletion stops a host right after it
// stored a Turn done: the Session's checkpoint must already be there, so
// the next session_exact send (from another host) is not mistaken for a
// send after human typing. It runs on SQLite, and on PostgreSQL when
// TEST_DATABASE_URL is set.
func TestCheckpointCommitsWithTheCompletion(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testCheckpointCommits(t, nil) })
	t.Run("postgres", func(t *testing.T) { testCheckpointCommits(t, pgStores(t, 1)[0]) })
}

// testCheckpointCommits runs the test over db, or the rig's SQLite store
// when db is nil.
func testCheckpointCommits(t *testing.T, db store.Store) {
	a := newFakeAgent(termapi.AgentCodex, 180)
	r := newRig(t, a)
	if db == nil {
		db = r.st
	}
	st := newStopAfterCompletion(db.(*sqlstore.DB))
	r.st = st
	r.svc = r.service()
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()

	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "one"})
	if err != nil {
		t.Fatal(err)
	}
	a.finish("one done", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	first, err := st.GetTermSession(ctx, res.SessionID)
	if err != nil || len(first.Binding.Checkpoint) == 0 {
		t.Fatalf("no checkpoint on the session when its first Turn is done: %+v, %v", first.Binding, err)
	}

	st.armed.Store(true)
	res2, err := r.svc.Send(ctx, termapi.SendRequest{SessionID: res.SessionID, Request: "two"})
	if err != nil {
		t.Fatal(err)
	}
	a.finish("two done", false)
	r.waitStatus(res2.TurnID, termapi.TurnIdle)
	// The completion is visible as soon as it commits, a moment before
	// the wrapper's WriteTurn returns and marks the host stopped.
	select {
	case <-st.stoppedCh:
	case <-time.After(10 * time.Second):
		t.Fatal("the host did not stop after the completion")
	}
	// Another host over the same database sends to the exact session.
	other := NewService(Options{Store: st.DB, Terminals: r.ft, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}}, DraftTimeout: time.Second})
	res3, err := other.Send(ctx, termapi.SendRequest{SessionID: res.SessionID, Request: "three"})
	if err != nil || res3.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("session_exact send after the host stopped = %+v, %v", res3, err)
	}
	sess, err := st.GetTermSession(ctx, res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if string(sess.Binding.Checkpoint) == string(first.Binding.Checkpoint) {
		t.Fatalf("the checkpoint is still the first Turn's (%s): it did not commit with the completion", sess.Binding.Checkpoint)
	}

}
