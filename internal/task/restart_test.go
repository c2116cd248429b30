package task

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
	"github.com/clawconnect/clawconnect/taskapi"
)

// TestRestartResumesRunningTask simulates kill -9 at each phase: the old
// manager's goroutines stop without writing anything (as a killed process
// would), and a fresh manager over the same store finishes the task under
// the same idempotency key, so the run is joined, not started twice.
func TestRestartResumesRunningTask(t *testing.T) {
	tests := []struct {
		name string
		// crash prepares a running task as a process killed at that phase
		// leaves it, and returns its id.
		crash func(t *testing.T, e *env) string
	}{
		{"after persist, before dispatch", func(t *testing.T, e *env) string {
			task := storetest.Task("job-persisted", "main", "agent:main:k1", time.Now().UnixMilli())
			task.Owner, task.LeaseUntil = "previous", time.Now().Add(time.Hour).UnixMilli() // a live lease of the dead process
			if err := e.st.CreateTask(t.Context(), task); err != nil {
				t.Fatal(err)
			}
			markDead(t, e.st, "previous")
			return task.ID
		}},
		{"mid-run, with events and a run id", func(t *testing.T, e *env) string {
			m := e.manager(nil)
			res, err := m.Submit(t.Context(), SubmitRequest{Task: "long job", SessionKey: "agent:main:k2"})
			if err != nil {
				t.Fatal(err)
			}
			e.gw.waitStarted(t, res.JobID)
			e.gw.emit(res.JobID, Event{Kind: EventLifecycle, Phase: "start", Seq: 3})
			m.crash() // "kill -9": nothing is written on the way down
			markDead(t, e.st, m.o.Owner)
			return res.JobID
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			id := tc.crash(t, e)
			before, err := e.st.GetTask(t.Context(), "main", id)
			if err != nil || before.Status != store.StatusRunning {
				t.Fatalf("after the crash: %+v %v", before, err)
			}
			// The lease is an hour: the fresh process resumes the task at
			// once because the previous owner is provably dead.
			fresh := e.manager(func(o *Options) { o.Role, o.Lease = "serve", time.Hour })
			e.gw.waitStarted(t, id)
			if got := e.gw.messages[id]; got != before.Message {
				t.Fatalf("resumed with another message:\n%s\nwant\n%s", got, before.Message)
			}
			e.gw.end(id, Outcome{Status: OutcomeOK, Text: "finished after restart"})
			s := await(t, fresh, id)
			if s.Status != "completed" || s.Summary != "finished after restart" || s.TerminalReason != "live-final" {
				t.Fatalf("resumed task: %s %q %s", s.Status, s.Summary, s.TerminalReason)
			}
			want := fmt.Sprintf("Taken over by clawconnect serve (pid %d): the previous follower, clawconnect serve (pid %d), was killed (its process is gone); observing the OpenClaw run again.", os.Getpid(), os.Getpid())
			if got := s.Logs[len(s.Logs)-1].Text; got != want {
				t.Fatalf("last log entry:\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestTakeoverSaysWhy: the log entry of a takeover names the process that
// follows the task now and why the previous follower stopped (it exited
// and released the task, it was killed, or it lost its lease), and only a
// process that kept its owner id calls it a restart.
func TestTakeoverSaysWhy(t *testing.T) {
	pid := os.Getpid()
	tests := []struct {
		name string
		// leave prepares a running task as its previous follower left it
		// and returns its id; then a serve process takes it over.
		leave func(t *testing.T, e *env) string
		owner string // the taking process's owner id ("" a new one)
		want  string
	}{
		{"run exits without waiting", func(t *testing.T, e *env) string {
			m := e.manager(func(o *Options) { o.Role = "run" })
			res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
			if err != nil {
				t.Fatal(err)
			}
			e.gw.waitStarted(t, res.JobID)
			m.Close()
			return res.JobID
		}, "", fmt.Sprintf("Taken over by clawconnect serve (pid %d) after the previous follower exited and released it; observing the OpenClaw run again.", pid)},
		{"lease lapsed under a live process", func(t *testing.T, e *env) string {
			task := storetest.Task("job-lapsed", "main", "agent:main:k1", time.Now().UnixMilli())
			task.Owner, task.LeaseUntil = "stuck", time.Now().Add(-time.Minute).UnixMilli()
			if err := e.st.CreateTask(t.Context(), task); err != nil {
				t.Fatal(err)
			}
			p := owner.Self().Process("mcp", time.Now().UnixMilli())
			p.ID = "stuck" // this very process: alive, so only its lease lapsed
			if err := e.st.Heartbeat(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			return task.ID
		}, "", fmt.Sprintf("Taken over by clawconnect serve (pid %d): the previous follower, clawconnect mcp (pid %d), lost its lease (it did not renew it in time); observing the OpenClaw run again.", pid, pid)},
		{"the same owner id starts again", func(t *testing.T, e *env) string {
			task := storetest.Task("job-own", "main", "agent:main:k1", time.Now().UnixMilli())
			task.Owner, task.LeaseUntil = "kept-id", time.Now().Add(time.Minute).UnixMilli()
			if err := e.st.CreateTask(t.Context(), task); err != nil {
				t.Fatal(err)
			}
			p := owner.Self().Process("serve", time.Now().UnixMilli())
			p.ID = "kept-id"
			if err := e.st.Heartbeat(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			return task.ID
		}, "kept-id", "Resumed after a restart; observing the OpenClaw run again."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			id := tc.leave(t, e)
			fresh := e.manager(func(o *Options) { o.Role, o.Owner, o.Lease = "serve", tc.owner, time.Hour })
			e.gw.waitStarted(t, id)
			e.gw.end(id, Outcome{Status: OutcomeOK, Text: "done"})
			s := await(t, fresh, id)
			var got []string
			for _, l := range s.Logs {
				if l.Type == "recovery" {
					got = append(got, l.Text)
				}
			}
			if diff := cmp.Diff([]string{tc.want}, got); diff != "" {
				t.Fatalf("takeover log entries (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRestartKeepsFinishedTasks: finished tasks, sessions and continuation
// survive a restart (they live in the store, not in memory).
func TestRestartKeepsFinishedTasks(t *testing.T) {
	e := newEnv(t)
	m := e.manager(nil)
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "kept"})
	want := await(t, m, res.JobID)
	m.Close()
	fresh := e.manager(nil)
	got, err := fresh.Check(t.Context(), CheckRequest{SessionKey: res.SessionKey})
	if err != nil {
		t.Fatal(err)
	}
	want.PollCount++
	want.LastPollAt = got.LastPollAt // this poll's time
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("snapshot across restart (-want +got):\n%s", diff)
	}
	sessions, err := fresh.ListSessions(t.Context(), 0, nil)
	if err != nil || len(sessions.Sessions) != 1 || sessions.Sessions[0].LastSummary != "kept" {
		t.Fatalf("sessions %+v %v", sessions, err)
	}
	if e.gw.startCount(res.JobID) != 1 {
		t.Fatalf("a finished task was dispatched again")
	}
}

// TestLeaseTakeover: two owners share one store; the first dies holding the
// lease (nothing proves it dead: another host, say); the second takes the
// task over once the lease expires and finishes it, while answering reads
// for it all along.
func TestLeaseTakeover(t *testing.T) {
	e := newEnv(t)
	a := e.manager(func(o *Options) { o.Owner = "replica-a"; o.Lease = 200 * time.Millisecond })
	res, err := a.Submit(t.Context(), SubmitRequest{Task: "x"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	a.crash() // replica a dies; its lease runs out
	b := e.manager(func(o *Options) { o.Owner = "replica-b"; o.Lease = 200 * time.Millisecond })
	// b answers reads for a task it does not follow yet.
	g, err := b.GetTask(t.Context(), res.JobID, taskapi.DetailCore, 0)
	if err != nil || g.Status != "running" {
		t.Fatalf("read through b: %+v %v", g, err)
	}
	e.gw.waitStarted(t, res.JobID) // b resubmits under the same key after the lease expired
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "taken over"})
	s := await(t, b, res.JobID)
	if s.Summary != "taken over" {
		t.Fatalf("snapshot %+v", s)
	}
	task, err := e.st.GetTask(t.Context(), "main", res.JobID)
	if err != nil || task.Owner != "replica-b" {
		t.Fatalf("owner after takeover: %+v %v", task, err)
	}
}

// TestRetentionSweep: terminal tasks older than the retention age are
// deleted with their logs and sessions; running ones are kept.
func TestRetentionSweep(t *testing.T) {
	e := newEnv(t)
	m := e.manager(nil) // Retention < 0: no background sweep
	done, err := m.Submit(t.Context(), SubmitRequest{Task: "old"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, done.JobID)
	e.gw.end(done.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
	await(t, m, done.JobID)
	running, err := m.Submit(t.Context(), SubmitRequest{Task: "still going"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, running.JobID)
	// A cutoff one second ahead: the finished task ended in this very
	// millisecond, and a 1 ns retention left it unexpired about half the time.
	m.o.Retention = -time.Second
	m.sweep()
	if _, err := m.GetTask(t.Context(), done.JobID, taskapi.DetailCore, 0); !errors.Is(err, taskapi.ErrNotFound) {
		t.Fatalf("an expired task survived the sweep: %v", err)
	}
	if _, err := m.GetSession(t.Context(), SessionRequest{SessionID: done.SessionKey}); !errors.Is(err, taskapi.ErrNotFound) {
		t.Fatalf("its session survived: %v", err)
	}
	if g, err := m.GetTask(t.Context(), running.JobID, taskapi.DetailCore, 0); err != nil || g.Status != "running" {
		t.Fatalf("a running task was swept: %+v %v", g, err)
	}
	e.gw.end(running.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
	await(t, m, running.JobID)
}
