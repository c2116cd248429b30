package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

var _ store.TerminalStore = (*DB)(nil)

// querier is the read side shared by the pools and transactions.
type termQuerier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) scanner
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

func (db *DB) termSession(ctx context.Context, q termQuerier, id string, lock bool) (*store.TermSession, error) {
	return record(ctx, db, q, `SELECT revision, data FROM term_sessions WHERE session_id = ?`, "session", id, lock,
		func(s *store.TermSession, rev int64) { s.Revision = rev })
}

// record reads one versioned JSON record (stmt selects its version or
// revision column and its data by id, locked for update when lock is set)
// and decodes it; kind names it in errors.
func record[T any](ctx context.Context, db *DB, q termQuerier, stmt, kind, id string, lock bool, setVersion func(*T, int64)) (*T, error) {
	if lock {
		stmt += db.d.ForUpdate
	}
	var v int64
	var data string
	err := q.QueryRowContext(ctx, stmt, id).Scan(&v, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s %s: %w", kind, id, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return decodeRecord(kind, id, v, data, setVersion)
}

// decodeRecord decodes a record's data column and sets its version.
func decodeRecord[T any](kind, id string, v int64, data string, setVersion func(*T, int64)) (*T, error) {
	var r T
	if err := json.Unmarshal([]byte(data), &r); err != nil {
		return nil, fmt.Errorf("%s %s has an unreadable data column: %v: %w", kind, id, err, store.ErrIncompatible)
	}
	setVersion(&r, v)
	return &r, nil
}

func terminalKeyOf(s *store.TermSession) string {
	if s.Binding == nil {
		return ""
	}
	return s.Binding.TerminalKey
}

// bindThread records that s binds its native thread, failing with
// ErrThreadBound when another Session already does.
func (db *DB) bindThread(ctx context.Context, tx *txn, s *store.TermSession) error {
	if s.Binding == nil || s.Binding.NativeThreadID == "" {
		return nil
	}
	thread := strings.ToLower(s.Binding.NativeThreadID)
	var owner string
	err := tx.QueryRowContext(ctx, `SELECT session_id FROM term_native_threads WHERE agent = ? AND thread_id = ?`+db.d.ForUpdate,
		s.Agent, thread).Scan(&owner)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, `INSERT INTO term_native_threads (agent, thread_id, session_id) VALUES (?, ?, ?)`,
			s.Agent, thread, s.SessionID)
		if err != nil && db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
			return fmt.Errorf("thread %s: %w", thread, store.ErrThreadBound)
		}
		return err
	case err != nil:
		return err
	case owner != s.SessionID:
		return fmt.Errorf("native thread %s is bound by session %s: %w", thread, owner, store.ErrThreadBound)
	}
	return nil
}

// CreateTermSession implements store.TerminalStore.
func (db *DB) CreateTermSession(ctx context.Context, s *store.TermSession) error {
	if s.Revision != 0 {
		return fmt.Errorf("create session %s: revision must be 0 for a new session", s.SessionID)
	}
	if !strings.HasPrefix(s.SessionID, "session-") {
		return fmt.Errorf("create session %q: ids start with session-", s.SessionID)
	}
	if err := store.CheckSessionWrite(nil, s); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	s.Revision = 1
	data, err := json.Marshal(s)
	if err != nil {
		s.Revision = 0
		return fmt.Errorf("create session: %w", err)
	}
	err = db.tx(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO term_sessions (session_id, agent, terminal_key, revision, updated_at, data)
			VALUES (?, ?, ?, 1, ?, ?)`, s.SessionID, s.Agent, terminalKeyOf(s), s.UpdatedAt, string(data)); err != nil {
			if db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
				return fmt.Errorf("session %s: %w", s.SessionID, store.ErrExists)
			}
			return err
		}
		return db.bindThread(ctx, tx, s)
	})
	if err != nil {
		s.Revision = 0
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// GetTermSession implements store.TerminalStore.
func (db *DB) GetTermSession(ctx context.Context, id string) (*store.TermSession, error) {
	s, err := db.termSession(ctx, db.r, id, false)
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	return s, nil
}

// SaveTermSession implements store.TerminalStore.
func (db *DB) SaveTermSession(ctx context.Context, s *store.TermSession) error {
	if err := db.tx(ctx, func(tx *txn) error { return db.saveTermSession(ctx, tx, s) }); err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	s.Revision++
	return nil
}

// SaveTermSession implements store.TerminalTx: the Session write joins the
// transaction and commits or rolls back with it.
func (t termTx) SaveTermSession(ctx context.Context, s *store.TermSession) error {
	if err := t.db.saveTermSession(ctx, t.tx, s); err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	s.Revision++
	return nil
}

// saveTermSession replaces the Session inside tx if its stored revision is
// s.Revision; the caller bumps s.Revision once the write is in.
func (db *DB) saveTermSession(ctx context.Context, tx *txn, s *store.TermSession) error {
	old, err := db.termSession(ctx, tx, s.SessionID, true)
	if err != nil {
		return err
	}
	if old.Revision != s.Revision {
		return fmt.Errorf("session %s is at revision %d, not %d: %w", s.SessionID, old.Revision, s.Revision, store.ErrConflict)
	}
	if err := store.CheckSessionWrite(old, s); err != nil {
		return err
	}
	next := *s
	next.Revision = s.Revision + 1
	data, err := json.Marshal(&next)
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE term_sessions SET terminal_key = ?, revision = ?, updated_at = ?, data = ?
		WHERE session_id = ? AND revision = ?`, terminalKeyOf(s), next.Revision, s.UpdatedAt, string(data), s.SessionID, s.Revision)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return store.ErrConflict
	}
	return db.bindThread(ctx, tx, s)
}

