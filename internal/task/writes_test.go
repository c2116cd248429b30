package task

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
)

// writeCounter names each write transaction a task's record takes, in
// order, and signals every record write on updated.
type writeCounter struct {
	store.Store
	mu      sync.Mutex
	writes  []string
	updated chan struct{}
}

func newWriteCounter(t *testing.T, st store.Store) *writeCounter {
	t.Helper()
	return &writeCounter{Store: st, updated: make(chan struct{}, 64)}
}

func (s *writeCounter) note(w string) {
	s.mu.Lock()
	s.writes = append(s.writes, w)
	s.mu.Unlock()
}

func (s *writeCounter) taken() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.writes...)
}

func (s *writeCounter) CreateTask(ctx context.Context, t *store.Task) error {
	s.note("create")
	return s.Store.CreateTask(ctx, t)
}

func (s *writeCounter) UpdateTask(ctx context.Context, t *store.Task) error {
	s.note("update")
	err := s.Store.UpdateTask(ctx, t)
	s.updated <- struct{}{}
	return err
}

func (s *writeCounter) AppendLogs(ctx context.Context, id string, fence int64, es []store.LogEntry) error {
	s.note("logs")
	return s.Store.AppendLogs(ctx, id, fence, es)
}

func (s *writeCounter) UpdateTaskWithLogs(ctx context.Context, t *store.Task, es []store.LogEntry) error {
	s.note("update+logs")
	err := s.Store.UpdateTaskWithLogs(ctx, t, es)
	s.updated <- struct{}{}
	return err
}

// TestAcceptedRunRidesOnTheNextWrite: the run id of a task the gateway
// accepted, and the run's lifecycle entries held with it, cost no write
// transaction of their own; they land with the task's next write (here its
// outcome), so a task against an instant gateway takes two: the task, and
// its outcome with its entries.
func TestAcceptedRunRidesOnTheNextWrite(t *testing.T) {
	e := newEnv(t)
	e.gw.instant = func(req RunRequest) Outcome { return Outcome{Status: OutcomeOK, Text: "done"} }
	counter := newWriteCounter(t, e.st)
	m := e.manager(func(o *Options) { o.Store, o.RunSaveDelay = counter, time.Hour })
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "run the tests"})
	if err != nil {
		t.Fatal(err)
	}
	if s := await(t, m, res.JobID); s.Status != "completed" {
		t.Fatalf("status %s, want completed", s.Status)
	}
	if diff := cmp.Diff([]string{"create", "update+logs"}, counter.taken()); diff != "" {
		t.Fatalf("write transactions of one task (-want +got):\n%s", diff)
	}
	stored, err := e.st.GetTask(t.Context(), "main", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.ParentRunID != res.JobID || stored.Status != store.StatusCompleted {
		t.Fatalf("stored run id %q status %s, want %q completed", stored.ParentRunID, stored.Status, res.JobID)
	}
}

// TestAcceptedRunRidesOnTheFirstEntries: on a run that reports progress,
// the run id and the connected/live states land with its first tool
// call's entry, the lifecycle entries held before it among them.
func TestAcceptedRunRidesOnTheFirstEntries(t *testing.T) {
	e := newEnv(t)
	counter := newWriteCounter(t, e.st)
	m := e.manager(func(o *Options) { o.Store, o.RunSaveDelay = counter, time.Hour })
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "run the tests"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	e.gw.waitFollowed(t, res.JobID)
	e.gw.emit(res.JobID, Event{Kind: EventLifecycle, Phase: "start", Seq: 1})
	if diff := cmp.Diff([]string{"create"}, counter.taken()); diff != "" {
		t.Fatalf("write transactions after the lifecycle start (-want +got):\n%s", diff)
	}
	e.gw.emit(res.JobID, Event{Kind: EventToolStart, Seq: 2, Tool: "read", Args: []byte(`{"file_path":"go.mod"}`)})
	stored, err := e.st.GetTask(t.Context(), "main", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.ParentRunID != res.JobID || stored.Upstream != "connected" || stored.Transcript != "live" || stored.LogCount != 3 {
		t.Fatalf("after the first tool call the store has run %q, upstream %s, transcript %s, %d entries; want %q, connected, live, 3",
			stored.ParentRunID, stored.Upstream, stored.Transcript, stored.LogCount, res.JobID)
	}
	if diff := cmp.Diff([]string{"create", "update+logs"}, counter.taken()); diff != "" {
		t.Fatalf("write transactions so far (-want +got):\n%s", diff)
	}
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "done"})
	await(t, m, res.JobID)
}

// TestQuietRunSavesItsRunIDAfterTheDelay: a run that writes nothing else
// has its run id stored after RunSaveDelay, so a cancel from another
// process names the run.
func TestQuietRunSavesItsRunIDAfterTheDelay(t *testing.T) {
	e := newEnv(t)
	counter := newWriteCounter(t, e.st)
	m := e.manager(func(o *Options) { o.Store, o.RunSaveDelay = counter, millis })
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "think quietly"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	select {
	case <-counter.updated:
	case <-time.After(time.Minute): // a bound for a failing run, not a timing
		t.Fatal("the run id was never written")
	}
	stored, err := e.st.GetTask(t.Context(), "main", res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.ParentRunID != res.JobID || stored.Status != store.StatusRunning {
		t.Fatalf("stored run id %q status %s, want %q running", stored.ParentRunID, stored.Status, res.JobID)
	}
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "done"})
	await(t, m, res.JobID)
}
