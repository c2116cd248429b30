package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
)

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
