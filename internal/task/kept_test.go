package task

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
)

func entries(from, to int64) []store.LogEntry {
	var es []store.LogEntry
	for s := from; s <= to; s++ {
		es = append(es, store.LogEntry{Seq: s, Type: "tool", Text: fmt.Sprint("entry ", s)})
	}
	return es
}

func TestLastEntries(t *testing.T) {
	for _, c := range []struct {
		name      string
		kept      []store.LogEntry
		count     int64
		n         int
		want      []store.LogEntry
		wantKnown bool
	}{
		{"none kept", nil, 3, 16, nil, false},
		{"all of a short log", entries(1, 3), 3, 16, entries(1, 3), true},
		{"the last n", entries(5, 20), 20, 6, entries(15, 20), true},
		{"exactly the kept ones", entries(5, 20), 20, 16, entries(5, 20), true},
		{"older than kept", entries(5, 20), 20, 17, nil, false},
		{"a log that began before the kept ones", entries(2, 3), 3, 16, nil, false},
		{"kept beyond the record's count", entries(1, 8), 6, 4, entries(3, 6), true},
		{"the record ahead of the kept ones", entries(1, 4), 6, 4, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, known := lastEntries(c.kept, c.count, c.n)
			if known != c.wantKnown || !cmp.Equal(got, c.want) {
				t.Errorf("lastEntries(%d kept, count %d, n %d) = %v, %v; want %v, %v", len(c.kept), c.count, c.n, got, known, c.want, c.wantKnown)
			}
		})
	}
}

func TestKeepWrittenStaysDenseAndBounded(t *testing.T) {
	l := newLive(&store.Task{ID: "t"})
	l.keepWrittenLocked(entries(1, 10))
	l.keepWrittenLocked(entries(11, 20))
	if diff := cmp.Diff(entries(20-keptEntries+1, 20), l.keptLogs()); diff != "" {
		t.Fatalf("kept after 20 entries (-want +got):\n%s", diff)
	}
	// Renumbered after an outage: the kept entries no longer lead to them.
	l.keepWrittenLocked(entries(25, 26))
	if diff := cmp.Diff(entries(25, 26), l.keptLogs()); diff != "" {
		t.Fatalf("kept after a gap (-want +got):\n%s", diff)
	}
}

// logReads counts the task and log reads of the store and says when
// check_task read the poll count (the follower is seen by then, see
// Check).
type logReads struct {
	store.Store
	gets, tails atomic.Int32
	polled      chan struct{}
}

func (s *logReads) GetTask(ctx context.Context, agent, id string) (*store.Task, error) {
	s.gets.Add(1)
	return s.Store.GetTask(ctx, agent, id)
}

func (s *logReads) TailLogs(ctx context.Context, id string, n int) ([]store.LogEntry, error) {
	s.tails.Add(1)
	return s.Store.TailLogs(ctx, id, n)
}

func (s *logReads) TouchPoll(ctx context.Context, agent, id string, at int64) (int64, error) {
	n, err := s.Store.TouchPoll(ctx, agent, id, at)
	select {
	case s.polled <- struct{}{}:
	default:
	}
	return n, err
}

// TestCheckOfATaskFollowedHereReadsNoLog: the check_task that sees the
// outcome of a task followed here answers with the record and the entries
// the follower wrote, as the store has them, without reading them back.
func TestCheckOfATaskFollowedHereReadsNoLog(t *testing.T) {
	e := newEnv(t)
	reads := &logReads{Store: e.st, polled: make(chan struct{}, 1)}
	m := e.manager(func(o *Options) { o.Store = reads })
	ctx := t.Context()
	res, err := m.Submit(ctx, SubmitRequest{Task: "read the files"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	e.gw.waitFollowed(t, res.JobID)
	for i := range 20 { // more than a live keeps
		e.gw.emit(res.JobID, Event{Kind: EventToolStart, Seq: int64(i + 1), Tool: "read", Args: fmt.Appendf(nil, `{"file_path":"f%d"}`, i)})
	}
	checked := make(chan *taskapi.Snapshot, 1)
	go func() {
		s, err := m.Check(ctx, CheckRequest{JobID: res.JobID, WaitMs: waitMs(60000)})
		if err != nil {
			t.Error(err)
		}
		checked <- s
	}()
	<-reads.polled
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "done"})
	s := <-checked
	if s == nil || !s.IsTerminal {
		t.Fatalf("check_task answered %+v, want the outcome", s)
	}
	if n, g := reads.tails.Load(), reads.gets.Load(); n != 0 || g != 0 {
		t.Errorf("check_task read the log %d times and the task %d times, want neither", n, g)
	}
	stored, err := e.st.TailLogs(ctx, res.JobID, 2*InitialWindowMax)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 2*InitialWindowMax {
		t.Fatalf("the store has %d of the last %d entries, want all", len(stored), 2*InitialWindowMax)
	}
	if diff := cmp.Diff(project(stored, 0), s.Logs); diff != "" {
		t.Errorf("check_task's entries differ from the store's (-store +check):\n%s", diff)
	}
}
