package storetest

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
)

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

// testUpdateWithLogs: UpdateTaskWithLogs writes the task and its entries
// together (batches longer than one insert statement included) or, on each
// of its errors, neither.
func testUpdateWithLogs(t *testing.T, s store.Store) {
	ctx := t.Context()
	task := Task("t1", "main", "k", 1)
	if err := s.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	entries := func(first, n int64) []store.LogEntry {
		var out []store.LogEntry
		for i := first; i < first+n; i++ {
			out = append(out, store.LogEntry{Seq: i, TS: 100 + i, Type: "tool", Text: fmt.Sprintf("line %d", i), IsError: i%3 == 0})
		}
		return out
	}
	refused := []struct {
		name    string
		edit    func(t *store.Task)
		entries []store.LogEntry
		want    error
	}{
		{"stale fence", func(t *store.Task) { t.Fence = 9 }, entries(1, 2), store.ErrLeaseLost},
		{"stale version", func(t *store.Task) { t.Version = 9 }, entries(1, 2), store.ErrConflict},
		{"seq not after the log", func(*store.Task) {}, entries(2, 2), store.ErrConflict},
		{"gap inside the batch", func(*store.Task) {}, []store.LogEntry{{Seq: 1, Type: "x"}, {Seq: 3, Type: "x"}}, store.ErrConflict},
		{"unknown task", func(t *store.Task) { t.ID = "nope" }, entries(1, 1), store.ErrNotFound},
	}
	for _, tc := range refused {
		next := *task
		next.Status, next.Summary = store.StatusCompleted, "refused"
		tc.edit(&next)
		if err := s.UpdateTaskWithLogs(ctx, &next, tc.entries); !errors.Is(err, tc.want) {
			t.Fatalf("%s: UpdateTaskWithLogs = %v, want %v", tc.name, err, tc.want)
		}
		got, err := s.GetTask(ctx, "main", "t1")
		if err != nil || got.Status != store.StatusRunning || got.LogCount != 0 || got.Version != 1 {
			t.Fatalf("%s: the refused write changed the task: %+v, %v", tc.name, got, err)
		}
		if tail, err := s.TailLogs(ctx, "t1", 8); err != nil || len(tail) != 0 {
			t.Fatalf("%s: the refused write left entries %+v, %v", tc.name, tail, err)
		}
	}
	// Entries of a tool call first, then the outcome with 19 held back.
	if err := s.AppendLogs(ctx, "t1", 1, entries(1, 2)); err != nil {
		t.Fatal(err)
	}
	task.Status, task.Summary, task.EndedAt = store.StatusCompleted, "done", 5
	if err := s.UpdateTaskWithLogs(ctx, task, entries(3, 19)); err != nil {
		t.Fatal(err)
	}
	if task.Version != 2 {
		t.Fatalf("version after the write = %d, want 2", task.Version)
	}
	got, err := s.GetTask(ctx, "main", "t1")
	if err != nil || got.Status != store.StatusCompleted || got.Summary != "done" || got.LogCount != 21 || got.Version != 2 {
		t.Fatalf("after the write: %+v, %v", got, err)
	}
	logs, err := s.Logs(ctx, "t1", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(entries(1, 21), logs); diff != "" {
		t.Fatalf("logs (-want +got):\n%s", diff)
	}
}
