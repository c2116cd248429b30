package sqlite_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

func open(t *testing.T, path string) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), sqlite.FileName))
	})
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", sqlite.FileName)
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTask(t.Context(), storetest.Task("t1", "main", "k", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	s2 := open(t, path)
	if _, err := s2.GetTask(t.Context(), "main", "t1"); err != nil {
		t.Fatalf("task lost across reopen: %v", err)
	}
}

func TestSecondOwnerRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	open(t, path)
	_, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "single-process") {
		t.Fatalf("second Open = %v, want ErrLocked with a clear message", err)
	}
}

func TestRefusesForeignOrCorruptFiles(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
	}{
		{"not sqlite", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("important notes, not a database\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"foreign tables", func(t *testing.T, path string) {
			s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			db := s.Writer()
			for _, q := range []string{`DROP TABLE clawconnect_meta`, `CREATE TABLE invoices (id INTEGER)`} {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			_ = s.Close()
		}},
		{"newer schema", func(t *testing.T, path string) {
			s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Writer().Exec(`UPDATE clawconnect_meta SET value = '999' WHERE key = 'schema_version'`); err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), sqlite.FileName)
			tc.prepare(t, path)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = sqlite.Open(t.Context(), sqlite.Options{Path: path})
			if !errors.Is(err, store.ErrIncompatible) {
				t.Fatalf("Open = %v, want ErrIncompatible", err)
			}
			after, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(before) != string(after) {
				t.Fatal("the refused file was modified")
			}
		})
	}
}

// TestBatchedPollCounts: poll counters are kept in memory and flushed in
// batches; every read sees the exact count while flushes run concurrently,
// and Close writes what is pending so a reopen keeps it.
func TestBatchedPollCounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, id := range []string{"t1", "t2"} {
		if err := s.CreateTask(ctx, storetest.Task(id, "main", "k-"+id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	const workers, polls = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w := range workers {
		wg.Go(func() {
			for i := range polls {
				if _, err := s.TouchPoll(ctx, "main", "t1", int64(1000+w*polls+i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		for range polls {
			if err := s.FlushPolls(ctx); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		read func() (*store.Task, error)
	}{
		{"get", func() (*store.Task, error) { return s.GetTask(ctx, "main", "t1") }},
		{"session", func() (*store.Task, error) {
			ts, _, err := s.SessionTasks(ctx, "main", "k-t1", store.Page{})
			if err != nil || len(ts) != 1 {
				return nil, fmt.Errorf("session tasks = %d, %v", len(ts), err)
			}
			return ts[0], nil
		}},
	}
	want := [2]int64{workers * polls, 1000 + workers*polls - 1}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.read()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, [2]int64{got.PollCount, got.LastPollAt}); diff != "" {
				t.Fatalf("poll count, last poll (-want +got):\n%s", diff)
			}
		})
	}
	n, err := s.TouchPoll(ctx, "main", "t1", 5)
	if err != nil || n != workers*polls+1 {
		t.Fatalf("TouchPoll = %d, %v; want %d", n, err, workers*polls+1)
	}
	if _, err := s.TouchPoll(ctx, "main", "nope", 5); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TouchPoll(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, path)
	got, err := s2.GetTask(ctx, "main", "t1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, [2]int64{got.PollCount - 1, got.LastPollAt}); diff != "" {
		t.Fatalf("after reopen: poll count-1, last poll (-want +got):\n%s", diff)
	}
	if t2, err := s2.GetTask(ctx, "main", "t2"); err != nil || t2.PollCount != 0 {
		t.Fatalf("untouched task: %+v, %v", t2, err)
	}
}

// TestReaderBesideTheOwner: while one process owns the file, another can
// open it for reading, sees what the owner writes, cannot write, and does
// not count as the owner of its running tasks.
func TestReaderBesideTheOwner(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	owner := open(t, path)
	ctx := t.Context()
	if err := owner.CreateTask(ctx, storetest.Task("t1", "main", "k", 1)); err != nil {
		t.Fatal(err)
	}
	r, err := sqlite.OpenReader(ctx, path)
	if err != nil {
		t.Fatalf("OpenReader beside the owner: %v", err)
	}
	defer r.Close()
	if r.Exclusive() {
		t.Fatal("a reader claims to own the store")
	}
	if err := owner.AppendLogs(ctx, "t1", 1, []store.LogEntry{{Seq: 1, Type: "x", Text: "after the reader opened"}}); err != nil {
		t.Fatal(err)
	}
	got, err := r.GetTask(ctx, "main", "t1")
	if err != nil || got.LogCount != 1 {
		t.Fatalf("reader sees %+v, %v; want the owner's task with 1 log entry", got, err)
	}
	if _, err := owner.TouchPoll(ctx, "main", "t1", 5); err != nil {
		t.Fatal(err)
	}
	// A reader's poll is not counted; it reports the owner's written count.
	if n, err := r.TouchPoll(ctx, "main", "t1", 6); err != nil || n != 0 {
		t.Fatalf("reader TouchPoll = %d, %v; want the owner's unflushed count not visible (0) and no error", n, err)
	}
	if err := r.CreateTask(ctx, storetest.Task("t2", "main", "k2", 2)); err == nil {
		t.Fatal("a reader wrote a task")
	}
	if _, err := owner.GetTask(ctx, "main", "t2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the reader's write reached the store: %v", err)
	}
}

func TestReaderRefusals(t *testing.T) {
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte("not a database at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A build with a newer schema wrote this one (simulated).
	newer := filepath.Join(dir, "newer.db")
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: newer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Writer().Exec(`UPDATE clawconnect_meta SET value = '999' WHERE key = 'schema_version'`); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	for name, tc := range map[string]struct {
		path string
		want error
	}{
		"missing":       {filepath.Join(dir, "absent.db"), os.ErrNotExist},
		"not sqlite":    {notDB, store.ErrIncompatible},
		"newer schema":  {newer, store.ErrIncompatible},
		"hostile path?": {filepath.Join(dir, "x?mode=rw"), nil},
	} {
		t.Run(name, func(t *testing.T) {
			r, err := sqlite.OpenReader(t.Context(), tc.path)
			if err == nil {
				_ = r.Close()
				t.Fatal("OpenReader succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("OpenReader = %v, want %v", err, tc.want)
			}
		})
	}
}
