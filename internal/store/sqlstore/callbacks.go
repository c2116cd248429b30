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

var _ store.CallbackStore = (*DB)(nil)

// GetTermSession implements store.TerminalTx.
func (t termTx) GetTermSession(ctx context.Context, id string) (*store.TermSession, error) {
	return t.db.termSession(ctx, t.tx, id, true)
}

// PutCallback implements store.TerminalTx.
func (t termTx) PutCallback(ctx context.Context, cb *store.Callback) error {
	return t.db.putCallback(ctx, t.tx, cb)
}

func (db *DB) putCallback(ctx context.Context, q termQuerier, cb *store.Callback) error {
	if cb.MessageID == "" || cb.TurnID == "" || len(cb.Message) == 0 {
		return fmt.Errorf("put callback: message id, turn id and message are required")
	}
	cur, err := db.callback(ctx, q, cb.MessageID, true)
	switch {
	case err == nil:
		if !sameJSON(cur.Message, cb.Message) || cur.TurnID != cb.TurnID || cur.SessionKey != cb.SessionKey {
			return fmt.Errorf("put callback %s: an outbox message is immutable and a different one is stored: %w", cb.MessageID, store.ErrConflict)
		}
		*cb = *cur
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	data, err := json.Marshal(cb)
	if err != nil {
		return fmt.Errorf("put callback: %w", err)
	}
	_, err = q.ExecContext(ctx, `INSERT INTO term_callbacks (message_id, turn_id, status, next_attempt_at, created_at, data)
		VALUES (?, ?, ?, ?, ?, ?)`, cb.MessageID, cb.TurnID, cb.Status, cb.NextAttemptAt, cb.CreatedAt, string(data))
	if err != nil && db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
		return fmt.Errorf("put callback %s: %w", cb.MessageID, store.ErrConflict)
	}
	return err
}

// sameJSON compares two JSON documents by their canonical re-encoding.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return string(a) == string(b)
	}
	ea, _ := json.Marshal(x)
	eb, _ := json.Marshal(y)
	return string(ea) == string(eb)
}

// callbackCols reads a callback with its attempt lease, the
// LeaseCallback row of term_leases (see callbackFrom).
const callbackCols = `c.data, c.status, c.next_attempt_at, COALESCE(l.owner, ''), COALESCE(l.fence, 0), COALESCE(l.lease_until, 0)`

// callbackFrom joins each callback to its attempt lease.
const callbackFrom = ` FROM term_callbacks c LEFT JOIN term_leases l ON l.kind = 'callback' AND l.id = c.message_id`

func scanCallback(sc scanner) (*store.Callback, error) {
	var data string
	var cb store.Callback
	var status string
	var next int64
	var owner string
	var token, until int64
	if err := sc.Scan(&data, &status, &next, &owner, &token, &until); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(data), &cb); err != nil {
		return nil, fmt.Errorf("callback has an unreadable data column: %v: %w", err, store.ErrIncompatible)
	}
	cb.Status, cb.NextAttemptAt, cb.LeaseOwner, cb.LeaseToken, cb.LeaseUntil = termapi.CallbackStatus(status), next, owner, token, until
	return &cb, nil
}

