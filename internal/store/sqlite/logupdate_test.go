package sqlite_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

// TestUpdateTaskWithLogsIsAtomic: the outcome and its log entries land
// together, and a write whose fence is stale writes neither.
func TestUpdateTaskWithLogsIsAtomic(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), sqlite.FileName))
	ctx := t.Context()
	task := storetest.Task("t1", "main", "k", 1)
	if err := s.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	entry := []store.LogEntry{{Seq: 1, TS: 2, Type: "lifecycle", Text: "Agent lifecycle: end"}}
	stale := *task
	stale.Fence = 7
	stale.Status = store.StatusCompleted
	if err := s.UpdateTaskWithLogs(ctx, &stale, entry); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("write with a stale fence = %v, want ErrLeaseLost", err)
	}
	if got, err := s.GetTask(ctx, "main", "t1"); err != nil || got.Status != store.StatusRunning || got.LogCount != 0 {
		t.Fatalf("after the refused write: %+v, %v", got, err)
	}
	task.Status, task.Summary = store.StatusCompleted, "done"
	if err := s.UpdateTaskWithLogs(ctx, task, entry); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTask(ctx, "main", "t1")
	if err != nil || got.Status != store.StatusCompleted || got.LogCount != 1 || got.Version != 2 {
		t.Fatalf("after the write: %+v, %v", got, err)
	}
	logs, err := s.TailLogs(ctx, "t1", 10)
	if err != nil || len(logs) != 1 || logs[0].Text != "Agent lifecycle: end" {
		t.Fatalf("logs %+v, %v", logs, err)
	}
}
