package sqlite_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

func open(t *testing.T, path string) *sqlstore.DB {
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

// TestSharedByTwoOpens: two opens of one file (as two processes have it)
// write concurrently without a busy error, each sees the other's writes at
// once, and their batched poll counts add up.
func TestSharedByTwoOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	a, b := open(t, path), open(t, path)
	ctx := t.Context()
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		for j, s := range []store.Store{a, b} {
			wg.Go(func() {
				id := fmt.Sprintf("t%d-%d", j, i)
				task := storetest.Task(id, "main", "k-"+id, int64(i))
				if err := s.CreateTask(ctx, task); err != nil {
					errs <- err
					return
				}
				task.Status, task.Summary = store.StatusCompleted, "by "+id
				if err := s.UpdateTask(ctx, task); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range n {
		for j := range 2 {
			id := fmt.Sprintf("t%d-%d", j, i)
			for _, s := range []store.Store{a, b} {
				got, err := s.GetTask(ctx, "main", id)
				if err != nil || got.Summary != "by "+id {
					t.Fatalf("%s read through both opens: %+v %v", id, got, err)
				}
			}
		}
	}
	for _, s := range []store.Store{a, b, a} {
		if _, err := s.TouchPoll(ctx, "main", "t0-0", 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*sqlstore.DB{a, b} {
		if err := s.FlushPolls(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := b.GetTask(ctx, "main", "t0-0"); err != nil || got.PollCount != 3 {
		t.Fatalf("poll count across opens = %+v, %v; want 3", got, err)
	}
}

// TestChangeFeedAcrossOpens: a reader watching a task through one open is
// woken when another open (another process) appends to the task's log or
// writes its outcome, by the change log and the file event, with no timer
// involved.
func TestChangeFeedAcrossOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	writer, reader := open(t, path), open(t, path)
	ctx := t.Context()
	task := storetest.Task("watched", "main", "k", 1)
	other := storetest.Task("other", "main", "k2", 1)
	for _, x := range []*store.Task{task, other} {
		if err := writer.CreateTask(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	changed, stop := reader.WatchTask("watched")
	defer stop()
	if changed == nil {
		t.Fatal("a shared SQLite store offers no change feed")
	}
	drain := func() {
		for {
			select {
			case <-changed:
			default:
				return
			}
		}
	}
	wake := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not wake the watcher", what)
		}
	}
	drain()
	if err := writer.AppendLogs(ctx, "watched", 1, []store.LogEntry{{Seq: 1, Type: "x", Text: "progress"}}); err != nil {
		t.Fatal(err)
	}
	wake("a log entry")
	drain()
	task.Status, task.Summary = store.StatusCompleted, "done"
	if err := writer.UpdateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	wake("the outcome")
	// Another task's change does not wake this watcher (once the
	// listener has read it).
	drain()
	other.Status, other.Summary = store.StatusCompleted, "x"
	if err := writer.UpdateTask(ctx, other); err != nil {
		t.Fatal(err)
	}
	mark := storetest.Task("mark", "main", "k3", 1)
	if err := writer.CreateTask(ctx, mark); err != nil {
		t.Fatal(err)
	}
	marked, stopMark := reader.WatchTask("mark")
	defer stopMark()
	mark.Status, mark.Summary = store.StatusCompleted, "y"
	if err := writer.UpdateTask(ctx, mark); err != nil {
		t.Fatal(err)
	}
	select {
	case <-marked:
	case <-time.After(10 * time.Second):
		t.Fatal("the marker change was not heard")
	}
	select {
	case <-changed:
		t.Fatal("another task's change woke the watcher")
	default:
	}
}

// TestNewTaskFeedAcrossOpens: a task created through one open (another
// process) wakes the watchers of new tasks in the other, and an outcome
// does not.
func TestNewTaskFeedAcrossOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	storetest.NewTaskFeed(t, open(t, path), open(t, path))
}

// TestTerminalWorkFeedAcrossOpens: terminal work announced through one
// open (a command) wakes the monitor hosts watching in another.
func TestTerminalWorkFeedAcrossOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	storetest.TerminalWorkFeed(t, open(t, path), open(t, path))
}

// TestBusyWriteFailsClearly: while another process holds the write lock
// past the busy timeout, a write fails with store.ErrBusy and a message
// that says what to do, and the stored task is unchanged; once the lock is
// free the same write lands.
func TestBusyWriteFailsClearly(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path, BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := t.Context()
	task := storetest.Task("t1", "main", "k", 1)
	if err := s.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	holder := open(t, path).Writer()
	conn, err := holder.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	task.Summary = "blocked"
	err = s.UpdateTask(ctx, task)
	if !errors.Is(err, store.ErrBusy) || !strings.Contains(err.Error(), "retry") {
		t.Fatalf("write under another's lock = %v, want ErrBusy saying to retry", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetTask(ctx, "main", "t1"); err != nil || got.Summary != "" || got.Version != 1 {
		t.Fatalf("after the refused write: %+v, %v", got, err)
	}
	if err := s.UpdateTask(ctx, task); err != nil {
		t.Fatalf("the retried write: %v", err)
	}
}

// TestConcurrentFirstOpens: processes starting together on a file that does
// not exist yet all open it (the first migrates, the others wait for its
// lock and find the schema current).
func TestConcurrentFirstOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new", sqlite.FileName)
	const n = 8
	var wg sync.WaitGroup
	stores := make([]*sqlstore.DB, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = sqlite.Open(t.Context(), sqlite.Options{Path: path}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	if err := stores[0].CreateTask(t.Context(), storetest.Task("t1", "main", "k", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[n-1].GetTask(t.Context(), "main", "t1"); err != nil {
		t.Fatal(err)
	}
}

// TestNewStoreIsPrivate: a new store file, and the write-ahead log SQLite
// makes beside it, are readable by their user only, whatever the umask and
// the directory's mode.
func TestNewStoreIsPrivate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, sqlite.FileName)
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, p := range []string{path, path + "-wal"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := st.Mode().Perm(); mode&0o077 != 0 {
			t.Errorf("%s has mode %v; want no access for group and others", filepath.Base(p), mode)
		}
	}
}
