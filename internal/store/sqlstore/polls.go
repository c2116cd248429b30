package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
// Consistency: every read that reports a task's poll count holds gate for
// reading while it reads the row and adds the pending delta; a flush holds
// it for writing from its commit until the flushed deltas are removed, so
// no reader counts a delta twice or misses one.
type pollBatch struct {
	gate sync.RWMutex // readers: row read + delta add; writer: flush
	mu   sync.Mutex   // guards pending
	// pending holds deltas not yet committed.
	pending map[pollKey]pollDelta

	stop chan struct{}
	done chan struct{}
}

func newPollBatch() *pollBatch {
	return &pollBatch{pending: make(map[pollKey]pollDelta), stop: make(chan struct{}), done: make(chan struct{})}
}

// add records one poll and returns the task's delta after it.
func (p *pollBatch) add(k pollKey, at int64) pollDelta {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.pending[k]
	d.n++
	d.at = max(d.at, at)
	p.pending[k] = d
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

// runPollFlush flushes every interval until stop is closed.
func (db *DB) runPollFlush(interval time.Duration) {
	defer close(db.polls.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-db.polls.stop:
			return
		case <-tick.C:
			// A failed flush keeps its deltas for the next one; Close
			// reports the last failure.
			_ = db.FlushPolls(context.Background())
		}
	}
}

// FlushPolls writes the batched poll counters now (Close also does). It is
// a no-op when poll counters are written synchronously.
func (db *DB) FlushPolls(ctx context.Context) error {
	p := db.polls
	if p == nil {
		return nil
	}
	p.gate.Lock()
	defer p.gate.Unlock()
	p.mu.Lock()
	batch := make(map[pollKey]pollDelta, len(p.pending))
	for k, d := range p.pending {
		batch[k] = d
	}
	p.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := db.tx(ctx, func(tx *sql.Tx) error {
		for k, d := range batch {
			// A task swept meanwhile updates no row; its delta is dropped.
			if _, err := tx.ExecContext(ctx, db.Q(`UPDATE tasks SET poll_count = poll_count + ?,
				last_poll_at = CASE WHEN last_poll_at > ? THEN last_poll_at ELSE ? END
				WHERE id = ? AND agent = ?`), d.n, d.at, d.at, k.id, k.agent); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("flush poll counters: %w", err)
	}
	// Polls added during the commit could not start (gate), so pending
	// still equals batch.
	p.mu.Lock()
	for k := range batch {
		delete(p.pending, k)
	}
	p.mu.Unlock()
	return nil
}

// touchPollBatched is TouchPoll without a write: the row's count plus the
// pending delta.
func (db *DB) touchPollBatched(ctx context.Context, agent, id string, at int64) (int64, error) {
	unlock := db.polls.readLock()
	defer unlock()
	var n int64
	err := db.r.QueryRowContext(ctx, db.Q(`SELECT poll_count FROM tasks WHERE id = ? AND agent = ?`), id, agent).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("touch poll %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("touch poll %s: %w", id, err)
	}
	return n + db.polls.add(pollKey{agent, id}, at).n, nil
}
