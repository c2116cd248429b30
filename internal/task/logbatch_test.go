package task

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
)

// appendCounter records the entries of each AppendLogs call.
type appendCounter struct {
	store.Store
	mu    sync.Mutex
	calls [][]string
}

func (s *appendCounter) AppendLogs(ctx context.Context, id string, fence int64, es []store.LogEntry) error {
	var texts []string
	for _, e := range es {
		texts = append(texts, e.Text)
	}
	s.mu.Lock()
	s.calls = append(s.calls, texts)
	s.mu.Unlock()
	return s.Store.AppendLogs(ctx, id, fence, es)
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
