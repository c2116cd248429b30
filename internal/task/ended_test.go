package task

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
)

// TestEndedAtIsWhenTheTaskEnded cancels a task 90 s (on the manager's
// clock) after it started, with no event since its start: get_task and
// list_tasks report the cancel as its end, not its last event.
func TestEndedAtIsWhenTheTaskEnded(t *testing.T) {
	e := newEnv(t)
	e.gw.abortOK = true
	var skew atomic.Int64
	m := e.manager(func(o *Options) {
		o.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	ctx := t.Context()
	res, err := m.Submit(ctx, SubmitRequest{Task: "x"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	running, err := m.GetTask(ctx, res.JobID, taskapi.DetailCore, 0)
	if err != nil {
		t.Fatal(err)
	}
	if running.EndedAt != 0 {
		t.Fatalf("a running task has endedAt %d, want none", running.EndedAt)
	}
	skew.Store(int64(90 * time.Second))
	if _, err := m.Cancel(ctx, res.JobID, ""); err != nil {
		t.Fatal(err)
	}
	await(t, m, res.JobID)

	d, err := m.GetTask(ctx, res.JobID, taskapi.DetailCore, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Status != "cancelled" || d.EndedAt < d.StartedAt+90_000 || d.EndedAt <= d.LastEventAt {
		t.Fatalf("get_task: status %s, started %d, last event %d, ended %d; want ended ≥ 90 s after the start and after the last event",
			d.Status, d.StartedAt, d.LastEventAt, d.EndedAt)
	}
	rows, err := m.ListTasks(ctx, taskapi.ViewAll, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].EndedAt != d.EndedAt {
		t.Fatalf("list_tasks rows = %+v, want one ending at %d", rows, d.EndedAt)
	}
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "late"})
}