// SessionByThread implements store.TerminalStore.
func (db *DB) SessionByThread(ctx context.Context, agent, thread string) (*store.TermSession, error) {
	var id string
	err := db.r.QueryRowContext(ctx, `SELECT session_id FROM term_native_threads WHERE agent = ? AND thread_id = ?`,
		agent, strings.ToLower(thread)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session of thread %s: %w", thread, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("session of thread %s: %w", thread, err)
	}
	return db.GetTermSession(ctx, id)
}

// SessionsByTerminal implements store.TerminalStore.
func (db *DB) SessionsByTerminal(ctx context.Context, terminalKey string) ([]*store.TermSession, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT revision, data FROM term_sessions WHERE terminal_key = ?
		ORDER BY updated_at DESC LIMIT 20`, terminalKey)
	if err != nil {
		return nil, fmt.Errorf("sessions of terminal: %w", err)
	}
	defer rows.Close()
	var out []*store.TermSession
	for rows.Next() {
		var rev int64
		var data string
		if err := rows.Scan(&rev, &data); err != nil {
			return nil, fmt.Errorf("sessions of terminal: %w", err)
		}
		var s store.TermSession
		if err := json.Unmarshal([]byte(data), &s); err != nil {
			return nil, fmt.Errorf("sessions of terminal: %v: %w", err, store.ErrIncompatible)
		}
		s.Revision = rev
		out = append(out, &s)
	}
	return out, rows.Err()
}

func (db *DB) turn(ctx context.Context, q termQuerier, id string, lock bool) (*store.Turn, error) {
	return record(ctx, db, q, `SELECT version, data FROM term_turns WHERE turn_id = ?`, "turn", id, lock, setTurnVersion)
}

func decodeTurn(id string, v int64, data string) (*store.Turn, error) {
	return decodeRecord("turn", id, v, data, setTurnVersion)
}

func setTurnVersion(t *store.Turn, v int64) { t.Version = v }

func (db *DB) dispatch(ctx context.Context, q termQuerier, key string, lock bool) (*store.Dispatch, error) {
	stmt := `SELECT version, data FROM term_dispatch WHERE terminal_key = ?`
	if lock {
		stmt += db.d.ForUpdate
	}
	var v int64
	var data string
	err := q.QueryRowContext(ctx, stmt, key).Scan(&v, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("dispatch of %s: %w", key, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var d store.Dispatch
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		return nil, fmt.Errorf("dispatch of %s: %v: %w", key, err, store.ErrIncompatible)
	}
	d.Version = v
	return &d, nil
}

// checkDispatchFree fails with ErrTerminalBusy when the terminal's ledger
// entry blocks new input; it returns the current generation ("" if none).
func (db *DB) checkDispatchFree(ctx context.Context, tx *txn, key, exceptTurn string) (string, error) {
	cur, err := db.dispatch(ctx, tx, key, true)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var owner termapi.TurnStatus
	if cur.TurnID != "" {
		err := tx.QueryRowContext(ctx, `SELECT status FROM term_turns WHERE turn_id = ?`, cur.TurnID).Scan(&owner)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return "", err
		}
	}
	if cur.TurnID == exceptTurn && cur.Status == termapi.DispatchAgentAccepted {
		return cur.GenerationID, nil
	}
	if cur.Blocks(owner) && cur.MessageType == store.DispatchTransition {
		return "", fmt.Errorf("native thread transition %s owns the terminal's next input (%s): %w",
			cur.MessageID, cur.Status, store.ErrTerminalBusy)
	}
	if cur.Blocks(owner) {
		return "", fmt.Errorf("turn %s owns the terminal's next input (dispatch %s, turn %s): %w",
			cur.TurnID, cur.Status, owner, store.ErrTerminalBusy)
	}
	return cur.GenerationID, nil
}

func (db *DB) putDispatch(ctx context.Context, tx *txn, d *store.Dispatch) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO term_dispatch (terminal_key, generation_id, data) VALUES (?, ?, ?)
		ON CONFLICT (terminal_key) DO UPDATE SET generation_id = excluded.generation_id, data = excluded.data,
			version = term_dispatch.version + 1`,
		d.TerminalKey, d.GenerationID, string(data))
	return err
}

