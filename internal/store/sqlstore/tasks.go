package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
)

// taskData is the JSON column of a task: every field that is never a key.
type taskData struct {
	Prompt           taskapi.Prompt     `json:"prompt"`
	Message          string             `json:"message,omitempty"`
	LastEventAt      int64              `json:"lastEventAt"`
	Summary          string             `json:"summary,omitempty"`
	Error            string             `json:"error,omitempty"`
	ErrorInfo        *taskapi.ErrorInfo `json:"errorInfo,omitempty"`
	TerminalReason   string             `json:"terminalReason,omitempty"`
	ResultSource     string             `json:"resultSource,omitempty"`
	Provisional      bool               `json:"provisional,omitempty"`
	OutcomeVersion   int64              `json:"outcomeVersion,omitempty"`
	ParentRunID      string             `json:"parentRunId,omitempty"`
	LastSeenSequence int64              `json:"lastSeenSequence,omitempty"`
	PayloadPath      string             `json:"payloadPath,omitempty"`
	Upstream         string             `json:"upstream,omitempty"`
	Transcript       string             `json:"transcript,omitempty"`
	Cancellation     string             `json:"cancellation,omitempty"`
	NewThread        bool               `json:"newThread,omitempty"`
	Artifacts        taskapi.Artifacts  `json:"artifacts"`
	Recovery         *taskapi.Recovery  `json:"recovery,omitempty"`
	Liveness         *taskapi.Liveness  `json:"liveness,omitempty"`
	Principal        string             `json:"principal,omitempty"`
}

func encodeTask(t *store.Task) (string, error) {
	b, err := json.Marshal(taskData{
		Prompt: t.Prompt, Message: t.Message, LastEventAt: t.LastEventAt, Summary: t.Summary,
		Error: t.Error, ErrorInfo: t.ErrorInfo, TerminalReason: t.TerminalReason,
		ResultSource: t.ResultSource, Provisional: t.Provisional, OutcomeVersion: t.OutcomeVersion,
		ParentRunID: t.ParentRunID, LastSeenSequence: t.LastSeenSequence, PayloadPath: t.PayloadPath,
		Upstream: t.Upstream, Transcript: t.Transcript, Cancellation: t.Cancellation,
		NewThread: t.NewThread, Artifacts: t.Artifacts, Recovery: t.Recovery, Liveness: t.Liveness,
		Principal: t.Principal,
	})
	if err != nil {
		return "", fmt.Errorf("encode task %s: %w", t.ID, err)
	}
	return string(b), nil
}

// taskCols is the column list every task read selects, in scanTask order.
const taskCols = "id, agent, session_key, status, started_at, ended_at, owner, lease_until, fence, version, log_count, poll_count, last_poll_at, data"

func scanTask(s scanner) (*store.Task, error) {
	var t store.Task
	var status, data string
	if err := s.Scan(&t.ID, &t.Agent, &t.SessionKey, &status, &t.StartedAt, &t.EndedAt, &t.Owner,
		&t.LeaseUntil, &t.Fence, &t.Version, &t.LogCount, &t.PollCount, &t.LastPollAt, &data); err != nil {
		return nil, err
	}
	t.Status = store.Status(status)
	if !t.Status.Valid() {
		return nil, fmt.Errorf("task %s has unknown status %q: %w", t.ID, status, store.ErrIncompatible)
	}
	var d taskData
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		return nil, fmt.Errorf("task %s has an unreadable data column: %v: %w", t.ID, err, store.ErrIncompatible)
	}
	t.Prompt, t.Message, t.LastEventAt, t.Summary = d.Prompt, d.Message, d.LastEventAt, d.Summary
	t.Error, t.ErrorInfo, t.TerminalReason, t.ResultSource = d.Error, d.ErrorInfo, d.TerminalReason, d.ResultSource
	t.Provisional, t.OutcomeVersion, t.ParentRunID = d.Provisional, d.OutcomeVersion, d.ParentRunID
	t.LastSeenSequence, t.PayloadPath, t.Upstream = d.LastSeenSequence, d.PayloadPath, d.Upstream
	t.Transcript, t.Cancellation, t.NewThread = d.Transcript, d.Cancellation, d.NewThread
	t.Artifacts, t.Recovery, t.Liveness = d.Artifacts, d.Recovery, d.Liveness
	t.Principal = d.Principal
	return &t, nil
}

