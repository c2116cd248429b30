// Package sqlstore implements store.Store over database/sql for both
// backends (SQLite and PostgreSQL). The backends differ only in their
// Dialect: placeholder style, row locking, and how a database is opened and
// migrated (their own packages).
package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// taskData is the JSON column of a task: every field that is never a key.
type taskData struct {
	Prompt           store.Prompt     `json:"prompt"`
	Message          string           `json:"message,omitempty"`
	LastEventAt      int64            `json:"lastEventAt"`
	Summary          string           `json:"summary,omitempty"`
	Error            string           `json:"error,omitempty"`
	ErrorInfo        *store.ErrorInfo `json:"errorInfo,omitempty"`
	TerminalReason   string           `json:"terminalReason,omitempty"`
	ResultSource     string           `json:"resultSource,omitempty"`
	Provisional      bool             `json:"provisional,omitempty"`
	OutcomeVersion   int64            `json:"outcomeVersion,omitempty"`
	ParentRunID      string           `json:"parentRunId,omitempty"`
	LastSeenSequence int64            `json:"lastSeenSequence,omitempty"`
	PayloadPath      string           `json:"payloadPath,omitempty"`
	Upstream         string           `json:"upstream,omitempty"`
	Transcript       string           `json:"transcript,omitempty"`
	Cancellation     string           `json:"cancellation,omitempty"`
	NewThread        bool             `json:"newThread,omitempty"`
	Artifacts        store.Artifacts  `json:"artifacts"`
	Recovery         *store.Recovery  `json:"recovery,omitempty"`
	Liveness         *store.Liveness  `json:"liveness,omitempty"`
	Principal        string           `json:"principal,omitempty"`
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

type scanner interface{ Scan(dest ...any) error }

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
	return tx.Commit()
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
		// The session row is the lock that serializes submits on one session.
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (agent, session_key, last_job_id, created_at, updated_at, principal)
			VALUES (?, ?, '', ?, ?, ?) ON CONFLICT (agent, session_key) DO NOTHING`,
			t.Agent, t.SessionKey, t.StartedAt, t.StartedAt, t.Principal); err != nil {
			return err
		}
		var last string
		if err := tx.QueryRowContext(ctx, `SELECT last_job_id FROM sessions WHERE agent = ? AND session_key = ?`+db.d.ForUpdate,
			t.Agent, t.SessionKey).Scan(&last); err != nil {
			return err
		}
		if last != "" {
			var status string
			err := tx.QueryRowContext(ctx, `SELECT status FROM tasks WHERE id = ?`, last).Scan(&status)
			if err == nil && status == string(store.StatusRunning) {
				return &store.SessionBusyError{JobID: last}
			}
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO tasks (`+taskCols+`) VALUES (?, ?, ?, ?, ?, 0, ?, ?, 1, 1, 0, 0, 0, ?)`,
			t.ID, t.Agent, t.SessionKey, string(t.Status), t.StartedAt, t.Owner, t.LeaseUntil, data); err != nil {
			if db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
				return fmt.Errorf("task %s: %w", t.ID, store.ErrExists)
			}
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET last_job_id = ?, updated_at = ? WHERE agent = ? AND session_key = ?`,
			t.ID, t.StartedAt, t.Agent, t.SessionKey); err != nil {
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
	db.committed()
	t.Version, t.Fence, t.LogCount, t.PollCount, t.LastPollAt, t.EndedAt = 1, 1, 0, 0, 0, 0
	return nil
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
	if announce && db.d.ChangeTable {
		db.committed()
	} else if announce {
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

// classify maps a driver error the dialect recognizes (a lock wait that ran
// out) to its store sentinel; others pass unchanged.
func (db *DB) classify(err error) error {
	if db.d.IsBusy != nil && db.d.IsBusy(err) {
		return fmt.Errorf("%w: another process held the database's write lock for longer than the busy timeout; nothing was written, retry (%v)", store.ErrBusy, err)
	}
	return err
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
	db.committed()
	return nil
}

// appendLogsTx is AppendLogs inside tx, without the announcement.
func (db *DB) appendLogsTx(ctx context.Context, tx *txn, taskID string, fence int64, entries []store.LogEntry) error {
	first := entries[0].Seq
	for i, e := range entries {
		if e.Seq != first+int64(i) {
			return fmt.Errorf("log seq %d does not follow %d: %w", e.Seq, first+int64(i)-1, store.ErrConflict)
		}
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
	for _, e := range entries {
		isErr := 0
		if e.IsError {
			isErr = 1
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO task_logs (task_id, seq, ts, type, text, is_error) VALUES (?, ?, ?, ?, ?, ?)`,
			taskID, e.Seq, e.TS, e.Type, e.Text, isErr); err != nil {
			return err
		}
	}
	return nil
}

