// Package storetest is the one conformance suite every store.Store
// implementation passes: SQLite always, PostgreSQL when TEST_DATABASE_URL is
// set. Backends call Run from their own tests with a constructor that
// returns a fresh, empty store.
package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clawconnect/clawconnect/internal/store"
)

// NewStore returns a fresh, empty store for one test; it registers its own
// cleanup.
type NewStore func(t *testing.T) store.Store

// Task returns a valid running task for tests.
func Task(id, agent, session string, startedAt int64) *store.Task {
	return &store.Task{
		ID: id, Agent: agent, SessionKey: session, Status: store.StatusRunning,
		Prompt:  store.Prompt{Task: "do " + id, Context: "ctx", SenderName: "tester"},
		Message: "msg " + id, StartedAt: startedAt, LastEventAt: startedAt,
		Upstream: "reconnecting", Transcript: "detached", Cancellation: "none",
		Artifacts: store.Artifacts{FilesChanged: []string{}, CommandsRun: []string{}},
	}
}

// Run runs the whole suite.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateGetRoundTrip", testRoundTrip},
		{"EveryFieldSurvives", testEveryFieldSurvives},
		{"Scope", testScope},
		{"SessionBusy", testSessionBusy},
		{"ConcurrentSubmitsOneWins", testConcurrentSubmits},
		{"DuplicateID", testDuplicateID},
		{"UpdateCompareAndSet", testUpdateCAS},
		{"TouchPoll", testTouchPoll},
		{"Logs", testLogs},
		{"ListSessionsPages", testListSessions},
		{"SessionTasksPages", testSessionTasks},
		{"Leases", testLeases},
		{"FencedWrites", testFencedWrites},
		{"ReleaseDeadOwner", testReleaseDeadOwner},
		{"ManyLeases", testManyLeases},
		{"Processes", testProcesses},
		{"Attachments", testAttachments},
		{"Sweep", testSweep},
		{"Principal", testPrincipal},
		{"ListByPrincipal", testListByPrincipal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}

func testRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := Task("t1", "main", "agent:main:s1", 1000)
	want.PayloadPath = "/p/t1.payload"
	want.NewThread = true
	if err := s.CreateTask(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTask(ctx, "main", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("created task (-want +got):\n%s", diff)
	}
	got.Status = store.StatusCompleted
	got.Summary = "done ✓"
	got.EndedAt = 2000
	got.TerminalReason = "live-final"
	got.ResultSource = "parent"
	got.OutcomeVersion = 1
	got.ErrorInfo = &store.ErrorInfo{Category: "unknown", Message: "m", SuggestedRecovery: "r"}
	got.Recovery = &store.Recovery{Reason: "no_live_final_text", StartedAt: 1, IdleTimeoutMs: 2, HardCapMs: 3}
	got.Liveness = &store.Liveness{CheckedAt: 5, Upstream: "active", Producing: true}
	got.Artifacts = store.Artifacts{FilesChanged: []string{"a.go"}, CommandsRun: []string{"go test"}, PRURL: "u", NeedsHumanDecision: true}
	if err := s.UpdateTask(ctx, got); err != nil {
		t.Fatal(err)
	}
	again, err := s.GetTask(ctx, "main", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, again); diff != "" {
		t.Fatalf("updated task (-want +got):\n%s", diff)
	}
	if _, err := s.GetTask(ctx, "main", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetTask(unknown) = %v, want ErrNotFound", err)
	}
}

// storeOwned are the Task fields the store itself maintains (counters,
// leases, versions) rather than keeping what the caller wrote.
var storeOwned = []string{"LogCount", "PollCount", "LastPollAt", "Owner", "LeaseUntil", "Fence", "Version"}

