package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
)

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