// UpdateTaskWithLogs implements store.LogUpdater: AppendLogs and then
// UpdateTask in one transaction (committed durably: it carries an
// outcome), one announcement; neither lands unless both do.
func (db *DB) UpdateTaskWithLogs(ctx context.Context, t *store.Task, entries []store.LogEntry) error {
	if len(entries) == 0 {
		return db.UpdateTask(ctx, t)
	}
	if !t.Status.Valid() {
		return fmt.Errorf("update task %s: invalid status %q", t.ID, t.Status)
	}
	data, err := encodeTask(t)
	if err != nil {
		return fmt.Errorf("update task: %w", err)
	}
	var n int64
	err = db.tx(ctx, func(tx *txn) error {
		if err := db.appendLogsTx(ctx, tx, t.ID, t.Fence, entries); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, updateTaskQ, string(t.Status), t.EndedAt, data, t.ID, t.Agent, t.Version, t.Fence)
		if err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			if err == nil {
				err = errNoRow
			}
			return err
		}
		db.announce(ctx, tx, t.ID)
		return nil
	})
	if errors.Is(err, errNoRow) {
		return fmt.Errorf("update task %s: %w", t.ID, db.missed(ctx, t.ID, t.Fence))
	}
	if err != nil {
		return fmt.Errorf("update task %s: %w", t.ID, db.classify(err))
	}
	t.Version++
	db.committed()
	return nil
}

// updateTaskQ is UpdateTask's compare-and-set write, fenced.
const updateTaskQ = `UPDATE tasks SET status = ?, ended_at = ?, data = ?, version = version + 1
		WHERE id = ? AND agent = ? AND version = ?` + FenceCond

// errNoRow is a compare-and-set update that matched no row, rolled back.
var errNoRow = errors.New("no row matched")

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

