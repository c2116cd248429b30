package storetest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
)

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
