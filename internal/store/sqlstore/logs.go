package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/clawconnect/clawconnect/internal/store"
)

// AppendLogs implements store.Store.
func (db *DB) AppendLogs(ctx context.Context, taskID string, fence int64, entries []store.LogEntry) error {
	if len(entries) == 0 {
		return nil
	}
	err := db.tx(ctx, func(tx *txn) error {
		// Log lines are progress, not outcome: a database crash may lose the
		// newest ones, never a task or its result.
		if db.d.RelaxedCommit != "" {
			if _, err := tx.ExecContext(ctx, db.d.RelaxedCommit); err != nil {
				return err
			}
		}
		if err := db.appendLogsTx(ctx, tx, taskID, fence, entries); err != nil {
			return err
		}
		db.announce(ctx, tx, taskID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("append logs %s: %w", taskID, db.classify(err))
	}
	return nil
}

// appendLogsTx is AppendLogs inside tx, without the announcement.
func (db *DB) appendLogsTx(ctx context.Context, tx *txn, taskID string, fence int64, entries []store.LogEntry) error {
	first := entries[0].Seq
	if err := checkSeqs(entries); err != nil {
		return err
	}
	// Claim the sequence numbers: the update (which also locks the row)
	// matches only while the task's count is the one the entries follow.
	res, err := tx.ExecContext(ctx, `UPDATE tasks SET log_count = ? WHERE id = ? AND log_count = ?`+FenceCond,
		first-1+int64(len(entries)), taskID, first-1, fence)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		var count, cur int64
		if err := tx.QueryRowContext(ctx, `SELECT log_count, fence FROM tasks WHERE id = ?`, taskID).Scan(&count, &cur); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return store.ErrNotFound
			}
			return err
		}
		if cur != fence {
			return fmt.Errorf("fencing token %d, the task's is %d: %w", fence, cur, store.ErrLeaseLost)
		}
		return fmt.Errorf("log seq %d does not follow %d: %w", first, count, store.ErrConflict)
	}
	return insertLogs(ctx, tx, taskID, entries)
}

// checkSeqs reports entries whose sequence numbers are not consecutive.
func checkSeqs(entries []store.LogEntry) error {
	first := entries[0].Seq
	for i, e := range entries {
		if e.Seq != first+int64(i) {
			return fmt.Errorf("log seq %d does not follow %d: %w", e.Seq, first+int64(i)-1, store.ErrConflict)
		}
	}
	return nil
}

// logRowsPerInsert bounds the rows of one log insert: a statement per
// count up to it is prepared and kept, and longer batches take several.
const logRowsPerInsert = 8

// insertLogQueries[n-1] inserts n log rows.
var insertLogQueries = func() (qs [logRowsPerInsert]string) {
	q := `INSERT INTO task_logs (task_id, seq, ts, type, text, is_error) VALUES (?, ?, ?, ?, ?, ?)`
	for i := range qs {
		qs[i] = q
		q += `, (?, ?, ?, ?, ?, ?)`
	}
	return qs
}()

// insertLogs writes entries in as few statements as the row bound allows:
// one for the few entries a run holds back for its outcome.
func insertLogs(ctx context.Context, tx *txn, taskID string, entries []store.LogEntry) error {
	for len(entries) > 0 {
		n := min(len(entries), logRowsPerInsert)
		args := make([]any, 0, 6*n)
		for _, e := range entries[:n] {
			isErr := 0
			if e.IsError {
				isErr = 1
			}
			args = append(args, taskID, e.Seq, e.TS, e.Type, e.Text, isErr)
		}
		if _, err := tx.ExecContext(ctx, insertLogQueries[n-1], args...); err != nil {
			return err
		}
		entries = entries[n:]
	}
	return nil
}

