// Package sqlstore implements store.Store over database/sql for both
// backends (SQLite and PostgreSQL). The backends differ only in their
// Dialect: placeholder style, row locking, and how a database is opened and
// migrated (their own packages).
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
)

// Dialect is what differs between the SQL backends.
type Dialect struct {
	// Name is "sqlite" or "postgres" (for messages).
	Name string
	// Dollar selects $1-style placeholders instead of ?.
	Dollar bool
	// ForUpdate is appended to row-locking selects ("" where the whole
	// transaction already holds the write lock).
	ForUpdate string
	// SkipLocked is appended to the lease-claim subquery.
	SkipLocked string
	// IsUniqueViolation reports a primary-key/unique violation.
	IsUniqueViolation func(error) bool
	// AfterBulk runs after a bulk load (SeedTasks): a WAL checkpoint on
	// SQLite, ANALYZE on Postgres.
	AfterBulk string
	// RelaxedCommit, if set, runs first in the transaction of a write whose
	// loss in a crash is harmless (poll counters), e.g. Postgres's
	// "SET LOCAL synchronous_commit = off".
	RelaxedCommit string
	// BatchPolls, if positive, keeps poll counters (TouchPoll) in memory
	// and writes them once per BatchPolls instead of on every poll. Only
	// for a database this process owns alone (a crash may lose the newest
	// poll counts, which are cosmetic; never a task or an outcome).
	BatchPolls time.Duration
	// Notify, if set, announces a change of the task whose id is its one
	// argument to the other processes sharing the database (Listen).
	Notify string
	// ChangeTable marks a Notify that writes a row (SQLite's change log),
	// which must commit in the same transaction as the change it announces.
	ChangeTable bool
	// TrimChanges, if set, deletes old change rows; it runs with every
	// 1024th announcement.
	TrimChanges string
	// Committed, if set, runs after each commit that wrote a change row:
	// it signals the other processes' listeners, which read the rows only
	// once the commit is visible.
	Committed func()
	// Heard, if set, reports whether any process sharing the database
	// (this one included) has a reader waiting for announcements now; a
	// ChangeTable announcement is written only while it does. A
	// transaction that skipped its change rows asks again once committed
	// and writes them then if a listener came meanwhile (afterCommit): a
	// reader that began to listen before that second question is woken,
	// and one that began after it reads the committed change itself.
	Heard func() bool
	// Hear, if set, is told, before the watch that causes it returns,
	// that this process now has readers waiting for announcements (true)
	// or has none left (false), so that Heard in every process answers
	// accordingly before such a reader re-reads the store.
	Hear func(listening bool)
	// IsBusy, if set, recognizes a write that gave up waiting for the
	// database's write lock (reported as store.ErrBusy).
	IsBusy func(error) bool
	// Listen, if set, delivers the ids that other processes announce to
	// changed until ctx ends or the connection fails; it is restarted
	// after a failure. It makes the store a store.ChangeFeed. watching
	// reports whether a reader of this process waits for an announcement
	// now; a listener whose reads cost something may skip them while it
	// is false (a reader that starts watching re-reads the store itself),
	// and may stop hearing announcements at all until began receives: it
	// does whenever the count of watching readers rises from zero.
	Listen func(ctx context.Context, changed func(id string), watching func() bool, began <-chan struct{}) error
}

// DB is a store.Store over a writer pool and a reader pool (they may be the
// same *sql.DB).
type DB struct {
	w, r    *pool
	d       Dialect
	onClose func() error

	closeOnce sync.Once
	closeErr  error
	polls     *pollBatch

	watch        taskWatch
	stopListener func() // nil without Dialect.Listen
	announced    atomic.Int64
}

var _ store.Store = (*DB)(nil)

// New returns a store over writer and reader; onClose (may be nil) runs after
// both pools are closed.
// With d.BatchPolls set it starts the poll-counter flusher, which Close
// stops after a last flush; with d.Listen, the change listener, which Close
// stops first.
func New(writer, reader *sql.DB, d Dialect, onClose func() error) *DB {
	w := newPool(writer, d.Dollar)
	r := w
	if reader != writer {
		r = newPool(reader, d.Dollar)
	}
	db := &DB{w: w, r: r, d: d, onClose: onClose}
	db.watch.hear = d.Hear
	if d.Listen != nil {
		db.watch.began = make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(context.Background())
		started, done := make(chan struct{}), make(chan struct{})
		go db.runListener(ctx, started, done)
		db.stopListener = func() { cancel(); <-done }
		// Announcements made once New has returned are heard (unless the
		// listener could not start; then waiters re-read on a timer).
		select {
		case <-started:
		case <-time.After(10 * time.Second):
		}
	}
	if d.BatchPolls > 0 {
		db.polls = newPollBatch()
		go db.runPollFlush(d.BatchPolls)
	}
	return db
}

// Writer returns the writer pool (for benchmark seeding and tests).
func (db *DB) Writer() *sql.DB { return db.w.db }

// Close closes both pools; it is idempotent.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		if db.stopListener != nil {
			db.stopListener()
		}
		var err error
		if db.polls != nil {
			close(db.polls.stop)
			<-db.polls.done
			err = db.FlushPolls(context.Background())
		}
		db.w.close()
		err = errors.Join(err, db.w.db.Close())
		if db.r != db.w {
			db.r.close()
			err = errors.Join(err, db.r.db.Close())
		}
		if db.onClose != nil {
			err = errors.Join(err, db.onClose())
		}
		db.closeErr = err
	})
	return db.closeErr
}

type scanner interface{ Scan(dest ...any) error }

func (db *DB) tx(ctx context.Context, fn func(*txn) error) error {
	tx, err := db.w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	t := newTxn(tx, db.w)
	defer t.ended(ctx)
	if err := fn(t); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	db.afterCommit(ctx, t)
	return nil
}

// classify maps a driver error the dialect recognizes (a lock wait that ran
// out) to its store sentinel; others pass unchanged.
func (db *DB) classify(err error) error {
	if db.d.IsBusy != nil && db.d.IsBusy(err) {
		return fmt.Errorf("%w: another process held the database's write lock for longer than the busy timeout; nothing was written, retry (%v)", store.ErrBusy, err)
	}
	return err
}

// errNoRow is a compare-and-set update that matched no row, rolled back.
var errNoRow = errors.New("no row matched")

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}
