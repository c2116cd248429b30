// Package sqlite is the embedded, single-process store: one SQLite file
// (default CLAWCONNECT_HOME/clawconnect.db) in WAL mode with one writer
// connection and a small read-only pool. A second process that tries to open
// the same file is refused with store.ErrLocked.
package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
)

// FileName is the database file name inside CLAWCONNECT_HOME.
const FileName = "clawconnect.db"

// Options configures Open.
type Options struct {
	// Path is the database file; required. Its directory is created (0700).
	Path string
	// Readers is the size of the read-only pool; 0 means 4.
	Readers int
}

// Open opens (creating and migrating if needed) the database at o.Path and
// takes the process lock on it. It refuses a file that is not a SQLite
// database, a database holding foreign tables, or one a newer build wrote
// (store.ErrIncompatible), a file that fails its integrity check or an
// empty one that replaced a store in use (ErrCorrupt, see integrity.go),
// and a file another process holds (store.ErrLocked).
func Open(ctx context.Context, o Options) (*sqlstore.DB, error) {
	if o.Path == "" {
		return nil, errors.New("open sqlite store: no path")
	}
	if strings.ContainsAny(o.Path, "?#") {
		return nil, fmt.Errorf("open sqlite store: path %q must not contain '?' or '#'", o.Path)
	}
	if err := os.MkdirAll(filepath.Dir(o.Path), 0o700); err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	hadLock := lockHeld(o.Path) // asked before lockFile rewrites it
	lock, err := lockFile(o.Path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", o.Path, err)
	}
	fail := func(err error) (*sqlstore.DB, error) {
		_ = lock.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", o.Path, err)
	}
	if err := checkHeader(o.Path); err != nil {
		return fail(err)
	}
	if err := errors.Join(checkReplaced(o.Path, hadLock), checkOnOpen(ctx, o.Path)); err != nil {
		return fail(err)
	}
	w, err := sql.Open("sqlite", o.Path+"?"+pragmas+"&_txlock=immediate")
	if err != nil {
		return fail(err)
	}
	w.SetMaxOpenConns(1)
	if err := sqlstore.Migrate(ctx, w, sqlstore.MigrateOptions{Tables: tables}); err != nil {
		_ = w.Close()
		if isNotADB(err) {
			err = fmt.Errorf("the file is not a readable SQLite database (%v); refusing to overwrite it: %w", err, store.ErrIncompatible)
		}
		return fail(err)
	}
	// Readers read pages with pread, not mmap: SQLite drops a reader's
	// mapping (and its page cache) at the first read after any commit, and
	// the munmap and page faults that follow cost more than the copies they
	// save whenever tasks are being written (run_task + check_task round
	// trip 4.4 → 3.9 ms).
	r, err := sql.Open("sqlite", o.Path+"?"+readerPragmas)
	if err != nil {
		_ = w.Close()
		return fail(err)
	}
	n := o.Readers
	if n <= 0 {
		n = 4
	}
	r.SetMaxOpenConns(n)
	// Poll counters are batched: in WAL mode every commit empties the page
	// cache of each reader connection, so a write per check_task poll made
	// every read a cold b-tree descent, and at 10^6 rows each poll dirtied
	// its own page. Batched, repeated polls of a task merge into one update
	// written off the request path. The process owns the file alone (lock
	// above), so the in-memory counts are the whole truth; a crash loses at
	// most BatchPolls worth of (cosmetic) poll counts, never a task.
	d := sqlstore.Dialect{Name: "sqlite", IsUniqueViolation: isUniqueViolation, AfterBulk: "PRAGMA wal_checkpoint(TRUNCATE)",
		BatchPolls: 5 * time.Second, Exclusive: true}
	return sqlstore.New(w, r, d, lock.Close), nil
}

// The connection settings of the writer and of the readers, which refuse
// to write. cache_size is per connection (16 MiB): the writer's working set.
const (
	pragmas = "_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)" +
		"&_pragma=cache_size(-16384)&_time_format=sqlite"
	readerPragmas = pragmas + "&_pragma=query_only(1)"
)

// OpenReader opens the existing store at path for reading only and without
// the process lock, so that another process (clawconnect status while serve
// runs) can read what the owner writes; WAL lets both work at once. Poll
// counts the owner has not flushed yet are not visible. It refuses a file
// that is missing, is not a SQLite database, or holds a schema other than
// this build's (store.ErrIncompatible).
func OpenReader(ctx context.Context, path string) (*sqlstore.DB, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open sqlite store for reading: path %q must not contain '?' or '#'", path)
	}
	fail := func(err error) (*sqlstore.DB, error) {
		return nil, fmt.Errorf("open sqlite store %s for reading: %w", path, err)
	}
	if _, err := os.Stat(path); err != nil {
		return fail(err)
	}
	if err := checkHeader(path); err != nil {
		return fail(err)
	}
	r, err := sql.Open("sqlite", path+"?"+readerPragmas)
	if err != nil {
		return fail(err)
	}
	r.SetMaxOpenConns(2)
	if err := sqlstore.CheckSchema(ctx, r); err != nil {
		_ = r.Close()
		return fail(err)
	}
	d := sqlstore.Dialect{Name: "sqlite", IsUniqueViolation: isUniqueViolation, ReadOnly: true}
	return sqlstore.New(r, r, d, nil), nil
}

func tables(ctx context.Context, tx *sql.Tx) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// checkHeader refuses an existing non-empty file that is not SQLite.
func checkHeader(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	hdr := make([]byte, 16)
	n, err := io.ReadFull(f, hdr)
	if n == 0 && (errors.Is(err, io.EOF) || err == nil) {
		return nil
	}
	if !bytes.Equal(hdr[:n], []byte("SQLite format 3\x00")[:n]) || n < 16 {
		return fmt.Errorf("the file exists but is not a SQLite database; refusing to overwrite it "+
			"(move it aside or choose another CLAWCONNECT_HOME): %w", store.ErrIncompatible)
	}
	return nil
}

func isNotADB(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_NOTADB || c == sqlite3.SQLITE_CORRUPT
	}
	return false
}

func isUniqueViolation(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE
	}
	return false
}

// lockFile takes an exclusive, non-blocking flock on path, writing our pid
// into it. The lock is released when the returned file is closed or the
// process dies.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		_ = f.Close()
		holder := strings.TrimSpace(string(b))
		if holder == "" {
			holder = "unknown"
		}
		return nil, fmt.Errorf("another clawconnect process (pid %s) owns this SQLite database; SQLite is "+
			"single-process — stop that process, or use PostgreSQL (CLAWCONNECT_DATABASE_URL) for several replicas: %w",
			holder, store.ErrLocked)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