// CreateTask implements store.Store.
func (db *DB) CreateTask(ctx context.Context, t *store.Task) error {
	if t.ID == "" || t.Agent == "" || t.SessionKey == "" {
		return fmt.Errorf("create task: id, agent and session key are required")
	}
	if t.Status != store.StatusRunning {
		return fmt.Errorf("create task %s: a new task must be running, not %q", t.ID, t.Status)
	}
	data, err := encodeTask(t)
	if err != nil {
		return fmt.Errorf("create task: %w", err)
	}
	err = db.tx(ctx, func(tx *txn) error {
		if err := db.claimSession(ctx, tx, t); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO tasks (`+taskCols+`) VALUES (?, ?, ?, ?, ?, 0, ?, ?, 1, 1, 0, 0, 0, ?)`,
			t.ID, t.Agent, t.SessionKey, string(t.Status), t.StartedAt, t.Owner, t.LeaseUntil, data); err != nil {
			if db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
				return fmt.Errorf("task %s: %w", t.ID, store.ErrExists)
			}
			return err
		}
		// Lists of tasks in every process learn of the new one
		// (store.NewTaskFeed); the announcement commits with the task.
		db.announce(ctx, tx, createdKey)
		return nil
	})
	if err != nil {
		return fmt.Errorf("create task: %w", err)
	}
	t.Version, t.Fence, t.LogCount, t.PollCount, t.LastPollAt, t.EndedAt = 1, 1, 0, 0, 0, 0
	return nil
}

// claimSession makes t the last task of its session inside tx, or fails
// with a *store.SessionBusyError while the session's last task runs. The
// session row is the lock that serializes submits on one session: read
// with the dialect's row lock (PostgreSQL), or under the transaction's
// write lock (SQLite). A new session's row is inserted with t as its last
// task, so a submit writes one session statement, not an insert and then
// an update.
func (db *DB) claimSession(ctx context.Context, tx *txn, t *store.Task) error {
	for {
		var last, status string
		err := tx.QueryRowContext(ctx, `SELECT last_job_id, COALESCE((SELECT status FROM tasks WHERE id = sessions.last_job_id), '')
			FROM sessions WHERE agent = ? AND session_key = ?`+db.d.ForUpdate, t.Agent, t.SessionKey).Scan(&last, &status)
		if err == nil {
			if last != "" && status == string(store.StatusRunning) {
				return &store.SessionBusyError{JobID: last}
			}
			_, err = tx.ExecContext(ctx, `UPDATE sessions SET last_job_id = ?, updated_at = ? WHERE agent = ? AND session_key = ?`,
				t.ID, t.StartedAt, t.Agent, t.SessionKey)
			return err
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO sessions (agent, session_key, last_job_id, created_at, updated_at, principal)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (agent, session_key) DO NOTHING`,
			t.Agent, t.SessionKey, t.ID, t.StartedAt, t.StartedAt, t.Principal)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		// Another transaction created the session since the read
		// (PostgreSQL; SQLite's write lock rules that out): read it again,
		// locked, now that it exists.
	}
}

// GetTask implements store.Store.
func (db *DB) GetTask(ctx context.Context, agent, id string) (*store.Task, error) {
	unlock := db.polls.readLock()
	defer unlock()
	t, err := scanTask(db.r.QueryRowContext(ctx, `SELECT `+taskCols+` FROM tasks WHERE id = ? AND agent = ?`, id, agent))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get task %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get task %s: %w", id, err)
	}
	db.polls.apply(t)
	return t, nil
}

// UpdateTask implements store.Store.
func (db *DB) UpdateTask(ctx context.Context, t *store.Task) error {
	if !t.Status.Valid() {
		return fmt.Errorf("update task %s: invalid status %q", t.ID, t.Status)
	}
	data, err := encodeTask(t)
	if err != nil {
		return fmt.Errorf("update task: %w", err)
	}
	const q = updateTaskQ
	args := []any{string(t.Status), t.EndedAt, data, t.ID, t.Agent, t.Version, t.Fence}
	var n int64
	// Waiters in other processes act on an outcome (and on log entries,
	// which AppendLogs announces), not on the intermediate fields a
	// follower records (run id, artifacts, recovery): only an outcome is
	// announced.
	announce := db.d.Notify != "" && t.Status.Terminal()
	if announce && db.d.ChangeTable {
		// The change row commits with the update, or neither does.
		err = db.tx(ctx, func(tx *txn) error {
			res, err := tx.ExecContext(ctx, q, args...)
			if err != nil {
				return err
			}
			if n, err = res.RowsAffected(); err != nil || n == 0 {
				return err
			}
			db.announce(ctx, tx, t.ID)
			return nil
		})
	} else {
		var res sql.Result
		if res, err = db.w.ExecContext(ctx, q, args...); err == nil {
			n, err = res.RowsAffected()
		}
	}
	if err != nil {
		return fmt.Errorf("update task %s: %w", t.ID, db.classify(err))
	}
	if n == 0 {
		return fmt.Errorf("update task %s: %w", t.ID, db.missed(ctx, t.ID, t.Fence))
	}
	t.Version++
	if announce && !db.d.ChangeTable {
		db.announce(ctx, db.w, t.ID)
	}
	return nil
}

