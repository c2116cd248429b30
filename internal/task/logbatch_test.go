package task

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
)

// appendCounter records the entries of each write of log entries
// (AppendLogs, or UpdateTaskWithLogs with its record).
type appendCounter struct {
	store.Store
	mu    sync.Mutex
	calls [][]string
}

func (s *appendCounter) AppendLogs(ctx context.Context, id string, fence int64, es []store.LogEntry) error {
	s.record(&s.calls, es)
	return s.Store.AppendLogs(ctx, id, fence, es)
}

func (s *appendCounter) UpdateTaskWithLogs(ctx context.Context, t *store.Task, es []store.LogEntry) error {
	s.record(&s.calls, es)
	return s.Store.UpdateTaskWithLogs(ctx, t, es)
}

// record adds the texts of es to *to.
func (s *appendCounter) record(to *[][]string, es []store.LogEntry) {
	var texts []string
	for _, e := range es {
		texts = append(texts, e.Text)
	}
	s.mu.Lock()
	*to = append(*to, texts)
	s.mu.Unlock()
}

// TestNewThreadEntryGoesWithTheFirstEvent: the "Started new thread" entry
// of a submit is written in one transaction with the run's first entry,
// not in one of its own.
func TestNewThreadEntryGoesWithTheFirstEvent(t *testing.T) {
	e := newEnv(t)
	counter := &appendCounter{Store: e.st}
	m := e.manager(func(o *Options) { o.Store = counter })
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "run the tests"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	e.gw.emit(res.JobID, Event{Kind: EventLifecycle, Phase: "start", Seq: 1})
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "done"})
	if _, err := m.Check(t.Context(), CheckRequest{JobID: res.JobID, WaitMs: waitMs(60000)}); err != nil {
		t.Fatal(err)
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if len(counter.calls) == 0 {
		t.Fatal("no log entries written")
	}
	want := []string{"Started new thread session: " + res.SessionKey, "Agent lifecycle: start"}
	if diff := cmp.Diff(want, counter.calls[0]); diff != "" {
		t.Fatalf("first AppendLogs (-want +got):\n%s", diff)
	}
}

// logUpdateCounter is a store that can write an outcome with its log
// entries, recording each such call's entries.
type logUpdateCounter struct {
	*appendCounter
	combined [][]string
}

func (s *logUpdateCounter) UpdateTaskWithLogs(ctx context.Context, t *store.Task, es []store.LogEntry) error {
	s.record(&s.combined, es)
	return s.Store.UpdateTaskWithLogs(ctx, t, es)
}

// TestRunEndEntryGoesWithTheOutcome: the run's lifecycle end entry is
// written in the outcome's transaction, and reads see both; the first
// entries go with the run id.
func TestRunEndEntryGoesWithTheOutcome(t *testing.T) {
	e := newEnv(t)
	counter := &logUpdateCounter{appendCounter: &appendCounter{Store: e.st}}
	m := e.manager(func(o *Options) { o.Store = counter })
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "run the tests"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	e.gw.waitFollowed(t, res.JobID)
	e.gw.emit(res.JobID, Event{Kind: EventLifecycle, Phase: "start", Seq: 1})
	e.gw.emit(res.JobID, Event{Kind: EventLifecycle, Phase: "end", Seq: 2})
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "done"})
	s, err := m.Check(t.Context(), CheckRequest{JobID: res.JobID, WaitMs: waitMs(60000)})
	if err != nil {
		t.Fatal(err)
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	// The first entries carry the run id (holdRunLocked), the outcome the
	// end entry.
	first := []string{"Started new thread session: " + res.SessionKey, "Agent lifecycle: start"}
	if diff := cmp.Diff([][]string{first, {"Agent lifecycle: end"}}, counter.combined); diff != "" {
		t.Fatalf("record writes with log entries (-want +got):\n%s", diff)
	}
	if len(counter.calls) != 0 {
		t.Fatalf("AppendLogs calls %v, want none", counter.calls)
	}
	var texts []string
	for _, l := range s.Logs {
		texts = append(texts, l.Text)
	}
	want := []string{"Started new thread session: " + res.SessionKey, "Agent lifecycle: start", "Agent lifecycle: end"}
	if diff := cmp.Diff(want, texts); diff != "" || s.Status != "completed" {
		t.Fatalf("status %s, logs (-want +got):\n%s", s.Status, diff)
	}
}
