package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

var _ store.TransitionStore = (*DB)(nil)

func (db *DB) transition(ctx context.Context, q termQuerier, id string, lock bool) (*store.Transition, error) {
	return record(ctx, db, q, `SELECT version, data FROM term_transitions WHERE transition_id = ?`, "transition", id, lock, setTransitionVersion)
}

func decodeTransition(id string, v int64, data string) (*store.Transition, error) {
	return decodeRecord("transition", id, v, data, setTransitionVersion)
}

func setTransitionVersion(t *store.Transition, v int64) { t.Version = v }

// unresolved returns why the terminal cannot take a transition now ("" if
// it can): a send-blocking Turn or an undelivered callback of the Session,
// a blocking ledger entry, or another open transition. prev is the ledger
// generation read (and locked) on the way ("" when there is none).
func (db *DB) unresolved(ctx context.Context, tx *txn, t *store.Transition) (why, prev string, err error) {
	if t.FromSessionID != "" {
		var turn, status string
		err = tx.QueryRowContext(ctx, `SELECT turn_id, status FROM term_turns WHERE session_id = ?
			AND `+turnSendBlocking()+` LIMIT 1`,
			t.FromSessionID).Scan(&turn, &status)
		switch {
		case err == nil:
			return fmt.Sprintf("turn %s is %s (a running Turn or a pending approval); wait for it, or cancel/close it first", turn, status), "", nil
		case !errors.Is(err, sql.ErrNoRows):
			return "", "", err
		}
		var msg, cbTurn string
		err = tx.QueryRowContext(ctx, `SELECT c.message_id, c.turn_id FROM term_callbacks c JOIN term_turns t ON t.turn_id = c.turn_id
			WHERE t.session_id = ? AND c.`+callbackDue()+` LIMIT 1`, t.FromSessionID).Scan(&msg, &cbTurn)
		switch {
		case err == nil:
			return fmt.Sprintf("callback %s of turn %s is not delivered yet; wait for its delivery (or retry-callback) first", msg, cbTurn), "", nil
		case !errors.Is(err, sql.ErrNoRows):
			return "", "", err
		}
	}
	var other, status string
	err = tx.QueryRowContext(ctx, `SELECT transition_id, status FROM term_transitions WHERE terminal_key = ?
		AND `+openTransition()+` LIMIT 1`, t.TerminalKey).Scan(&other, &status)
	switch {
	case err == nil:
		return fmt.Sprintf("transition %s is %s; resolve it first (terminal resolve-transition %s --adopt|--abort)", other, status, other), "", nil
	case !errors.Is(err, sql.ErrNoRows):
		return "", "", err
	}
	prev, err = db.checkDispatchFree(ctx, tx, t.TerminalKey, "")
	if errors.Is(err, store.ErrTerminalBusy) {
		return err.Error() + " (an uncertain or unfinished dispatch); close its Turn after checking the pane", "", nil
	}
	return "", prev, err
}