// testEveryFieldSurvives fills every field of a task by reflection (so a
// field added later is covered without touching this test), then checks
// that create and update keep each one.
func testEveryFieldSurvives(t *testing.T, s store.Store) {
	ctx := t.Context()
	ignore := cmpopts.IgnoreFields(store.Task{}, storeOwned...)
	want := Task("every-field", "main", "agent:main:every-field", 1)
	fill(want, 1, append([]string{"ID", "Agent", "SessionKey", "Status"}, storeOwned...)...)
	if err := s.CreateTask(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTask(ctx, "main", want.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, ignore); diff != "" {
		t.Fatalf("a created task lost fields (-want +got):\n%s", diff)
	}
	// A task's identity and start time are fixed at creation.
	fill(got, 2, append([]string{"ID", "Agent", "SessionKey", "StartedAt"}, storeOwned...)...)
	got.Status = store.StatusCompleted
	if err := s.UpdateTask(ctx, got); err != nil {
		t.Fatal(err)
	}
	again, err := s.GetTask(ctx, "main", want.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, again, ignore); diff != "" {
		t.Fatalf("an updated task lost fields (-want +got):\n%s", diff)
	}
}

func testScope(t *testing.T, s store.Store) {
	ctx := t.Context()
	if err := s.CreateTask(ctx, Task("t1", "a", "k", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetTask(ctx, "b", "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetTask(other agent) = %v, want ErrNotFound", err)
	}
	if _, err := s.TouchPoll(ctx, "b", "t1", 5); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TouchPoll(other agent) = %v, want ErrNotFound", err)
	}
	if _, err := s.GetSession(ctx, "b", "k"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSession(other agent) = %v, want ErrNotFound", err)
	}
	// The same session key under another agent is another session.
	if err := s.CreateTask(ctx, Task("t2", "b", "k", 2)); err != nil {
		t.Fatalf("same key, other agent: %v", err)
	}
}

func testSessionBusy(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := Task("t1", "main", "k", 1)
	if err := s.CreateTask(ctx, first); err != nil {
		t.Fatal(err)
	}
	err := s.CreateTask(ctx, Task("t2", "main", "k", 2))
	var busy *store.SessionBusyError
	if !errors.As(err, &busy) || !errors.Is(err, store.ErrSessionBusy) || busy.JobID != "t1" {
		t.Fatalf("second CreateTask = %v, want SessionBusyError{t1}", err)
	}
	if _, err := s.GetTask(ctx, "main", "t2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused task was written: %v", err)
	}
	first.Status, first.EndedAt = store.StatusCompleted, 3
	if err := s.UpdateTask(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTask(ctx, Task("t3", "main", "k", 4)); err != nil {
		t.Fatalf("CreateTask after the first finished: %v", err)
	}
	sess, err := s.GetSession(ctx, "main", "k")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.Session{Agent: "main", SessionKey: "k", LastJobID: "t3", CreatedAt: 1, UpdatedAt: 4}, *sess); diff != "" {
		t.Fatalf("session (-want +got):\n%s", diff)
	}
}

func testConcurrentSubmits(t *testing.T, s store.Store) {
	ctx := t.Context()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = s.CreateTask(ctx, Task(fmt.Sprintf("c%d", i), "main", "shared", int64(i+1)))
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrSessionBusy):
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d concurrent submits on one session succeeded, want exactly 1", ok)
	}
}

func testDuplicateID(t *testing.T, s store.Store) {
	ctx := t.Context()
	if err := s.CreateTask(ctx, Task("t1", "main", "k1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTask(ctx, Task("t1", "main", "k2", 2)); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate id = %v, want ErrExists", err)
	}
}

func testUpdateCAS(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := Task("t1", "main", "k", 1)
	if err := s.CreateTask(ctx, a); err != nil {
		t.Fatal(err)
	}
	b, err := s.GetTask(ctx, "main", "t1")
	if err != nil {
		t.Fatal(err)
	}
	a.Summary = "first"
	if err := s.UpdateTask(ctx, a); err != nil {
		t.Fatal(err)
	}
	b.Summary = "stale"
	if err := s.UpdateTask(ctx, b); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update = %v, want ErrConflict", err)
	}
	ghost := Task("ghost", "main", "k", 1)
	if err := s.UpdateTask(ctx, ghost); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of unknown task = %v, want ErrNotFound", err)
	}
	got, err := s.GetTask(ctx, "main", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Summary != "first" || got.Version != a.Version {
		t.Fatalf("got summary %q version %d, want %q %d", got.Summary, got.Version, "first", a.Version)
	}
}

