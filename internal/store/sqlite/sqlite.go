// Package sqlite is the embedded store that every clawconnect process on a
// machine shares: one SQLite file (default CLAWCONNECT_HOME/clawconnect.db)
// in WAL mode, opened read-write by each process with one writer connection
// and a small read-only pool. Writers of different processes take the
// file's write lock in turn (BEGIN IMMEDIATE, waiting at most BusyTimeout);
// running tasks are owned through leases in the file, as on PostgreSQL; and
// a process waiting on a task another process follows is woken by the
// change log (see listener).
package sqlite

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	// WriterCacheKiB and ReaderCacheKiB are SQLite's page cache per
	// connection (one writer, Readers readers), filled as pages are read
	// and kept while no other process commits; 0 means
	// DefaultWriterCacheKiB and DefaultReaderCacheKiB.
	WriterCacheKiB, ReaderCacheKiB int
	// BusyTimeout bounds how long a write waits for the write lock another
	// process holds before it fails with store.ErrBusy, writing nothing;
	// 0 means DefaultBusyTimeout.
	BusyTimeout time.Duration
}

// The default page caches: what an mcp process needs. In WAL mode a
// connection drops its whole cache at its first read after another
// connection's commit, so while tasks are being written a reader's cache
// only ever holds the pages of the reads since the last commit; the
// writer's holds the b-tree pages every write descends through. A
// process serving a dashboard (serve) asks for more.
const (
	DefaultWriterCacheKiB = 4096
	DefaultReaderCacheKiB = 1024
)

// DefaultBusyTimeout is the default Options.BusyTimeout.
const DefaultBusyTimeout = 5 * time.Second

// Open opens (creating and migrating if needed) the database at o.Path,
// beside any other process that has it open. It refuses a file that is not
// a SQLite database, a database holding foreign tables, or one a newer
// build wrote (store.ErrIncompatible), and a file that fails its integrity
// check or an empty one that replaced a store in use (ErrCorrupt, see
// integrity.go).
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
	fail := func(err error) (*sqlstore.DB, error) {
		return nil, fmt.Errorf("open sqlite store %s: %w", o.Path, err)
	}
	if err := checkHeader(o.Path); err != nil {
		return fail(err)
	}
	if err := errors.Join(checkReplaced(o.Path), checkOnOpen(ctx, o.Path)); err != nil {
		return fail(err)
	}
	// The store holds prompts and replies: only its user may read it, even
	// in a directory others can enter. SQLite gives its -wal and -shm files
	// the database file's mode.
	f, err := os.OpenFile(o.Path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fail(err)
	}
	_ = f.Close()
	// Every write transaction begins IMMEDIATE (lockedConn.BeginTx): it
	// takes the file's write lock first (waiting at most BusyTimeout for
	// another process), since a deferred one that reads then writes fails
	// at once when another process wrote meanwhile.
	busy := o.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	// The writer takes the lock file beside the database before each
	// write (see LockSuffix), so writers of other processes wait for its
	// release rather than for a sleep.
	probe, err := sql.Open("sqlite", "")
	if err != nil {
		return fail(err)
	}
	drv := probe.Driver()
	_ = probe.Close()
	lock := openWriteLock(o.Path, busy)
	w := sql.OpenDB(&lockedConnector{drv: drv, dsn: o.Path + "?" + busyPragma(busy) + connPragmas(cmp.Or(o.WriterCacheKiB, DefaultWriterCacheKiB)), lock: lock})
	w.SetMaxOpenConns(1)
	// Concurrent first opens serialize on the migration's IMMEDIATE
	// transaction; the later ones find the schema current.
	if err := sqlstore.Migrate(ctx, w, sqlstore.MigrateOptions{Tables: tables}); err != nil {
		_ = w.Close()
		_ = lock.close()
		if isNotADB(err) {
			err = fmt.Errorf("the file is not a readable SQLite database (%v); refusing to overwrite it: %w", err, store.ErrIncompatible)
		} else if isBusy(err) {
			err = fmt.Errorf("another clawconnect process held the database's write lock for over %v while this one started; retry: %w", busy, store.ErrBusy)
		}
		return fail(err)
	}
	// Readers read pages with pread, not mmap: SQLite drops a reader's
	// mapping (and its page cache) at the first read after any commit, and
	// the munmap and page faults that follow cost more than the copies they
	// save whenever tasks are being written (run_task + check_task round
	// trip 4.4 → 3.9 ms).
	r, err := sql.Open("sqlite", o.Path+"?"+busyPragma(busy)+connPragmas(cmp.Or(o.ReaderCacheKiB, DefaultReaderCacheKiB))+"&_pragma=query_only(1)")
	if err != nil {
		_ = w.Close()
		_ = lock.close()
		return fail(err)
	}
	n := o.Readers
	if n <= 0 {
		n = 4
	}
	r.SetMaxOpenConns(n)
	// Every reader stays open (database/sql keeps two idle by default): a
	// burst of reads (a host's followers at a re-check) would otherwise
	// close the others, and each reopened connection compiles again every
	// statement the pool had prepared on it.
	r.SetMaxIdleConns(n)
	// Poll counters are batched: in WAL mode every commit empties the page
	// cache of each reader connection, so a write per check_task poll made
	// every read a cold b-tree descent, and at 10^6 rows each poll dirtied
	// its own page. Batched, repeated polls of a task merge into one update
	// written off the request path, as an increment, so the batches of
	// several processes add up. A process sees the polls other processes
	// have not flushed yet only after their next flush (at most BatchPolls);
	// a crash loses at most BatchPolls worth of (cosmetic) poll counts,
	// never a task.
	d := sqlstore.Dialect{Name: "sqlite", IsUniqueViolation: isUniqueViolation, IsBusy: isBusy,
		AfterBulk: "PRAGMA wal_checkpoint(TRUNCATE)", BatchPolls: 5 * time.Second,
		Notify: `INSERT INTO task_changes (task_id) VALUES (?)`, ChangeTable: true,
		TrimChanges: `DELETE FROM task_changes WHERE seq < (SELECT MAX(seq) FROM task_changes) - ` + strconv.Itoa(keepChanges),
		Listen:      listener(o.Path, busy)}
	var closeSignal, closeHearing func() error
	d.Committed, closeSignal = signal(o.Path)
	d.Heard, d.Hear, closeHearing = hearing(o.Path)
	return sqlstore.New(w, r, d, func() error { return errors.Join(closeSignal(), closeHearing(), lock.close()) }), nil
}

// connPragmas are the connection settings, with a page cache of cacheKiB
// (readers add query_only, so they refuse to write). Each connection
// string starts with busyPragma, so that even switching to WAL waits for a
// process that holds the lock.
func connPragmas(cacheKiB int) string {
	return "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-" + strconv.Itoa(cacheKiB) + ")&_time_format=sqlite"
}

// busyPragma sets SQLite's busy_timeout to d.
func busyPragma(d time.Duration) string {
	return "_pragma=busy_timeout(" + strconv.FormatInt(max(d.Milliseconds(), 1), 10) + ")"
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

func isBusy(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code() & 0xff
		return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
	}
	return false
}
