package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

// TestListenerDeafWhileNobodyWatches: while no process has a reader
// waiting for an announcement, a write leaves no change row and signals no
// listener (every commit of every process used to wake each listener only
// to be discarded); once a reader of another open watches, the writes
// announce and wake it as before.
func TestListenerDeafWhileNobodyWatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	writer, reader := open(t, path), open(t, path)
	ctx := t.Context()
	rows := func() int {
		t.Helper()
		var n int
		if err := writer.Writer().QueryRowContext(ctx, `SELECT COUNT(*) FROM task_changes`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	task := storetest.Task("deaf", "main", "k", 1)
	if err := writer.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 0 {
		t.Fatalf("a commit nobody waits for wrote %d change rows, want 0", n)
	}

	changed, stop := reader.WatchTask(task.ID)
	if err := writer.AppendLogs(ctx, task.ID, 1, []store.LogEntry{{Seq: 1, Type: "x", Text: "progress"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("a log entry written by another open did not wake the watcher")
	}
	if n := rows(); n != 1 {
		t.Fatalf("a commit a reader waits for wrote %d change rows, want 1", n)
	}
	stop()
	task.Status, task.Summary = store.StatusCompleted, "done"
	if err := writer.UpdateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 1 {
		t.Fatalf("once the reader stopped watching, the outcome wrote a change row (%d rows, want 1)", n)
	}
}