// insertDispatch inserts the terminal's first ledger entry; a concurrent
// writer that inserted one first makes it fail with ErrTerminalBusy.
func (db *DB) insertDispatch(ctx context.Context, tx *txn, d *store.Dispatch) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO term_dispatch (terminal_key, generation_id, data) VALUES (?, ?, ?)`,
		d.TerminalKey, d.GenerationID, string(data))
	if err != nil && db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
		return fmt.Errorf("another send or transition took the terminal's next input first: %w", store.ErrTerminalBusy)
	}
	return err
}

// CreateTurn implements store.TerminalStore.
func (db *DB) CreateTurn(ctx context.Context, tc store.TurnCreate) error {
	t := tc.Turn
	if !strings.HasPrefix(t.TurnID, "turn-") || t.SessionID == "" {
		return fmt.Errorf("create turn %q: a turn-… id and a session id are required", t.TurnID)
	}
	if t.Status != termapi.TurnCreated {
		return fmt.Errorf("create turn %s: a Turn starts %s, not %q", t.TurnID, termapi.TurnCreated, t.Status)
	}
	if tc.Dispatch == nil || tc.Dispatch.TerminalKey == "" || tc.Dispatch.Status != termapi.DispatchPrepared {
		return fmt.Errorf("create turn %s: a prepared dispatch entry is required", t.TurnID)
	}
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("create turn: %w", err)
	}
	err = db.tx(ctx, func(tx *txn) error {
		// The Session row serializes sends on one Session.
		sess, err := db.termSession(ctx, tx, t.SessionID, true)
		if err != nil {
			return err
		}
		if sess.Binding == nil || sess.Binding.BindingID != t.TerminalBindingID || sess.Binding.Generation != t.TerminalBindingGeneration {
			return fmt.Errorf("turn %s names binding %s/%d but the session's current binding differs: %w",
				t.TurnID, t.TerminalBindingID, t.TerminalBindingGeneration, store.ErrConflict)
		}
		var busy, busyStatus string
		err = tx.QueryRowContext(ctx, `SELECT turn_id, status FROM term_turns WHERE session_id = ?
			AND `+turnSendBlocking()+` LIMIT 1`,
			t.SessionID).Scan(&busy, &busyStatus)
		if err == nil {
			return fmt.Errorf("session %s has turn %s in status %s: %w", t.SessionID, busy, busyStatus, store.ErrTerminalBusy)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		prev, err := db.checkDispatchFree(ctx, tx, tc.Dispatch.TerminalKey, "")
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO term_turns (turn_id, session_id, status, created_at, version, principal, data)
			VALUES (?, ?, ?, ?, 1, ?, ?)`, t.TurnID, t.SessionID, t.Status, t.CreatedAt, t.Principal, string(data)); err != nil {
			if db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
				return fmt.Errorf("turn %s: %w", t.TurnID, store.ErrExists)
			}
			return err
		}
		d := *tc.Dispatch
		d.PreviousGenerationID = prev
		if prev == "" {
			// No entry was read, so there is no row to lock: insert,
			// and let a concurrent first writer make this one lose.
			err = db.insertDispatch(ctx, tx, &d)
		} else {
			err = db.putDispatch(ctx, tx, &d)
		}
		if err != nil {
			return err
		}
		return db.appendTurnEvents(ctx, tx, t.TurnID, tc.Events)
	})
	if err != nil {
		return fmt.Errorf("create turn: %w", err)
	}
	t.Version = 1
	return nil
}