func testTouchPoll(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := Task("t1", "main", "k", 1)
	if err := s.CreateTask(ctx, a); err != nil {
		t.Fatal(err)
	}
	for want := int64(1); want <= 3; want++ {
		n, err := s.TouchPoll(ctx, "main", "t1", 100+want)
		if err != nil || n != want {
			t.Fatalf("TouchPoll = %d, %v; want %d", n, err, want)
		}
	}
	// The manager's own writes do not clobber the counter.
	a.Summary = "x"
	if err := s.UpdateTask(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTask(ctx, "main", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if got.PollCount != 3 || got.LastPollAt != 103 {
		t.Fatalf("poll count %d at %d, want 3 at 103", got.PollCount, got.LastPollAt)
	}
}

func testLogs(t *testing.T, s store.Store) {
	ctx := t.Context()
	if err := s.CreateTask(ctx, Task("t1", "main", "k", 1)); err != nil {
		t.Fatal(err)
	}
	var all []store.LogEntry
	for i := int64(1); i <= 12; i++ {
		e := store.LogEntry{Seq: i, TS: 10 + i, Type: "tool", Text: fmt.Sprintf("line %d", i), IsError: i%5 == 0}
		all = append(all, e)
		if err := s.AppendLogs(ctx, "t1", 1, []store.LogEntry{e}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AppendLogs(ctx, "t1", 1, []store.LogEntry{{Seq: 20, Type: "x"}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("gap in seq = %v, want ErrConflict", err)
	}
	if err := s.AppendLogs(ctx, "t1", 1, []store.LogEntry{{Seq: 13, Type: "x"}, {Seq: 15, Type: "x"}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("gap inside a batch = %v, want ErrConflict", err)
	}
	if err := s.AppendLogs(ctx, "t1", 1, []store.LogEntry{{Seq: 12, Type: "x"}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("seq already taken = %v, want ErrConflict", err)
	}
	if err := s.AppendLogs(ctx, "nope", 1, []store.LogEntry{{Seq: 1}}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("logs of unknown task = %v, want ErrNotFound", err)
	}
	got, err := s.Logs(ctx, "t1", 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all[3:7], got); diff != "" {
		t.Fatalf("Logs(after 3, 4) (-want +got):\n%s", diff)
	}
	tail, err := s.TailLogs(ctx, "t1", 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all[7:], tail); diff != "" {
		t.Fatalf("TailLogs(5) (-want +got):\n%s", diff)
	}
	task, err := s.GetTask(ctx, "main", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if task.LogCount != 12 {
		t.Fatalf("LogCount = %d, want 12", task.LogCount)
	}
}

func finish(t *testing.T, s store.Store, task *store.Task, status store.Status, at int64) {
	t.Helper()
	task.Status, task.EndedAt = status, at
	if err := s.UpdateTask(t.Context(), task); err != nil {
		t.Fatal(err)
	}
}

func testListSessions(t *testing.T, s store.Store) {
	ctx := t.Context()
	var want []string
	for i := range 7 {
		key := fmt.Sprintf("s%d", i)
		task := Task("t"+key, "main", key, int64(100+i))
		if err := s.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			finish(t, s, task, store.StatusCompleted, int64(200+i))
		}
		want = append([]string{key}, want...)
	}
	if err := s.CreateTask(ctx, Task("other", "other-agent", "sX", 500)); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	pages := 0
	for {
		rows, next, err := s.ListSessions(ctx, "main", store.Page{Limit: 3, Before: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range rows {
			if r.Task == nil || r.Task.ID != "t"+r.Session.SessionKey {
				t.Fatalf("row %s has latest task %+v", r.Session.SessionKey, r.Task)
			}
			got = append(got, r.Session.SessionKey)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(want, got); diff != "" || pages != 3 {
		t.Fatalf("sessions over %d pages (-want +got):\n%s", pages, diff)
	}
	if _, _, err := s.ListSessions(ctx, "main", store.Page{Before: "garbage"}); err == nil {
		t.Fatal("a malformed cursor was accepted")
	}
}

func testSessionTasks(t *testing.T, s store.Store) {
	ctx := t.Context()
	var want []string
	for i := range 5 {
		task := Task(fmt.Sprintf("t%d", i), "main", "k", int64(10+i))
		if err := s.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
		finish(t, s, task, store.StatusCompleted, int64(10+i))
		want = append([]string{task.ID}, want...)
	}
	var got []string
	cursor := ""
	for {
		tasks, next, err := s.SessionTasks(ctx, "main", "k", store.Page{Limit: 2, Before: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks {
			got = append(got, task.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("session tasks (-want +got):\n%s", diff)
	}
}

func ids(ts []*store.Task) []string {
	out := []string{}
	for _, t := range ts {
		out = append(out, t.ID)
	}
	return out
}

func testLeases(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i := range 3 {
		if err := s.CreateTask(ctx, Task(fmt.Sprintf("t%d", i), "main", fmt.Sprintf("k%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	done := Task("done", "main", "kd", 1)
	if err := s.CreateTask(ctx, done); err != nil {
		t.Fatal(err)
	}
	finish(t, s, done, store.StatusCompleted, 2)

	a, err := s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "A", Now: 1000, Until: 31000, Limit: 10, IncludeOwn: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"t0", "t1", "t2"}, sortedIDs(a)); diff != "" {
		t.Fatalf("A claimed (-want +got):\n%s", diff)
	}
	again, err := s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "A", Now: 1000, Until: 31000, Limit: 10, IncludeOwn: true})
	if err != nil || len(again) != 0 {
		t.Fatalf("a repeated claim with the same Until returned %v, %v", ids(again), err)
	}
	// A restarted owner takes its own live-leased tasks back with a later Until.
	own, err := s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "A", Now: 1500, Until: 31500, Limit: 1, IncludeOwn: true})
	if err != nil || len(own) != 1 {
		t.Fatalf("own re-claim returned %v, %v", ids(own), err)
	}
	if others, err := s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "A", Now: 1500, Until: 40000, Limit: 10}); err != nil || len(others) != 0 {
		t.Fatalf("a claim without IncludeOwn took live leases: %v, %v", ids(others), err)
	}
	b, err := s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "B", Now: 2000, Until: 32000, Limit: 10, IncludeOwn: true})
	if err != nil || len(b) != 0 {
		t.Fatalf("B claimed %v, %v while A's leases are live", ids(b), err)
	}
	if err := s.CheckLease(ctx, "t0", "A", 2000); err != nil {
		t.Fatalf("A's lease: %v", err)
	}
	// Renewal covers only the tasks named: t2 (not followed any more) keeps
	// its old lease, and a finished task is reported lost.
	lost, err := s.RenewLeases(ctx, "A", 40000, []string{"t0", "t1", "done"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"done"}, lost); diff != "" {
		t.Fatalf("RenewLeases lost (-want +got):\n%s", diff)
	}
	if t2, err := s.GetTask(ctx, "main", "t2"); err != nil || t2.LeaseUntil != 31500 && t2.LeaseUntil != 31000 {
		t.Fatalf("t2, which A does not follow, was renewed: %+v %v", t2, err)
	}
	// Nobody follows t2: once its lease ends, anyone may take it.
	if b, err := s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "B", Now: 32000, Until: 40000, Limit: 10}); err != nil || len(b) != 1 || b[0].ID != "t2" {
		t.Fatalf("B's claim of the unfollowed task = %v, %v", ids(b), err)
	}
	if n, err := s.ReleaseLeases(ctx, "B", []string{"t2"}); err != nil || n != 1 {
		t.Fatalf("ReleaseLeases = %d, %v", n, err)
	}
	if n, err := s.RenewLeases(ctx, "A", 40000, []string{"t2"}); err != nil || len(n) != 1 {
		t.Fatalf("A renewed a lease B holds: lost %v, %v", n, err)
	}
	if a, err := s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "A", Now: 32001, Until: 40000, Limit: 10}); err != nil || len(a) != 1 || a[0].ID != "t2" {
		t.Fatalf("a released lease was not claimable at once: %v, %v", ids(a), err)
	}
	b, err = s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "B", Now: 35000, Until: 65000, Limit: 10})
	if err != nil || len(b) != 0 {
		t.Fatalf("B claimed %v, %v before the renewed lease expired", ids(b), err)
	}
	b, err = s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "B", Now: 40001, Until: 70000, Limit: 2})
	if err != nil || len(b) != 2 {
		t.Fatalf("B claimed %v, %v after expiry, want 2 (limit)", ids(b), err)
	}
	for _, task := range b {
		if task.Owner != "B" || task.LeaseUntil != 70000 {
			t.Fatalf("claimed task %s owner %q until %d", task.ID, task.Owner, task.LeaseUntil)
		}
		if err := s.CheckLease(ctx, task.ID, "A", 40001); !errors.Is(err, store.ErrLeaseLost) {
			t.Fatalf("A's lease on %s after takeover = %v, want ErrLeaseLost", task.ID, err)
		}
	}
	if err := s.CheckLease(ctx, "nope", "A", 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CheckLease(unknown) = %v", err)
	}
}

func sortedIDs(ts []*store.Task) []string {
	out := ids(ts)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func testAttachments(t *testing.T, s store.Store) {
	ctx := t.Context()
	empty, err := s.LoadAttachments(ctx, "main", "k")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&store.AttachmentState{Agent: "main", SessionKey: "k"}, empty); diff != "" {
		t.Fatalf("empty state (-want +got):\n%s", diff)
	}
	w := store.AttachmentWrite{Agent: "main", SessionKey: "k", CurrentID: "a1",
		Records: []store.AttachmentRecord{{ID: "a1", ObservationToken: 3, Data: []byte(`{"id":"a1"}`)}}}
	v, err := s.SaveAttachments(ctx, w)
	if err != nil || v != 1 {
		t.Fatalf("first save = %d, %v; want version 1", v, err)
	}
	if _, err := s.SaveAttachments(ctx, w); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second save from version 0 = %v, want ErrConflict", err)
	}
	// Replace: a1 superseded, a2 current; the write carries only the changed
	// records, and the lineage keeps both in first-save order.
	v, err = s.SaveAttachments(ctx, store.AttachmentWrite{Agent: "main", SessionKey: "k", ExpectVersion: 1, CurrentID: "a2",
		Records: []store.AttachmentRecord{
			{ID: "a2", ObservationToken: 9, Data: []byte(`{"id":"a2"}`)},
			{ID: "a1", ObservationToken: 3, Data: []byte(`{"id":"a1","status":"superseded"}`)},
		}})
	if err != nil || v != 2 {
		t.Fatalf("replace save = %d, %v; want version 2", v, err)
	}
	got, err := s.LoadAttachments(ctx, "main", "k")
	if err != nil {
		t.Fatal(err)
	}
	want := &store.AttachmentState{Agent: "main", SessionKey: "k", CurrentID: "a2", Version: 2, Records: []store.AttachmentRecord{
		{ID: "a1", Seq: 1, ObservationToken: 3, Data: []byte(`{"id":"a1","status":"superseded"}`)},
		{ID: "a2", Seq: 2, ObservationToken: 9, Data: []byte(`{"id":"a2"}`)},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("state (-want +got):\n%s", diff)
	}
	if n, err := s.MaxObservationToken(ctx); err != nil || n != 9 {
		t.Fatalf("MaxObservationToken = %d, %v; want 9", n, err)
	}
	// Another session's state is independent.
	if _, err := s.SaveAttachments(ctx, store.AttachmentWrite{Agent: "other", SessionKey: "k"}); err != nil {
		t.Fatalf("other agent's first save: %v", err)
	}
	// A detach leaves no current record but keeps the lineage.
	if _, err := s.SaveAttachments(ctx, store.AttachmentWrite{Agent: "main", SessionKey: "k", ExpectVersion: 2}); err != nil {
		t.Fatal(err)
	}
	again, err := s.LoadAttachments(ctx, "main", "k")
	if err != nil || again.CurrentID != "" || len(again.Records) != 2 || again.Version != 3 {
		t.Fatalf("after detach: %+v, %v", again, err)
	}
}

func testSweep(t *testing.T, s store.Store) {
	ctx := t.Context()
	old := Task("old", "main", "k-old", 1)
	if err := s.CreateTask(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLogs(ctx, "old", 1, []store.LogEntry{{Seq: 1, Type: "x", Text: "a"}, {Seq: 2, Type: "x", Text: "b"}}); err != nil {
		t.Fatal(err)
	}
	finish(t, s, old, store.StatusCompleted, 10)
	recent := Task("recent", "main", "k-recent", 1)
	if err := s.CreateTask(ctx, recent); err != nil {
		t.Fatal(err)
	}
	finish(t, s, recent, store.StatusError, 1000)
	running := Task("running", "main", "k-run", 1)
	if err := s.CreateTask(ctx, running); err != nil {
		t.Fatal(err)
	}
	res, err := s.Sweep(ctx, 500, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.SweepResult{Tasks: 1, Logs: 2, Sessions: 1}, res); diff != "" {
		t.Fatalf("sweep (-want +got):\n%s", diff)
	}
	if _, err := s.GetTask(ctx, "main", "old"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old task survived: %v", err)
	}
	if _, err := s.GetSession(ctx, "main", "k-old"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old session survived: %v", err)
	}
	for _, id := range []string{"recent", "running"} {
		if _, err := s.GetTask(ctx, "main", id); err != nil {
			t.Fatalf("%s was swept: %v", id, err)
		}
	}
}

// testPrincipal: a task keeps its principal, and a session keeps the
// principal of the task that started it.
func testPrincipal(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := Task("p1", "main", "agent:main:p", 1)
	first.Principal = "user:alice"
	if err := s.CreateTask(ctx, first); err != nil {
		t.Fatal(err)
	}
	first.Status, first.EndedAt = store.StatusCompleted, 2
	if err := s.UpdateTask(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := Task("p2", "main", "agent:main:p", 3)
	second.Principal = "user:bob"
	if err := s.CreateTask(ctx, second); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTask(ctx, "main", "p2")
	if err != nil {
		t.Fatal(err)
	}
	if got.Principal != "user:bob" {
		t.Errorf("task principal = %q, want user:bob", got.Principal)
	}
	sess, err := s.GetSession(ctx, "main", "agent:main:p")
	if err != nil {
		t.Fatal(err)
	}
	if sess.Principal != "user:alice" {
		t.Errorf("session principal = %q, want the starter's user:alice", sess.Principal)
	}
}

// testListByPrincipal: a principal's page holds its own sessions however
// many newer sessions another principal has (filtered in the query, not
// after the page).
func testListByPrincipal(t *testing.T, s store.Store) {
	ctx := t.Context()
	newTask := func(id, principal string, at int64) {
		task := Task(id, "main", "agent:main:"+id, at)
		task.Principal = principal
		if err := s.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	newTask("bob-1", "user:bob", 1)
	for i := range 5 {
		newTask(fmt.Sprintf("alice-%d", i), "user:alice", int64(10+i))
	}
	bob := "user:bob"
	rows, _, err := s.ListSessions(ctx, "main", store.Page{Limit: 3, Principal: &bob})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Session.SessionKey != "agent:main:bob-1" {
		t.Fatalf("bob's page = %+v, want his one session", rows)
	}
	all, _, err := s.ListSessions(ctx, "main", store.Page{Limit: 3})
	if err != nil || len(all) != 3 || all[0].Session.SessionKey != "agent:main:alice-4" {
		t.Fatalf("unfiltered page = %+v, %v; want alice's three newest", all, err)
	}
}

// testFencedWrites: a process that lost a task's lease (another claimed it,
// raising the fencing token) can no longer change the task: its outcome
// write and its log append are refused with ErrLeaseLost and change
// nothing, even after it re-reads the record, while the new owner writes.
func testFencedWrites(t *testing.T, s store.Store) {
	ctx := t.Context()
	task := Task("f1", "main", "k", 1)
	task.Owner, task.LeaseUntil = "A", 1000
	if err := s.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if task.Fence != 1 {
		t.Fatalf("a new task's fence = %d, want 1", task.Fence)
	}
	stale, err := s.GetTask(ctx, "main", "f1")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLogs(ctx, "f1", stale.Fence, []store.LogEntry{{Seq: 1, Type: "x", Text: "by A"}}); err != nil {
		t.Fatal(err)
	}
	// A pauses past its lease; B takes the task over.
	b, err := s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "B", Now: 2000, Until: 32000, Limit: 10})
	if err != nil || len(b) != 1 || b[0].Fence != 2 {
		t.Fatalf("B's claim = %+v, %v; want f1 with fence 2", b, err)
	}
	before, err := s.GetTask(ctx, "main", "f1")
	if err != nil {
		t.Fatal(err)
	}
	// A wakes: every write with its token is refused.
	stale.Status, stale.Summary, stale.OutcomeVersion = store.StatusCompleted, "stale outcome", 1
	if err := s.UpdateTask(ctx, stale); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale owner's outcome write = %v, want ErrLeaseLost", err)
	}
	if err := s.AppendLogs(ctx, "f1", 1, []store.LogEntry{{Seq: 2, Type: "x", Text: "late"}}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale owner's log append = %v, want ErrLeaseLost", err)
	}
	// Re-reading does not help a writer that keeps its own token.
	fresh, err := s.GetTask(ctx, "main", "f1")
	if err != nil {
		t.Fatal(err)
	}
	fresh.Fence = 1
	fresh.Status, fresh.Summary = store.StatusCompleted, "stale after re-read"
	if err := s.UpdateTask(ctx, fresh); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("stale owner's write after a re-read = %v, want ErrLeaseLost", err)
	}
	if _, err := s.RenewLeases(ctx, "A", 99000, []string{"f1"}); err != nil {
		t.Fatal(err)
	}
	after, err := s.GetTask(ctx, "main", "f1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("the stale owner changed the task (-before +after):\n%s", diff)
	}
	// The new owner writes with its token.
	if err := s.AppendLogs(ctx, "f1", 2, []store.LogEntry{{Seq: 2, Type: "x", Text: "by B"}}); err != nil {
		t.Fatal(err)
	}
	after.LogCount = 2
	after.Status, after.Summary, after.EndedAt, after.OutcomeVersion = store.StatusCompleted, "by B", 3000, 1
	if err := s.UpdateTask(ctx, after); err != nil {
		t.Fatalf("the new owner's outcome: %v", err)
	}
	logs, err := s.Logs(ctx, "f1", 0, 10)
	if err != nil || len(logs) != 2 || logs[1].Text != "by B" {
		t.Fatalf("logs %+v %v", logs, err)
	}
}