// GetSession implements store.Store.
func (db *DB) GetSession(ctx context.Context, agent, sessionKey string) (*store.Session, error) {
	s := store.Session{Agent: agent, SessionKey: sessionKey}
	err := db.r.QueryRowContext(ctx, `SELECT last_job_id, created_at, updated_at, principal FROM sessions WHERE agent = ? AND session_key = ?`,
		agent, sessionKey).Scan(&s.LastJobID, &s.CreatedAt, &s.UpdatedAt, &s.Principal)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && s.LastJobID == "") {
		return nil, fmt.Errorf("get session: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	return &s, nil
}

func encodeCursor(n int64, key string) string {
	return strconv.FormatInt(n, 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(key))
}

func decodeCursor(c string) (int64, string, error) {
	num, key, ok := strings.Cut(c, ".")
	if !ok {
		return 0, "", fmt.Errorf("malformed page cursor %q", c)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("malformed page cursor %q", c)
	}
	k, err := base64.RawURLEncoding.DecodeString(key)
	if err != nil {
		return 0, "", fmt.Errorf("malformed page cursor %q", c)
	}
	return n, string(k), nil
}

// ListSessions implements store.Store.
func (db *DB) ListSessions(ctx context.Context, agent string, p store.Page) ([]store.SessionTask, string, error) {
	limit := store.ClampPage(p.Limit, 100)
	q := `SELECT s.session_key, s.last_job_id, s.created_at, s.updated_at, ` + prefixed("t", taskCols) + `
		FROM sessions s LEFT JOIN tasks t ON t.id = s.last_job_id
		WHERE s.agent = ? AND s.last_job_id <> ''`
	args := []any{agent}
	if p.Principal != nil {
		q += ` AND s.principal = ?`
		args = append(args, *p.Principal)
	}
	if p.Before != "" {
		n, key, err := decodeCursor(p.Before)
		if err != nil {
			return nil, "", fmt.Errorf("list sessions: %w", err)
		}
		q += ` AND (s.updated_at < ? OR (s.updated_at = ? AND s.session_key < ?))`
		args = append(args, n, n, key)
	}
	q += ` ORDER BY s.updated_at DESC, s.session_key DESC LIMIT ?`
	args = append(args, limit+1)
	unlock := db.polls.readLock()
	defer unlock()
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	var out []store.SessionTask
	for rows.Next() {
		var st store.SessionTask
		st.Session.Agent = agent
		var tc nullTaskCols
		if err := rows.Scan(append([]any{&st.Session.SessionKey, &st.Session.LastJobID, &st.Session.CreatedAt, &st.Session.UpdatedAt}, tc.dest()...)...); err != nil {
			return nil, "", fmt.Errorf("list sessions: %w", err)
		}
		if tc.id.Valid {
			t, err := tc.task()
			if err != nil {
				return nil, "", fmt.Errorf("list sessions: %w", err)
			}
			db.polls.apply(t)
			st.Task = t
		}
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		last := out[limit-1].Session
		next = encodeCursor(last.UpdatedAt, last.SessionKey)
	}
	return out, next, nil
}

func prefixed(alias, cols string) string {
	parts := strings.Split(cols, ", ")
	for i, p := range parts {
		parts[i] = alias + "." + p
	}
	return strings.Join(parts, ", ")
}

// nullTaskCols scans a LEFT JOINed task.
type nullTaskCols struct {
	id, agent, key, status, owner, data                                  sql.NullString
	started, ended, lease, fence, version, logCount, pollCount, lastPoll sql.NullInt64
}

func (c *nullTaskCols) dest() []any {
	return []any{&c.id, &c.agent, &c.key, &c.status, &c.started, &c.ended, &c.owner, &c.lease, &c.fence, &c.version,
		&c.logCount, &c.pollCount, &c.lastPoll, &c.data}
}

func (c *nullTaskCols) task() (*store.Task, error) {
	return scanTask(valuesScanner{c.id.String, c.agent.String, c.key.String, c.status.String, c.started.Int64,
		c.ended.Int64, c.owner.String, c.lease.Int64, c.fence.Int64, c.version.Int64, c.logCount.Int64, c.pollCount.Int64,
		c.lastPoll.Int64, c.data.String})
}

// valuesScanner replays already-scanned values into scanTask.
type valuesScanner []any

func (v valuesScanner) Scan(dest ...any) error {
	for i, d := range dest {
		switch p := d.(type) {
		case *string:
			*p = v[i].(string)
		case *int64:
			*p = v[i].(int64)
		default:
			return fmt.Errorf("unexpected scan destination %T", d)
		}
	}
	return nil
}

// SessionTasks implements store.Store.
func (db *DB) SessionTasks(ctx context.Context, agent, sessionKey string, p store.Page) ([]*store.Task, string, error) {
	limit := store.ClampPage(p.Limit, 50)
	q := `SELECT ` + taskCols + ` FROM tasks WHERE agent = ? AND session_key = ?`
	args := []any{agent, sessionKey}
	if p.Before != "" {
		n, id, err := decodeCursor(p.Before)
		if err != nil {
			return nil, "", fmt.Errorf("session tasks: %w", err)
		}
		q += ` AND (started_at < ? OR (started_at = ? AND id < ?))`
		args = append(args, n, n, id)
	}
	q += ` ORDER BY started_at DESC, id DESC LIMIT ?`
	args = append(args, limit+1)
	unlock := db.polls.readLock()
	out, err := db.queryTasks(ctx, db.r, q, args...)
	unlock()
	if err != nil {
		return nil, "", fmt.Errorf("session tasks: %w", err)
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = encodeCursor(out[limit-1].StartedAt, out[limit-1].ID)
	}
	return out, next, nil
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

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
	err := db.r.QueryRowContext(ctx, `SELECT 1 FROM tasks WHERE agent = ? AND `+runningTask+`
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
		SELECT id FROM tasks WHERE agent = ? AND `+runningTask+` AND (lease_until < ? OR (owner = ? AND lease_until < ?))
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

// LoadAttachments implements store.Store.
func (db *DB) LoadAttachments(ctx context.Context, agent, sessionKey string) (*store.AttachmentState, error) {
	s := &store.AttachmentState{Agent: agent, SessionKey: sessionKey}
	err := db.r.QueryRowContext(ctx, `SELECT current_id, version FROM attachment_sessions WHERE agent = ? AND session_key = ?`,
		agent, sessionKey).Scan(&s.CurrentID, &s.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load attachments: %w", err)
	}
	rows, err := db.r.QueryContext(ctx, `SELECT id, seq, observation_token, data FROM attachments
		WHERE agent = ? AND session_key = ? ORDER BY seq`, agent, sessionKey)
	if err != nil {
		return nil, fmt.Errorf("load attachments: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r store.AttachmentRecord
		var data string
		if err := rows.Scan(&r.ID, &r.Seq, &r.ObservationToken, &data); err != nil {
			return nil, fmt.Errorf("load attachments: %w", err)
		}
		r.Data = []byte(data)
		s.Records = append(s.Records, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load attachments: %w", err)
	}
	return s, nil
}

// SaveAttachments implements store.Store.
func (db *DB) SaveAttachments(ctx context.Context, w store.AttachmentWrite) (int64, error) {
	err := db.tx(ctx, func(tx *txn) error {
		var res sql.Result
		var err error
		if w.ExpectVersion == 0 {
			res, err = tx.ExecContext(ctx, `INSERT INTO attachment_sessions (agent, session_key, current_id, version)
				VALUES (?, ?, ?, 1) ON CONFLICT (agent, session_key) DO NOTHING`, w.Agent, w.SessionKey, w.CurrentID)
		} else {
			res, err = tx.ExecContext(ctx, `UPDATE attachment_sessions SET current_id = ?, version = version + 1
				WHERE agent = ? AND session_key = ? AND version = ?`, w.CurrentID, w.Agent, w.SessionKey, w.ExpectVersion)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrConflict
		}
		for _, r := range w.Records {
			if _, err := tx.ExecContext(ctx, `INSERT INTO attachments (agent, session_key, id, seq, observation_token, data)
				VALUES (?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM attachments WHERE agent = ? AND session_key = ?), ?, ?)
				ON CONFLICT (agent, session_key, id)
				DO UPDATE SET observation_token = excluded.observation_token, data = excluded.data`,
				w.Agent, w.SessionKey, r.ID, w.Agent, w.SessionKey, r.ObservationToken, string(r.Data)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("save attachments: %w", err)
	}
	return w.ExpectVersion + 1, nil
}

// MaxObservationToken implements store.Store.
func (db *DB) MaxObservationToken(ctx context.Context) (int64, error) {
	var n sql.NullInt64
	if err := db.r.QueryRowContext(ctx, `SELECT MAX(observation_token) FROM attachments`).Scan(&n); err != nil {
		return 0, fmt.Errorf("max observation token: %w", err)
	}
	return n.Int64, nil
}

// Sweep implements store.Store.
func (db *DB) Sweep(ctx context.Context, cutoff int64, limit int) (store.SweepResult, error) {
	var res store.SweepResult
	limit = store.ClampPage(limit, store.MaxPage)
	err := db.tx(ctx, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, agent, session_key FROM tasks
			WHERE `+endedTask+` AND ended_at < ? ORDER BY ended_at LIMIT ?`, cutoff, limit)
		if err != nil {
			return err
		}
		type key struct{ id, agent, session string }
		var victims []key
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.id, &k.agent, &k.session); err != nil {
				rows.Close()
				return err
			}
			victims = append(victims, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, k := range victims {
			r, err := tx.ExecContext(ctx, `DELETE FROM task_logs WHERE task_id = ?`, k.id)
			if err != nil {
				return err
			}
			n, _ := r.RowsAffected()
			res.Logs += int(n)
			if _, err := tx.ExecContext(ctx, `DELETE FROM tasks WHERE id = ?`, k.id); err != nil {
				return err
			}
			res.Tasks++
			r, err = tx.ExecContext(ctx, `DELETE FROM sessions WHERE agent = ? AND session_key = ? AND last_job_id = ?`,
				k.agent, k.session, k.id)
			if err != nil {
				return err
			}
			n, _ = r.RowsAffected()
			res.Sessions += int(n)
		}
		return nil
	})
	if err != nil {
		return store.SweepResult{}, fmt.Errorf("sweep: %w", err)
	}
	return res, nil
}
