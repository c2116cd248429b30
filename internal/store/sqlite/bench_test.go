package sqlite_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
	"github.com/clawconnect/clawconnect/internal/testbed/cputime"
)

// BenchmarkRoundTripStore is the store's share of one run_task +
// check_task on the instant fake gateway, as the task manager makes the
// calls: the submit's session guard and CreateTask, the outcome with the
// run's two held-back lifecycle entries (UpdateTaskWithLogs), then
// check_task's keyed reads (the task, its log tail, its session, its
// attachments). Every call gets a request's cancellable context. cpu-ns/op
// is the process's CPU time per op (GC included).
func BenchmarkRoundTripStore(b *testing.B) {
	s, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(b.TempDir(), sqlite.FileName)})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	cpu0 := cputime.Self()
	for i := 0; b.Loop(); i++ {
		id, key := "t"+strconv.Itoa(i), "task-"+strconv.Itoa(i)
		if _, err := s.GetSession(ctx, "main", key); err == nil {
			b.Fatal("a new session exists")
		}
		t := storetest.Task(id, "main", key, int64(i))
		t.Owner, t.LeaseUntil = "me", int64(i)+30_000
		if err := s.CreateTask(ctx, t); err != nil {
			b.Fatal(err)
		}
		t.Status, t.EndedAt, t.Summary, t.ResultSource = store.StatusCompleted, int64(i)+1, "FAKE-REPLY: ok", "chat_final"
		entries := []store.LogEntry{
			{Seq: 1, TS: int64(i), Type: "lifecycle", Text: "lifecycle: start"},
			{Seq: 2, TS: int64(i) + 1, Type: "lifecycle", Text: "lifecycle: end"},
		}
		if err := s.UpdateTaskWithLogs(ctx, t, entries); err != nil {
			b.Fatal(err)
		}
		if _, err := s.GetTask(ctx, "main", id); err != nil {
			b.Fatal(err)
		}
		if tail, err := s.TailLogs(ctx, id, 8); err != nil || len(tail) != 2 {
			b.Fatalf("tail %v, %v", tail, err)
		}
		if _, err := s.GetSession(ctx, "main", key); err != nil {
			b.Fatal(err)
		}
		if _, err := s.LoadAttachments(ctx, "main", key); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cputime.Self()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
