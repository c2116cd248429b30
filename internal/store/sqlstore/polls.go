package sqlstore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
)

// pollKey names one task's pending poll counter.
type pollKey struct{ agent, id string }

// pollDelta is what has not been written yet: polls since the last flush and
// the newest poll time.
type pollDelta struct {
	n  int64
	at int64
}

// pollBatch keeps poll counters in memory and writes them in one
// transaction per interval, so a check_task poll is a read, not a commit.
// (On SQLite in WAL mode every commit makes each reader connection drop its
// whole page cache, which turned every poll into cold b-tree descents.)
//
// Consistency: every read through the reader pool that reports a task's
// poll count holds gate for reading while it reads the row and adds the
// pending delta; a flush holds it for writing from its commit until the
// flushed deltas are subtracted, so no reader counts a delta twice or misses
// one. A flush holds the single writer connection while it waits for gate,
// so a read through the writer (ClaimTasks) holds flushMu instead.
type pollBatch struct {
	gate    sync.RWMutex // readers: row read + delta add; writer: a flush's commit
	flushMu sync.Mutex   // one flush at a time
	mu      sync.Mutex   // guards pending
	// pending holds deltas not yet committed.
	pending map[pollKey]pollDelta

	kick chan struct{} // early flush: many tasks pending
	stop chan struct{}
	done chan struct{}
}

const (
	// pollFlushAt pending tasks trigger a flush before the interval.
	pollFlushAt = 4096
	// pollFlushChunk tasks are written per transaction, so a flush holds
	// the single writer connection only briefly at a time.
	pollFlushChunk = 256
)

func newPollBatch() *pollBatch {
	return &pollBatch{pending: make(map[pollKey]pollDelta), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
}

// add records one poll and returns the task's delta after it.
func (p *pollBatch) add(k pollKey, at int64) pollDelta {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.pending[k]
	d.n++
	d.at = max(d.at, at)
	p.pending[k] = d
	if len(p.pending) >= pollFlushAt {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	return d
}

// apply adds t's pending delta to t (the caller holds gate for reading).
func (p *pollBatch) apply(t *store.Task) {
	if p == nil || t == nil {
		return
	}
	p.mu.Lock()
	d, ok := p.pending[pollKey{t.Agent, t.ID}]
	p.mu.Unlock()
	if ok {
		t.PollCount += d.n
		t.LastPollAt = max(t.LastPollAt, d.at)
	}
}

// readLock takes gate for reading; it is a no-op without batching.
func (p *pollBatch) readLock() func() {
	if p == nil {
		return func() {}
	}
	p.gate.RLock()
	return p.gate.RUnlock
}

// flushLock holds off flushes; it is a no-op without batching. A caller
// that holds it may use the writer; one that holds gate must not.
func (p *pollBatch) flushLock() func() {
	if p == nil {
		return func() {}
	}
	p.flushMu.Lock()
	return p.flushMu.Unlock
}

// runPollFlush flushes every interval, or sooner when pollFlushAt tasks
// have pending counts, until stop is closed.
func (db *DB) runPollFlush(interval time.Duration) {
	defer close(db.polls.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-db.polls.stop:
			return
		case <-tick.C:
		case <-db.polls.kick:
		}
		// A failed flush keeps its deltas for the next one; Close reports
		// the last failure.
		_ = db.FlushPolls(context.Background())
	}
}

// FlushPolls writes the batched poll counters now (Close also does), in
// transactions of pollFlushChunk tasks. Reads go on while the updates run;
// they wait only for each commit. It is a no-op when poll counters are
// written synchronously.
func (db *DB) FlushPolls(ctx context.Context) error {
	p := db.polls
	if p == nil {
		return nil
	}
	p.flushMu.Lock()
	defer p.flushMu.Unlock()
	p.mu.Lock()
	batch := make([]pollEntry, 0, len(p.pending))
	for k, d := range p.pending {
		batch = append(batch, pollEntry{k, d})
	}
	p.mu.Unlock()
	// In key order, successive updates descend through the same pages.
	slices.SortFunc(batch, func(a, b pollEntry) int {
		return cmp.Or(strings.Compare(a.k.id, b.k.id), strings.Compare(a.k.agent, b.k.agent))
	})
	for len(batch) > 0 {
		n := min(len(batch), pollFlushChunk)
		if err := db.flushChunk(ctx, batch[:n]); err != nil {
			return fmt.Errorf("flush poll counters: %w", err)
		}
		batch = batch[n:]
	}
	return nil
}

// pollEntry is one task's delta taken for a flush.
type pollEntry struct {
	k pollKey
	d pollDelta
}

// flushChunk writes chunk in one transaction. The commit and the removal of
// the written deltas happen under gate, so a reader sees either the old row
// plus the whole delta or the new row plus what was added since.
func (db *DB) flushChunk(ctx context.Context, chunk []pollEntry) error {
	p := db.polls
	tx, err := db.w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	t := newTxn(tx, db.w)
	defer t.ended(ctx)
	upd, err := t.stmt(ctx, `UPDATE tasks SET poll_count = poll_count + ?,
		last_poll_at = CASE WHEN last_poll_at > ? THEN last_poll_at ELSE ? END
		WHERE id = ? AND agent = ?`)
	if err != nil {
		_ = tx.Rollback()
		return err
	}
	for _, e := range chunk {
		// A task swept meanwhile updates no row; its delta is dropped.
		if _, err := upd.ExecContext(ctx, e.d.n, e.d.at, e.d.at, e.k.id, e.k.agent); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	p.gate.Lock()
	defer p.gate.Unlock()
	if err := tx.Commit(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range chunk {
		cur := p.pending[e.k]
		cur.n -= e.d.n
		if cur.n <= 0 {
			delete(p.pending, e.k)
			continue
		}
		p.pending[e.k] = cur // polls that arrived during the flush
	}
	return nil
}

// touchPollBatched is TouchPoll without a write: the row's count plus this
// process's pending delta.
func (db *DB) touchPollBatched(ctx context.Context, agent, id string, at int64) (int64, error) {
	unlock := db.polls.readLock()
	defer unlock()
	var n int64
	err := db.r.QueryRowContext(ctx, `SELECT poll_count FROM tasks WHERE id = ? AND agent = ?`, id, agent).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("touch poll %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("touch poll %s: %w", id, err)
	}
	return n + db.polls.add(pollKey{agent, id}, at).n, nil
}