// testReleaseDeadOwner: releasing every lease of an owner proven dead
// makes its running tasks claimable at once, with a new fence.
func testReleaseDeadOwner(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i := range 3 {
		task := Task(fmt.Sprintf("d%d", i), "main", fmt.Sprintf("k%d", i), 1)
		task.Owner, task.LeaseUntil = "dead", 1_000_000
		if err := s.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "new", Now: 1000, Until: 31000, Limit: 10}); err != nil || len(got) != 0 {
		t.Fatalf("claimed live leases: %v %v", ids(got), err)
	}
	if n, err := s.ReleaseLeases(ctx, "dead", nil); err != nil || n != 3 {
		t.Fatalf("ReleaseLeases(all) = %d, %v", n, err)
	}
	got, err := s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "new", Now: 1000, Until: 31000, Limit: 10})
	if err != nil || len(got) != 3 {
		t.Fatalf("claim after release = %v, %v", ids(got), err)
	}
	for _, task := range got {
		if task.Fence != 2 || task.Owner != "new" {
			t.Fatalf("claimed %s owner %q fence %d", task.ID, task.Owner, task.Fence)
		}
	}
}

// testManyLeases: renewal and release take lists longer than one
// statement's chunk.
func testManyLeases(t *testing.T, s store.Store) {
	ctx := t.Context()
	var all []string
	for i := range 75 {
		task := Task(fmt.Sprintf("m%02d", i), "main", fmt.Sprintf("k%d", i), 1)
		task.Owner, task.LeaseUntil = "A", 1000
		if err := s.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
		all = append(all, task.ID)
	}
	follow := append(all[:70:70], "ghost")
	lost, err := s.RenewLeases(ctx, "A", 50000, follow)
	if err != nil || len(lost) != 1 || lost[0] != "ghost" {
		t.Fatalf("RenewLeases lost %v, %v", lost, err)
	}
	got, err := s.ClaimTasks(ctx, store.Claim{Agent: "main", Owner: "B", Now: 2000, Until: 40000, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all[70:], sortedIDs(got)); diff != "" {
		t.Fatalf("claimable after a partial renewal (-want +got):\n%s", diff)
	}
	if n, err := s.ReleaseLeases(ctx, "A", all[:70]); err != nil || n != 70 {
		t.Fatalf("ReleaseLeases = %d, %v", n, err)
	}
}

// testProcesses: the process registry keeps one row per process, keeps the
// first StartedAt, lists what each holds, and forgets removed processes.
func testProcesses(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := store.Process{ID: "host/1/a", Host: "h", PID: 1, Start: "boot:10", Role: "serve", StartedAt: 100, HeartbeatAt: 100}
	b := store.Process{ID: "host/2/b", Host: "h", PID: 2, Start: "boot:20", Role: "mcp", StartedAt: 200, HeartbeatAt: 200}
	for _, p := range []store.Process{a, b} {
		if err := s.Heartbeat(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	a2 := a
	a2.StartedAt, a2.HeartbeatAt = 999, 300
	if err := s.Heartbeat(ctx, a2); err != nil {
		t.Fatal(err)
	}
	task := Task("p1", "main", "k", 1)
	task.Owner, task.LeaseUntil = a.ID, 1000
	if err := s.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	done := Task("p2", "main", "k2", 1)
	done.Owner = a.ID
	if err := s.CreateTask(ctx, done); err != nil {
		t.Fatal(err)
	}
	finish(t, s, done, store.StatusCompleted, 5)
	got, err := s.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.HeartbeatAt, a.Tasks = 300, []string{"p1"}
	if diff := cmp.Diff([]store.Process{a, b}, got); diff != "" {
		t.Fatalf("processes (-want +got):\n%s", diff)
	}
	if err := s.RemoveProcess(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveProcess(ctx, "unknown"); err != nil {
		t.Fatal(err)
	}
	got, err = s.Processes(ctx)
	if err != nil || len(got) != 1 || got[0].ID != b.ID {
		t.Fatalf("after remove: %+v %v", got, err)
	}
}