// GetTurn implements store.TerminalStore.
func (db *DB) GetTurn(ctx context.Context, id string) (*store.Turn, error) {
	t, err := db.turn(ctx, db.r, id, false)
	if err != nil {
		return nil, fmt.Errorf("get turn: %w", err)
	}
	return t, nil
}

// termTx adapts a transaction to store.TerminalTx.
type termTx struct {
	db *DB
	tx *txn
}

// AppendTurnEvents implements store.TerminalTx.
func (t termTx) AppendTurnEvents(ctx context.Context, turnID string, events []store.TurnEvent) error {
	return t.db.appendTurnEvents(ctx, t.tx, turnID, events)
}

func (db *DB) appendTurnEvents(ctx context.Context, tx *txn, turnID string, events []store.TurnEvent) error {
	if len(events) == 0 {
		return nil
	}
	var last int64
	if err := tx.QueryRowContext(ctx, `UPDATE term_turns SET event_count = event_count + ? WHERE turn_id = ?
		RETURNING event_count`, len(events), turnID).Scan(&last); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("append events: turn %s: %w", turnID, store.ErrNotFound)
		}
		return err
	}
	seq := last - int64(len(events))
	for _, e := range events {
		seq++
		data := string(e.Data)
		if data == "" {
			data = "{}"
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO term_turn_events (turn_id, seq, ts, type, data) VALUES (?, ?, ?, ?, ?)`,
			turnID, seq, e.TS, e.Type, data); err != nil {
			return err
		}
	}
	return nil
}

// WriteTurn implements store.TerminalStore.
func (db *DB) WriteTurn(ctx context.Context, w store.TurnWrite) error {
	t := w.Turn
	if !t.Status.Valid() {
		return fmt.Errorf("write turn %s: %w: %q is not a Turn status", t.TurnID, termapi.ErrRefused, t.Status)
	}
	from := turnAdvanceFrom(t.Status)
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("write turn: %w", err)
	}
	err = db.tx(ctx, func(tx *txn) error {
		if w.Fence != nil {
			if err := db.checkFence(ctx, tx, store.LeaseMonitor, t.TurnID, *w.Fence); err != nil {
				return err
			}
		}
		// The principal column is written once, by CreateTurn: comparing
		// it here keeps a Turn with the caller that sent it. The
		// lifecycle check rides on the update too: a stored status the
		// new one may not follow leaves the row alone, and the read
		// below says which rule held it.
		res, err := tx.ExecContext(ctx, `UPDATE term_turns SET status = ?, data = ?, version = version + 1
			WHERE turn_id = ? AND version = ? AND principal = ? AND `+from, t.Status, string(data), t.TurnID, t.Version, t.Principal)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			var version int64
			var principal string
			var stored termapi.TurnStatus
			err := tx.QueryRowContext(ctx, `SELECT version, principal, status FROM term_turns WHERE turn_id = ?`, t.TurnID).Scan(&version, &principal, &stored)
			if err == nil && version == t.Version && principal == t.Principal {
				if err := termapi.CheckTurnAdvance(stored, t.Status); err != nil {
					return fmt.Errorf("turn %s: %w", t.TurnID, err)
				}
			}
			switch {
			case errors.Is(err, sql.ErrNoRows):
				return fmt.Errorf("turn %s: %w", t.TurnID, store.ErrNotFound)
			case err != nil:
				return err
			case principal != t.Principal:
				return fmt.Errorf("turn %s was sent by principal %q, not %q: a Turn's principal is fixed when it is sent; re-read the Turn and keep its principal", t.TurnID, principal, t.Principal)
			}
			return fmt.Errorf("turn %s changed since version %d: %w", t.TurnID, t.Version, store.ErrConflict)
		}
		if w.Claim != nil {
			if err := db.claim(ctx, tx, w.Claim); err != nil {
				return err
			}
		}
		if a := w.Dispatch; a != nil {
			cur, err := db.dispatch(ctx, tx, a.TerminalKey, true)
			if err != nil {
				return err
			}
			if cur.GenerationID != a.GenerationID {
				return fmt.Errorf("dispatch of %s moved to generation %s: %w", a.TerminalKey, cur.GenerationID, store.ErrConflict)
			}
			if err := db.putDispatch(ctx, tx, a.Update); err != nil {
				return err
			}
		}
		if d := w.NewDispatch; d != nil {
			prev, err := db.checkDispatchFree(ctx, tx, d.TerminalKey, t.TurnID)
			if err != nil {
				return err
			}
			nd := *d
			nd.PreviousGenerationID = prev
			if err := db.putDispatch(ctx, tx, &nd); err != nil {
				return err
			}
		}
		if err := db.appendTurnEvents(ctx, tx, t.TurnID, w.Events); err != nil {
			return err
		}
		if w.Also != nil {
			return w.Also(ctx, termTx{db, tx})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write turn %s: %w", t.TurnID, err)
	}
	t.Version++
	// The change row goes in after the commit; the post-commit signal then
	// tells the listeners of other store handles to read it (without it a
	// Wait elsewhere learns of the change only at its re-check).
	if db.announce(ctx, db.w, t.TurnID) {
		db.committed()
	}
	return nil
}

func (db *DB) claim(ctx context.Context, tx *txn, c *store.CompletionClaim) error {
	var fp string
	err := tx.QueryRowContext(ctx, `SELECT fingerprint FROM term_completion_claims WHERE turn_id = ?`, c.TurnID).Scan(&fp)
	switch {
	case err == nil && fp == c.CompletionFingerprint:
		return nil
	case err == nil:
		return fmt.Errorf("turn %s already claimed completion %s: %w", c.TurnID, fp, store.ErrClaimed)
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO term_completion_claims (turn_id, fingerprint, data) VALUES (?, ?, ?)`,
		c.TurnID, c.CompletionFingerprint, string(data))
	if err != nil && db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
		return fmt.Errorf("turn %s: %w", c.TurnID, store.ErrClaimed)
	}
	return err
}

