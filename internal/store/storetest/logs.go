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