// callback reads one callback with its attempt lease; with lock, both
// rows stay locked for the rest of the transaction where the database
// can (a lock cannot reach through an outer join, so two reads).
func (db *DB) callback(ctx context.Context, q termQuerier, id string, lock bool) (*store.Callback, error) {
	if !lock {
		cb, err := scanCallback(q.QueryRowContext(ctx, `SELECT `+callbackCols+callbackFrom+` WHERE c.message_id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("callback %s: %w", id, store.ErrNotFound)
		}
		return cb, err
	}
	var data, status string
	var next int64
	err := q.QueryRowContext(ctx, `SELECT data, status, next_attempt_at FROM term_callbacks WHERE message_id = ?`+db.d.ForUpdate, id).
		Scan(&data, &status, &next)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("callback %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var cb store.Callback
	if err := json.Unmarshal([]byte(data), &cb); err != nil {
		return nil, fmt.Errorf("callback has an unreadable data column: %v: %w", err, store.ErrIncompatible)
	}
	cb.Status, cb.NextAttemptAt = termapi.CallbackStatus(status), next
	l, err := db.workLease(ctx, q, store.LeaseCallback, id, true)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	cb.LeaseOwner, cb.LeaseToken, cb.LeaseUntil = l.Owner, l.Fence, l.Until
	return &cb, nil
}

// GetCallback implements store.CallbackStore.
func (db *DB) GetCallback(ctx context.Context, messageID string) (*store.Callback, error) {
	cb, err := db.callback(ctx, db.r, messageID, false)
	if err != nil {
		return nil, fmt.Errorf("get callback: %w", err)
	}
	return cb, nil
}

func (db *DB) queryCallbacks(ctx context.Context, q string, args ...any) ([]*store.Callback, error) {
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Callback
	for rows.Next() {
		cb, err := scanCallback(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, cb)
	}
	return out, rows.Err()
}

// TurnCallbacks implements store.CallbackStore.
func (db *DB) TurnCallbacks(ctx context.Context, turnID string, limit int) ([]*store.Callback, error) {
	out, err := db.queryCallbacks(ctx, `SELECT `+callbackCols+callbackFrom+` WHERE c.turn_id = ?
		ORDER BY c.created_at DESC, c.message_id DESC LIMIT ?`, turnID, store.ClampPage(limit, store.MaxPage))
	if err != nil {
		return nil, fmt.Errorf("turn callbacks: %w", err)
	}
	return out, nil
}

// DueCallbacks implements store.CallbackStore.
func (db *DB) DueCallbacks(ctx context.Context, now int64, limit int) ([]*store.Callback, error) {
	out, err := db.queryCallbacks(ctx, `SELECT `+callbackCols+callbackFrom+`
		WHERE c.`+callbackDue()+` AND c.next_attempt_at <= ? AND COALESCE(l.lease_until, 0) < ?
		ORDER BY c.next_attempt_at, c.message_id LIMIT ?`, now, now, store.ClampPage(limit, store.MaxPage))
	if err != nil {
		return nil, fmt.Errorf("due callbacks: %w", err)
	}
	return out, nil
}

// ClaimCallback implements store.CallbackStore.
func (db *DB) ClaimCallback(ctx context.Context, messageID, owner string, now, until int64) (*store.Callback, error) {
	var cb *store.Callback
	err := db.tx(ctx, func(tx *txn) error {
		cur, err := db.callback(ctx, tx, messageID, true)
		if err != nil {
			return err
		}
		if cur.Status != termapi.CallbackPending && cur.Status != termapi.CallbackFailed {
			return fmt.Errorf("callback is %s: %w", cur.Status, store.ErrLeaseLost)
		}
		if cur.LeaseOwner != owner && cur.LeaseUntil >= now {
			return fmt.Errorf("attempt held by %s until %d: %w", cur.LeaseOwner, cur.LeaseUntil, store.ErrLeaseLost)
		}
		l, err := claimWork(ctx, tx, store.LeaseCallback, messageID, owner, now, until)
		if err != nil {
			return err
		}
		cur.LeaseOwner, cur.LeaseToken, cur.LeaseUntil = l.Owner, l.Fence, l.Until
		cb = cur
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim callback %s: %w", messageID, err)
	}
	return cb, nil
}

// SaveCallback implements store.CallbackStore.
func (db *DB) SaveCallback(ctx context.Context, cb *store.Callback) error {
	err := db.tx(ctx, func(tx *txn) error {
		cur, err := db.callback(ctx, tx, cb.MessageID, true)
		if err != nil {
			return err
		}
		if cur.LeaseOwner != cb.LeaseOwner || cur.LeaseToken != cb.LeaseToken {
			return fmt.Errorf("attempt lease (token %d) is now %s's token %d: %w", cb.LeaseToken, cur.LeaseOwner, cur.LeaseToken, store.ErrLeaseLost)
		}
		next := *cb
		next.Message = cur.Message
		data, err := json.Marshal(&next)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE term_callbacks SET status = ?, next_attempt_at = ?, data = ?
			WHERE message_id = ?`, cb.Status, cb.NextAttemptAt, string(data), cb.MessageID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE term_leases SET lease_until = ? WHERE kind = 'callback' AND id = ?`+FenceCond,
			cb.LeaseUntil, cb.MessageID, cb.LeaseToken)
		return err
	})
	if err != nil {
		return fmt.Errorf("save callback %s: %w", cb.MessageID, err)
	}
	return nil
}

// RearmCallback implements store.CallbackStore.
func (db *DB) RearmCallback(ctx context.Context, messageID string, now int64) (*store.Callback, error) {
	var out *store.Callback
	err := db.tx(ctx, func(tx *txn) error {
		cur, err := db.callback(ctx, tx, messageID, true)
		if err != nil {
			return err
		}
		out = cur
		if cur.Status != termapi.CallbackFailed && cur.Status != termapi.CallbackExhausted {
			return nil
		}
		cur.Status, cur.Attempts, cur.NextAttemptAt, cur.UpdatedAt = termapi.CallbackPending, 0, now, now
		cur.ManualRetries++
		data, err := json.Marshal(cur)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE term_callbacks SET status = ?, next_attempt_at = ?, data = ?
			WHERE message_id = ?`, cur.Status, now, string(data), messageID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE term_leases SET lease_until = 0 WHERE kind = 'callback' AND id = ?`, messageID)
		cur.LeaseUntil = 0
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("rearm callback: %w", err)
	}
	return out, nil
}