// OpenTurns implements store.TerminalStore.
func (db *DB) OpenTurns(ctx context.Context, limit int) ([]*store.Turn, error) {
	return db.queryTurns(ctx, `SELECT turn_id, version, data FROM term_turns WHERE `+openTurn()+`
		ORDER BY turn_id LIMIT ?`, store.ClampPage(limit, store.MaxPage))
}

// SessionTurns implements store.TerminalStore.
func (db *DB) SessionTurns(ctx context.Context, sessionID string, limit int) ([]*store.Turn, error) {
	return db.queryTurns(ctx, `SELECT turn_id, version, data FROM term_turns WHERE session_id = ?
		ORDER BY created_at DESC, turn_id DESC LIMIT ?`, sessionID, store.ClampPage(limit, 20))
}

func (db *DB) queryTurns(ctx context.Context, q string, args ...any) ([]*store.Turn, error) {
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list turns: %w", err)
	}
	defer rows.Close()
	var out []*store.Turn
	for rows.Next() {
		var id, data string
		var v int64
		if err := rows.Scan(&id, &v, &data); err != nil {
			return nil, fmt.Errorf("list turns: %w", err)
		}
		t, err := decodeTurn(id, v, data)
		if err != nil {
			return nil, fmt.Errorf("list turns: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// TurnEvents implements store.TerminalStore.
func (db *DB) TurnEvents(ctx context.Context, turnID string, after int64, limit int) ([]store.TurnEvent, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT seq, ts, type, data FROM term_turn_events WHERE turn_id = ? AND seq > ?
		ORDER BY seq LIMIT ?`, turnID, after, store.ClampPage(limit, store.MaxPage))
	if err != nil {
		return nil, fmt.Errorf("turn events: %w", err)
	}
	defer rows.Close()
	var out []store.TurnEvent
	for rows.Next() {
		var e store.TurnEvent
		var data string
		if err := rows.Scan(&e.Seq, &e.TS, &e.Type, &data); err != nil {
			return nil, fmt.Errorf("turn events: %w", err)
		}
		e.Data = json.RawMessage(data)
		out = append(out, e)
	}
	return out, rows.Err()
}

// GetCompletionClaim implements store.TerminalStore.
func (db *DB) GetCompletionClaim(ctx context.Context, turnID string) (*store.CompletionClaim, error) {
	var data string
	err := db.r.QueryRowContext(ctx, `SELECT data FROM term_completion_claims WHERE turn_id = ?`, turnID).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("completion claim of %s: %w", turnID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("completion claim of %s: %w", turnID, err)
	}
	var c store.CompletionClaim
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return nil, fmt.Errorf("completion claim of %s: %v: %w", turnID, err, store.ErrIncompatible)
	}
	return &c, nil
}

// GetDispatch implements store.TerminalStore.
func (db *DB) GetDispatch(ctx context.Context, terminalKey string) (*store.Dispatch, error) {
	d, err := db.dispatch(ctx, db.r, terminalKey, false)
	if err != nil {
		return nil, fmt.Errorf("get dispatch: %w", err)
	}
	return d, nil
}