// missed explains a fenced write that matched no row: the task is gone
// (ErrNotFound), was claimed since the writer's token was issued
// (ErrLeaseLost), or changed otherwise (ErrConflict).
func (db *DB) missed(ctx context.Context, id string, fence int64) error {
	var cur int64
	err := db.w.QueryRowContext(ctx, `SELECT fence FROM tasks WHERE id = ?`, id).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.ErrNotFound
	case err != nil:
		return db.classify(err)
	case cur != fence:
		return fmt.Errorf("fencing token %d, the task's is %d: %w", fence, cur, store.ErrLeaseLost)
	}
	return store.ErrConflict
}

// TouchPoll implements store.Store.
func (db *DB) TouchPoll(ctx context.Context, agent, id string, at int64) (int64, error) {
	if db.polls != nil {
		return db.touchPollBatched(ctx, agent, id, at)
	}
	var n int64
	q := `UPDATE tasks SET poll_count = poll_count + 1, last_poll_at = ?
		WHERE id = ? AND agent = ? RETURNING poll_count`
	var err error
	if db.d.RelaxedCommit == "" {
		err = db.w.QueryRowContext(ctx, q, at, id, agent).Scan(&n)
	} else {
		err = db.tx(ctx, func(tx *txn) error {
			if _, err := tx.ExecContext(ctx, db.d.RelaxedCommit); err != nil {
				return err
			}
			return tx.QueryRowContext(ctx, q, at, id, agent).Scan(&n)
		})
	}
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("touch poll %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("touch poll %s: %w", id, err)
	}
	return n, nil
}

// updateTaskQ is UpdateTask's compare-and-set write, fenced.
const updateTaskQ = `UPDATE tasks SET status = ?, ended_at = ?, data = ?, version = version + 1
		WHERE id = ? AND agent = ? AND version = ?` + FenceCond

func (db *DB) queryTasks(ctx context.Context, qr querier, q string, args ...any) ([]*store.Task, error) {
	rows, err := qr.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		db.polls.apply(t)
		out = append(out, t)
	}
	return out, rows.Err()
}

// ClaimTasks implements store.Store.
func (db *DB) ClaimTasks(ctx context.Context, c store.Claim) ([]*store.Task, error) {
	if c.Owner == "" {
		return nil, fmt.Errorf("claim tasks: owner is required")
	}
	limit := store.ClampPage(c.Limit, store.MaxPage)
	ownUntil := int64(0)
	if c.IncludeOwn {
		ownUntil = c.Until
	}
	// Most claims find nothing: a read says so without taking the write
	// lock that every process sharing a SQLite file contends for.
	var any int
	err := db.r.QueryRowContext(ctx, `SELECT 1 FROM tasks WHERE agent = ? AND `+runningTask()+`
		AND (lease_until < ? OR (owner = ? AND lease_until < ?)) LIMIT 1`, c.Agent, c.Now, c.Owner, ownUntil).Scan(&any)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim tasks: %w", err)
	}
	// Not gate: a flush holds the writer while it waits for gate. Holding
	// off flushes keeps the returned poll counts exact.
	unlock := db.polls.flushLock()
	defer unlock()
	out, err := db.queryTasks(ctx, db.w, `UPDATE tasks SET owner = ?, lease_until = ?, fence = fence + 1 WHERE id IN (
		SELECT id FROM tasks WHERE agent = ? AND `+runningTask()+` AND (lease_until < ? OR (owner = ? AND lease_until < ?))
		ORDER BY lease_until, id LIMIT ?`+db.d.SkipLocked+`) RETURNING `+taskCols,
		c.Owner, c.Until, c.Agent, c.Now, c.Owner, ownUntil, limit)
	if err != nil {
		return nil, fmt.Errorf("claim tasks: %w", db.classify(err))
	}
	return out, nil
}

// CheckLease implements store.Store.
func (db *DB) CheckLease(ctx context.Context, id, owner string, now int64) error {
	var o string
	var until int64
	err := db.w.QueryRowContext(ctx, `SELECT owner, lease_until FROM tasks WHERE id = ?`, id).Scan(&o, &until)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("check lease %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("check lease %s: %w", id, err)
	}
	if o != owner || until < now {
		return fmt.Errorf("check lease %s: %w", id, store.ErrLeaseLost)
	}
	return nil
}
