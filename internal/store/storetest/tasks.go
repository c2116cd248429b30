package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
)

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
	got.ErrorInfo = &taskapi.ErrorInfo{Category: "unknown", Message: "m", SuggestedRecovery: "r"}
	got.Recovery = &taskapi.Recovery{Reason: "no_live_final_text", StartedAt: 1, IdleTimeoutMs: 2, HardCapMs: 3}
	got.Liveness = &taskapi.Liveness{CheckedAt: 5, Upstream: "active", Producing: true}
	got.Artifacts = taskapi.Artifacts{FilesChanged: []string{"a.go"}, CommandsRun: []string{"go test"}, PRURL: "u", NeedsHumanDecision: true}
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

func finish(t *testing.T, s store.Store, task *store.Task, status store.Status, at int64) {
	t.Helper()
	task.Status, task.EndedAt = status, at
	if err := s.UpdateTask(t.Context(), task); err != nil {
		t.Fatal(err)
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