// PrepareTransition implements store.TransitionStore.
func (db *DB) PrepareTransition(ctx context.Context, t *store.Transition) error {
	if err := store.CheckTransitionPrepare(t); err != nil {
		return fmt.Errorf("prepare transition: %w", err)
	}
	t.Version = 1
	data, err := json.Marshal(t)
	if err != nil {
		t.Version = 0
		return fmt.Errorf("prepare transition: %w", err)
	}
	err = db.tx(ctx, func(tx *txn) error {
		// The Session row serializes the transition with sends on it.
		if t.FromSessionID != "" {
			sess, err := db.termSession(ctx, tx, t.FromSessionID, true)
			if err != nil {
				return err
			}
			b := sess.Binding
			if sess.Status != store.SessionBound || b == nil || b.BindingID != t.FromBindingID || b.Generation != t.FromGeneration || b.TerminalKey != t.TerminalKey {
				return fmt.Errorf("session %s is no longer bound with binding %s/%d on this terminal: %w",
					t.FromSessionID, t.FromBindingID, t.FromGeneration, store.ErrConflict)
			}
		}
		if t.TargetSessionID != t.FromSessionID {
			target, err := db.termSession(ctx, tx, t.TargetSessionID, true)
			switch {
			case errors.Is(err, store.ErrNotFound):
			case err != nil:
				return err
			case target.Status == store.SessionBound:
				return fmt.Errorf("session %s of the target thread is bound to another terminal; detach it first: %w", t.TargetSessionID, store.ErrThreadBound)
			}
		}
		why, prev, err := db.unresolved(ctx, tx, t)
		if err != nil {
			return err
		}
		if why != "" {
			return fmt.Errorf("%s: %w", why, store.ErrTerminalBusy)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO term_transitions (transition_id, terminal_key, status, prepared_at, version, data)
			VALUES (?, ?, ?, ?, 1, ?)`, t.TransitionID, t.TerminalKey, t.Status, t.PreparedAt, string(data)); err != nil {
			if db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
				return fmt.Errorf("transition %s: %w", t.TransitionID, store.ErrExists)
			}
			return err
		}
		d := &store.Dispatch{TerminalKey: t.TerminalKey, GenerationID: t.TransitionID,
			PreviousGenerationID: prev, SessionID: t.FromSessionID, MessageID: t.TransitionID, MessageType: store.DispatchTransition,
			Status: termapi.DispatchPrepared, BindingID: t.FromBindingID, BindingGeneration: t.FromGeneration, PreparedAt: t.PreparedAt}
		if prev == "" {
			return db.insertDispatch(ctx, tx, d)
		}
		return db.putDispatch(ctx, tx, d)
	})
	if err != nil {
		t.Version = 0
		return fmt.Errorf("prepare transition: %w", err)
	}
	return nil
}

// GetTransition implements store.TransitionStore.
func (db *DB) GetTransition(ctx context.Context, id string) (*store.Transition, error) {
	t, err := db.transition(ctx, db.r, id, false)
	if err != nil {
		return nil, fmt.Errorf("get transition: %w", err)
	}
	return t, nil
}

// writeTransition replaces the stored transition (locked, at t.Version)
// with t after check, and moves its ledger entry to status (released when
// release is set).
func (db *DB) writeTransition(ctx context.Context, tx *txn, t *store.Transition, check func(old *store.Transition) error, status termapi.DispatchStatus, release bool) error {
	old, err := db.transition(ctx, tx, t.TransitionID, true)
	if err != nil {
		return err
	}
	if old.Version != t.Version {
		return fmt.Errorf("transition %s is at version %d, not %d: %w", t.TransitionID, old.Version, t.Version, store.ErrConflict)
	}
	if err := check(old); err != nil {
		return err
	}
	next := *t
	next.Version = t.Version + 1
	data, err := json.Marshal(&next)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE term_transitions SET status = ?, version = ?, data = ? WHERE transition_id = ?`,
		t.Status, next.Version, string(data), t.TransitionID); err != nil {
		return err
	}
	d, err := db.dispatch(ctx, tx, t.TerminalKey, true)
	if errors.Is(err, store.ErrNotFound) || (err == nil && d.GenerationID != t.TransitionID) {
		return nil // the ledger moved on (an explicit close): nothing to follow
	}
	if err != nil {
		return err
	}
	d.Status = status
	if release {
		d.ReleasedAt = t.UpdatedAt
	}
	if status == termapi.DispatchUncertain {
		d.UncertainAt = t.UpdatedAt
		d.Error = t.Reason
	}
	return db.putDispatch(ctx, tx, d)
}

// ledgerStatus is the dispatch-ledger status of a transition status.
func ledgerStatus(s string) (termapi.DispatchStatus, bool) {
	switch s {
	case store.TransitionPrepared:
		return termapi.DispatchPrepared, false
	case store.TransitionUncertain:
		return termapi.DispatchUncertain, false
	case store.TransitionAborted:
		return termapi.DispatchAborted, true
	case store.TransitionCommitted:
		return termapi.DispatchAgentAccepted, true
	}
	return termapi.DispatchDispatching, false
}

// AdvanceTransition implements store.TransitionStore.
func (db *DB) AdvanceTransition(ctx context.Context, t *store.Transition) error {
	status, release := ledgerStatus(t.Status)
	err := db.tx(ctx, func(tx *txn) error {
		return db.writeTransition(ctx, tx, t, func(old *store.Transition) error { return store.CheckTransitionAdvance(old, t) }, status, release)
	})
	if err != nil {
		return fmt.Errorf("advance transition %s: %w", t.TransitionID, err)
	}
	t.Version++
	return nil
}

// CommitTransition implements store.TransitionStore.
func (db *DB) CommitTransition(ctx context.Context, c store.TransitionCommit) error {
	t := c.Transition
	if t.Status != store.TransitionCommitted {
		return fmt.Errorf("commit transition %s: status must be committed, not %q", t.TransitionID, t.Status)
	}
	revs := make([]int64, len(c.Sessions))
	err := db.tx(ctx, func(tx *txn) error {
		err := db.writeTransition(ctx, tx, t, func(old *store.Transition) error {
			if !old.SameFixed(t) {
				return fmt.Errorf("transition %s: the fields fixed at prepare may not change: %w", t.TransitionID, store.ErrBindingRule)
			}
			if old.Status != store.TransitionVerified && old.Status != store.TransitionUncertain {
				return fmt.Errorf("transition %s is %s; only a verified or uncertain one commits: %w", t.TransitionID, old.Status, store.ErrConflict)
			}
			return nil
		}, termapi.DispatchAgentAccepted, true)
		if err != nil {
			return err
		}
		for i, s := range c.Sessions {
			var old *store.TermSession
			if s.Revision != 0 {
				if old, err = db.termSession(ctx, tx, s.SessionID, true); err != nil {
					return err
				}
				if old.Revision != s.Revision {
					return fmt.Errorf("session %s is at revision %d, not %d: %w", s.SessionID, old.Revision, s.Revision, store.ErrConflict)
				}
			}
			if err := store.CheckTransitionSessionWrite(t, old, s); err != nil {
				return err
			}
			next := *s
			next.Revision = s.Revision + 1
			data, err := json.Marshal(&next)
			if err != nil {
				return err
			}
			if old == nil {
				_, err = tx.ExecContext(ctx, `INSERT INTO term_sessions (session_id, agent, terminal_key, revision, updated_at, data)
					VALUES (?, ?, ?, 1, ?, ?)`, s.SessionID, s.Agent, terminalKeyOf(s), s.UpdatedAt, string(data))
				if err != nil && db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
					return fmt.Errorf("session %s: %w", s.SessionID, store.ErrExists)
				}
			} else {
				_, err = tx.ExecContext(ctx, `UPDATE term_sessions SET terminal_key = ?, revision = ?, updated_at = ?, data = ?
					WHERE session_id = ?`, terminalKeyOf(s), next.Revision, s.UpdatedAt, string(data), s.SessionID)
			}
			if err != nil {
				return err
			}
			if err := db.bindThread(ctx, tx, s); err != nil {
				return err
			}
			revs[i] = next.Revision
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit transition %s: %w", t.TransitionID, err)
	}
	t.Version++
	for i, s := range c.Sessions {
		s.Revision = revs[i]
	}
	return nil
}

func (db *DB) queryTransitions(ctx context.Context, q string, args ...any) ([]*store.Transition, error) {
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list transitions: %w", err)
	}
	defer rows.Close()
	var out []*store.Transition
	for rows.Next() {
		var id, data string
		var v int64
		if err := rows.Scan(&id, &v, &data); err != nil {
			return nil, fmt.Errorf("list transitions: %w", err)
		}
		t, err := decodeTransition(id, v, data)
		if err != nil {
			return nil, fmt.Errorf("list transitions: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// TerminalTransitions implements store.TransitionStore.
func (db *DB) TerminalTransitions(ctx context.Context, terminalKey string, limit int) ([]*store.Transition, error) {
	return db.queryTransitions(ctx, `SELECT transition_id, version, data FROM term_transitions WHERE terminal_key = ?
		ORDER BY prepared_at DESC, transition_id DESC LIMIT ?`, terminalKey, store.ClampPage(limit, 20))
}

// OpenTransitions implements store.TransitionStore.
func (db *DB) OpenTransitions(ctx context.Context, limit int) ([]*store.Transition, error) {
	return db.queryTransitions(ctx, `SELECT transition_id, version, data FROM term_transitions
		WHERE `+openTransition()+` ORDER BY transition_id LIMIT ?`, store.ClampPage(limit, store.MaxPage))
}
