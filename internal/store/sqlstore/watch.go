package sqlstore

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
)

// taskWatch fans the change announcements of other processes out to the
// readers watching each task (store.ChangeFeed).
type taskWatch struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
	n    atomic.Int64 // watchers registered
	// began receives (capacity 1) whenever n rises from zero, so a
	// listener that stopped hearing announcements while nobody watched
	// starts again.
	began chan struct{}
	// hear is Dialect.Hear, called under mu as n leaves and reaches zero.
	hear func(listening bool)
}

// watching reports whether any reader watches a task or the new ones.
func (w *taskWatch) watching() bool { return w.n.Load() > 0 }

func (w *taskWatch) watch(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.subs == nil {
		w.subs = make(map[string]map[chan struct{}]struct{})
	}
	set := w.subs[id]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		w.subs[id] = set
	}
	set[ch] = struct{}{}
	if w.n.Add(1) == 1 {
		if w.hear != nil {
			w.hear(true)
		}
		if w.began != nil {
			select {
			case w.began <- struct{}{}:
			default: // a start is already pending
			}
		}
	}
	var once sync.Once
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		once.Do(func() {
			if w.n.Add(-1) == 0 && w.hear != nil {
				w.hear(false)
			}
		})
		delete(set, ch)
		if len(w.subs[id]) == 0 {
			delete(w.subs, id)
		}
	}
}

// changed wakes the watchers of task id, or of every task when id is "".
func (w *taskWatch) changed(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wake := func(set map[chan struct{}]struct{}) {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default: // a change is already pending
			}
		}
	}
	if id != "" {
		wake(w.subs[id])
		return
	}
	for _, set := range w.subs {
		wake(set)
	}
}

// createdKey is what CreateTask announces in place of a task id: the
// watchers of new tasks subscribe under it. No task id is made of these
// characters (ids are UUIDs or prefixed names without '+').
const createdKey = "+created"

// WatchNewTasks implements store.NewTaskFeed. Without a listening dialect
// it returns a nil channel.
func (db *DB) WatchNewTasks() (<-chan struct{}, func()) {
	if db.d.Listen == nil {
		return nil, func() {}
	}
	return db.watch.watch(createdKey)
}

var _ store.TerminalWorkFeed = (*DB)(nil)

// terminalWorkKey is what AnnounceTerminalWork announces in place of a
// task id; like createdKey, no task or Turn id is made of it.
const terminalWorkKey = "+terminal"

// AnnounceTerminalWork implements store.TerminalWorkFeed: the change row
// (or notification) goes out at once, outside any transaction, and the
// watchers in this process are woken too.
func (db *DB) AnnounceTerminalWork(ctx context.Context) {
	if db.announce(ctx, db.w, terminalWorkKey) {
		db.committed()
	}
	db.watch.changed(terminalWorkKey)
}

// WatchTerminalWork implements store.TerminalWorkFeed. Without a listening
// dialect it returns a nil channel.
func (db *DB) WatchTerminalWork() (<-chan struct{}, func()) {
	if db.d.Listen == nil {
		return nil, func() {}
	}
	return db.watch.watch(terminalWorkKey)
}

// WatchTask implements store.ChangeFeed. Without a listening dialect it
// returns a nil channel.
func (db *DB) WatchTask(id string) (<-chan struct{}, func()) {
	if db.d.Listen == nil {
		return nil, func() {}
	}
	return db.watch.watch(id)
}

// runListener keeps the dialect's listener running until ctx ends,
// reconnecting after a pause when it fails; every (re)start wakes all
// watchers, since changes may have been missed meanwhile. started is closed
// once the first attempt is listening or has failed.
func (db *DB) runListener(ctx context.Context, started, done chan<- struct{}) {
	defer close(done)
	var once sync.Once
	changed := func(id string) {
		db.watch.changed(id)
		if id == "" {
			once.Do(func() { close(started) })
		}
	}
	for {
		_ = db.d.Listen(ctx, changed, db.watch.watching, db.watch.began) // meanwhile waiters fall back to re-reading
		changed("")
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// announce tells other processes that task id changed; inside a
// transaction (r is a *txn) the announcement goes out at commit. A lost one
// only delays a waiter to its next re-read. A change row nobody would read
// (Dialect.Heard) is not written: announce reports whether it was, and a
// transaction keeps the id for afterCommit. Outside a transaction the
// change it announces has already committed, so asking Heard now is
// asking after the commit.
func (db *DB) announce(ctx context.Context, r execer, id string) bool {
	if db.d.Notify == "" {
		return false
	}
	t, inTx := r.(*txn)
	if db.d.ChangeTable && db.d.Heard != nil && !db.d.Heard() {
		if inTx {
			t.unheard = append(t.unheard, id)
		}
		return false
	}
	_, _ = r.ExecContext(ctx, db.d.Notify, id)
	if inTx {
		t.announced = true
	}
	if db.d.TrimChanges != "" && db.announced.Add(1)%1024 == 0 {
		_, _ = r.ExecContext(ctx, db.d.TrimChanges)
	}
	return true
}

// afterCommit runs once t has committed: the post-commit signal of the
// change rows it wrote, or, when it skipped them because nobody listened
// and a listener has come since, their late announcement. The question
// after the commit closes the gap between the one inside the transaction
// and the commit: a reader re-reads the store once Hear has told every
// process that it listens, so it either made this Heard true or reads the
// change itself.
func (db *DB) afterCommit(ctx context.Context, t *txn) {
	if !t.announced && (len(t.unheard) == 0 || !db.d.Heard()) {
		return
	}
	for _, id := range t.unheard {
		_, _ = db.w.ExecContext(ctx, db.d.Notify, id)
	}
	db.committed()
}

// committed runs the dialect's post-commit signal of a change row.
func (db *DB) committed() {
	if db.d.ChangeTable && db.d.Committed != nil {
		db.d.Committed()
	}
}
