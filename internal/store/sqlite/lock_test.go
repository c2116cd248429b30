package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

// holdLockFile takes the store's lock file as another process would, and
// returns its release.
func holdLockFile(t *testing.T, path string) (release func(), inode uint64) {
	t.Helper()
	f, err := os.OpenFile(path+sqlite.LockSuffix, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }, st.Ino
}

// awaitBlockedOn waits (bounded) until /proc/locks shows a flock waiter
// on inode: a writer blocked in the kernel, to be woken by the release.
func awaitBlockedOn(t *testing.T, inode uint64, wrote <-chan error) {
	t.Helper()
	want := fmt.Sprintf(":%d ", inode)
	var flocks []string
	if !poll.Within(10*time.Second, func() bool {
		select {
		case err := <-wrote:
			t.Fatalf("the write went ahead while another process held the lock file (err %v)", err)
		default:
		}
		data, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Skipf("no /proc/locks: %v", err)
		}
		flocks = nil
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "FLOCK") {
				flocks = append(flocks, line)
			}
			if strings.Contains(line, "-> FLOCK") && strings.Contains(line+" ", want) {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no writer blocked on the lock file (inode %d) within 10 s; flocks:\n%s", inode, strings.Join(flocks, "\n"))
	}
}

// TestWriterWaitsForTheLockFileRelease: a write while another process
// holds the lock file blocks in the kernel on that file (not in SQLite's
// sleeping busy handler) and goes ahead once it is released.
func TestWriterWaitsForTheLockFileRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	s := open(t, path)
	release, inode := holdLockFile(t, path)
	wrote := make(chan error, 1)
	go func() { wrote <- s.CreateTask(context.Background(), storetest.Task("t1", "main", "k", 1)) }()
	awaitBlockedOn(t, inode, wrote)
	release()
	if err := <-wrote; err != nil {
		t.Fatalf("write after the release: %v", err)
	}
	if _, err := s.GetTask(t.Context(), "main", "t1"); err != nil {
		t.Fatal(err)
	}
}

// TestLockFileWaitIsBounded: a write that waits the busy timeout for the
// lock file fails with ErrBusy saying to retry, writes nothing, and the
// next write after the release succeeds.
func TestLockFileWaitIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path, BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	release, _ := holdLockFile(t, path)
	err = s.CreateTask(t.Context(), storetest.Task("t1", "main", "k", 1))
	if !errors.Is(err, store.ErrBusy) || !strings.Contains(err.Error(), "retry") {
		t.Fatalf("write under another's lock file = %v, want ErrBusy saying to retry", err)
	}
	release()
	if _, err := s.GetTask(t.Context(), "main", "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused write left a task: %v", err)
	}
	if err := s.CreateTask(t.Context(), storetest.Task("t1", "main", "k", 1)); err != nil {
		t.Fatalf("the retried write: %v", err)
	}
}

// TestCacheSizesPerOptions: the writer's page cache is the small default
// (what an mcp process needs) unless the caller asks for another size.
func TestCacheSizesPerOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    sqlite.Options
		want int
	}{
		{"default", sqlite.Options{}, -sqlite.DefaultWriterCacheKiB},
		{"serve", sqlite.Options{WriterCacheKiB: 16384, ReaderCacheKiB: 16384}, -16384},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Path = filepath.Join(t.TempDir(), sqlite.FileName)
			s, err := sqlite.Open(t.Context(), tc.o)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			var got int
			if err := s.Writer().QueryRowContext(t.Context(), "PRAGMA cache_size").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("writer cache_size = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestWriteWhoseContextEndsInBeginLeavesNoTransaction: a write whose
// context ends while its BEGIN waits for SQLite's write lock (held by a
// writer that takes no lock file, e.g. the sqlite3 shell) fails with the
// context's error and writes nothing, and the writer connection is left
// outside any transaction: the next write succeeds.
func TestWriteWhoseContextEndsInBeginLeavesNoTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	s := open(t, path)
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	holder, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := s.CreateTask(ctx, storetest.Task("t1", "main", "k", 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("write under another writer's lock with an ending context = %v, want DeadlineExceeded", err)
	}
	if _, err := holder.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	_ = holder.Close()
	if _, err := s.GetTask(t.Context(), "main", "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the failed write left a task: %v", err)
	}
	for i := range 3 {
		if err := s.CreateTask(t.Context(), storetest.Task(fmt.Sprint("t", i+2), "main", fmt.Sprint("k", i), 1)); err != nil {
			t.Fatalf("write %d after the failed one: %v", i, err)
		}
	}
}