// UpdateTaskWithLogs implements store.LogUpdater: AppendLogs and then
// UpdateTask in one transaction (committed durably: it carries an
// outcome), one announcement; neither lands unless both do. One update
// both claims the entries' sequence numbers and writes the task.
func (db *DB) UpdateTaskWithLogs(ctx context.Context, t *store.Task, entries []store.LogEntry) error {
	if len(entries) == 0 {
		return db.UpdateTask(ctx, t)
	}
	if !t.Status.Valid() {
		return fmt.Errorf("update task %s: invalid status %q", t.ID, t.Status)
	}
	if err := checkSeqs(entries); err != nil {
		return fmt.Errorf("update task %s: %w", t.ID, err)
	}
	data, err := encodeTask(t)
	if err != nil {
		return fmt.Errorf("update task: %w", err)
	}
	first := entries[0].Seq
	err = db.tx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, updateTaskWithLogsQ, string(t.Status), t.EndedAt, data, first-1+int64(len(entries)),
			t.ID, t.Agent, t.Version, first-1, t.Fence)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = errNoRow
			}
			return err
		}
		if err := insertLogs(ctx, tx, t.ID, entries); err != nil {
			return err
		}
		db.announce(ctx, tx, t.ID)
		return nil
	})
	if errors.Is(err, errNoRow) {
		return fmt.Errorf("update task %s: %w", t.ID, db.missedWithLogs(ctx, t, first))
	}
	if err != nil {
		return fmt.Errorf("update task %s: %w", t.ID, db.classify(err))
	}
	t.Version++
	return nil
}

// updateTaskWithLogsQ is UpdateTaskQ that also claims the sequence numbers
// of the entries written with it: it matches only while the task's log
// count is the one the entries follow.
const updateTaskWithLogsQ = `UPDATE tasks SET status = ?, ended_at = ?, data = ?, version = version + 1, log_count = ?
		WHERE id = ? AND agent = ? AND version = ? AND log_count = ?` + FenceCond

// missedWithLogs explains an UpdateTaskWithLogs that matched no row: as
// missed, and a log count the entries do not follow is a conflict of its
// own.
func (db *DB) missedWithLogs(ctx context.Context, t *store.Task, first int64) error {
	var count, fence int64
	err := db.w.QueryRowContext(ctx, `SELECT log_count, fence FROM tasks WHERE id = ?`, t.ID).Scan(&count, &fence)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.ErrNotFound
	case err != nil:
		return db.classify(err)
	case fence != t.Fence:
		return fmt.Errorf("fencing token %d, the task's is %d: %w", t.Fence, fence, store.ErrLeaseLost)
	case count != first-1:
		return fmt.Errorf("log seq %d does not follow %d: %w", first, count, store.ErrConflict)
	}
	return store.ErrConflict
}

func (db *DB) queryLogs(ctx context.Context, q string, args ...any) ([]store.LogEntry, error) {
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.LogEntry
	for rows.Next() {
		var e store.LogEntry
		var isErr int
		if err := rows.Scan(&e.Seq, &e.TS, &e.Type, &e.Text, &isErr); err != nil {
			return nil, err
		}
		e.IsError = isErr != 0
		out = append(out, e)
	}
	return out, rows.Err()
}

// Logs implements store.Store.
func (db *DB) Logs(ctx context.Context, taskID string, after int64, limit int) ([]store.LogEntry, error) {
	limit = store.ClampPage(limit, store.MaxPage)
	out, err := db.queryLogs(ctx, `SELECT seq, ts, type, text, is_error FROM task_logs WHERE task_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
		taskID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("logs %s: %w", taskID, err)
	}
	return out, nil
}

// TailLogs implements store.Store.
func (db *DB) TailLogs(ctx context.Context, taskID string, n int) ([]store.LogEntry, error) {
	n = store.ClampPage(n, 8)
	out, err := db.queryLogs(ctx, `SELECT seq, ts, type, text, is_error FROM task_logs WHERE task_id = ? ORDER BY seq DESC LIMIT ?`, taskID, n)
	if err != nil {
		return nil, fmt.Errorf("tail logs %s: %w", taskID, err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}
