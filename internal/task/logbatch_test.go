package task

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
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

// TestRunEndEntryGoesWithTheOutcome: the run's lifecycle entries, the
// start held with the run id and the end, are written in the outcome's
// transaction, and reads see both.
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
	// The run id (holdRunLocked), the entries held with it and the end
	// entry all ride on the outcome's write.
	all := []string{"Started new thread session: " + res.SessionKey, "Agent lifecycle: start", "Agent lifecycle: end"}
	if diff := cmp.Diff([][]string{all}, counter.combined); diff != "" {
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

// TestPollWritesAHeldLifecycleEntry: a lifecycle entry held for the run
// id's write does not keep a poll-mode check_task waiting: the poll, already
// waiting or arriving after the entry, writes it and returns it at once.
func TestPollWritesAHeldLifecycleEntry(t *testing.T) {
	for _, waiting := range []bool{true, false} {
		t.Run(map[bool]string{true: "waiting", false: "after"}[waiting], func(t *testing.T) {
			e := newEnv(t)
			// Nothing else writes the held entries meanwhile: no run id
			// save, no lease renewal.
			m := e.manager(func(o *Options) { o.RunSaveDelay, o.Lease = time.Hour, time.Hour })
			res, err := m.Submit(t.Context(), SubmitRequest{Task: "run the tests"})
			if err != nil {
				t.Fatal(err)
			}
			e.gw.waitStarted(t, res.JobID)
			e.gw.waitFollowed(t, res.JobID)
			type answer struct {
				s   *taskapi.Snapshot
				err error
			}
			answers := make(chan answer, 1)
			poll := func() {
				// The wait is far longer than the test's bound: an answer
				// within the bound came from the entry, not the deadline.
				s, err := m.Check(t.Context(), CheckRequest{JobID: res.JobID, Mode: CheckPoll, WaitMs: waitMs(600000)})
				answers <- answer{s, err}
			}
			if waiting {
				go poll()
			}
			e.gw.emit(res.JobID, Event{Kind: EventLifecycle, Phase: "start", Seq: 1})
			if !waiting {
				go poll()
			}
			var a answer
			select {
			case a = <-answers:
			case <-time.After(time.Minute): // a bound for a failing run, not a timing
				t.Fatal("the poll did not return for the lifecycle entry")
			}
			if a.err != nil {
				t.Fatal(a.err)
			}
			var texts []string
			for _, l := range a.s.Logs {
				texts = append(texts, l.Text)
			}
			want := []string{"Started new thread session: " + res.SessionKey, "Agent lifecycle: start"}
			if diff := cmp.Diff(want, texts); diff != "" {
				t.Fatalf("poll logs (-want +got):\n%s", diff)
			}
			stored, err := e.st.GetTask(t.Context(), "main", res.JobID)
			if err != nil {
				t.Fatal(err)
			}
			if stored.LogCount != 2 || stored.ParentRunID != res.JobID {
				t.Fatalf("stored %d entries, run %q; want 2, %q", stored.LogCount, stored.ParentRunID, res.JobID)
			}
			e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "done"})
			await(t, m, res.JobID)
		})
	}
}
