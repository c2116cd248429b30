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

var _ store.TerminalHosts = (*DB)(nil)

// PublishTerminalHost implements store.TerminalHosts.
func (db *DB) PublishTerminalHost(ctx context.Context, h store.TerminalHost) error {
	if h.Host == "" || h.Owner == "" {
		return fmt.Errorf("publish terminal host: host and owner are required")
	}
	panes := string(h.Panes)
	if panes == "" {
		panes = "[]"
	}
	_, err := db.w.ExecContext(ctx, `INSERT INTO term_hosts (host, owner, published_at, panes) VALUES (?, ?, ?, ?)
		ON CONFLICT (host) DO UPDATE SET owner = excluded.owner, published_at = excluded.published_at, panes = excluded.panes`,
		h.Host, h.Owner, h.PublishedAt, panes)
	if err != nil {
		return fmt.Errorf("publish terminal host %s: %w", h.Host, db.classify(err))
	}
	return nil
}

// TerminalHostList implements store.TerminalHosts.
func (db *DB) TerminalHostList(ctx context.Context) ([]store.TerminalHost, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT host, owner, published_at, panes FROM term_hosts ORDER BY host`)
	if err != nil {
		return nil, fmt.Errorf("terminal hosts: %w", err)
	}
	defer rows.Close()
	var out []store.TerminalHost
	for rows.Next() {
		var h store.TerminalHost
		var panes string
		if err := rows.Scan(&h.Host, &h.Owner, &h.PublishedAt, &panes); err != nil {
			return nil, fmt.Errorf("terminal hosts: %w", err)
		}
		h.Panes = json.RawMessage(panes)
		out = append(out, h)
	}
	return out, rows.Err()
}

// PutHostOp implements store.TerminalHosts.
func (db *DB) PutHostOp(ctx context.Context, op *store.HostOp) error {
	if op.OpID == "" || op.Host == "" || op.Op == "" {
		return fmt.Errorf("put host op: id, host and op are required")
	}
	op.Status = store.HostOpPending
	data, err := json.Marshal(op)
	if err != nil {
		return fmt.Errorf("put host op: %w", err)
	}
	_, err = db.w.ExecContext(ctx, `INSERT INTO term_host_ops (op_id, host, status, created_at, data) VALUES (?, ?, ?, ?, ?)`,
		op.OpID, op.Host, op.Status, op.CreatedAt, string(data))
	if err != nil && db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
		return fmt.Errorf("put host op %s: %w", op.OpID, store.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("put host op %s: %w", op.OpID, db.classify(err))
	}
	return nil
}

// PendingHostOps implements store.TerminalHosts.
func (db *DB) PendingHostOps(ctx context.Context, host string, now int64, limit int) ([]*store.HostOp, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT data FROM term_host_ops WHERE host = ? AND `+pendingHostOp()+` AND claimed_until < ?
		ORDER BY created_at, op_id LIMIT ?`, host, now, store.ClampPage(limit, store.MaxPage))
	if err != nil {
		return nil, fmt.Errorf("pending host ops: %w", err)
	}
	defer rows.Close()
	var out []*store.HostOp
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return nil, fmt.Errorf("pending host ops: %w", err)
		}
		var op store.HostOp
		if err := json.Unmarshal([]byte(data), &op); err != nil {
			return nil, fmt.Errorf("pending host ops: decode: %w", err)
		}
		out = append(out, &op)
	}
	return out, rows.Err()
}

// ClaimHostOp implements store.TerminalHosts.
func (db *DB) ClaimHostOp(ctx context.Context, id, owner string, now, until int64) error {
	res, err := db.w.ExecContext(ctx, `UPDATE term_host_ops SET claimed_by = ?, claimed_until = ?
		WHERE op_id = ? AND `+pendingHostOp()+` AND (claimed_until < ? OR claimed_by = ?)`, owner, until, id, now, owner)
	if err != nil {
		return fmt.Errorf("claim host op %s: %w", id, db.classify(err))
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	cur, err := db.GetHostOp(ctx, id)
	if err != nil {
		return fmt.Errorf("claim host op %s: %w", id, err)
	}
	if cur.Status != store.HostOpPending {
		return fmt.Errorf("claim host op %s: it is %s: %w", id, cur.Status, store.ErrConflict)
	}
	return fmt.Errorf("claim host op %s: another process runs it: %w", id, store.ErrLeaseLost)
}

// FinishHostOp implements store.TerminalHosts.
func (db *DB) FinishHostOp(ctx context.Context, op *store.HostOp, owner string) error {
	done := *op
	done.Status = store.HostOpDone
	data, err := json.Marshal(&done)
	if err != nil {
		return fmt.Errorf("finish host op: %w", err)
	}
	res, err := db.w.ExecContext(ctx, `UPDATE term_host_ops SET status = '`+store.HostOpDone+`', claimed_until = 0, data = ?
		WHERE op_id = ? AND `+pendingHostOp()+` AND claimed_by = ?`, string(data), op.OpID, owner)
	if err != nil {
		return fmt.Errorf("finish host op %s: %w", op.OpID, db.classify(err))
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("finish host op %s: done already or claimed by another process: %w", op.OpID, store.ErrConflict)
	}
	*op = done
	return nil
}

// GetHostOp implements store.TerminalHosts.
func (db *DB) GetHostOp(ctx context.Context, id string) (*store.HostOp, error) {
	var data string
	err := db.r.QueryRowContext(ctx, `SELECT data FROM term_host_ops WHERE op_id = ?`, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("host op %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("host op %s: %w", id, err)
	}
	var op store.HostOp
	if err := json.Unmarshal([]byte(data), &op); err != nil {
		return nil, fmt.Errorf("host op %s: decode: %w", id, err)
	}
	return &op, nil
}

// TurnIDsWithStatus implements store.TerminalHosts.
func (db *DB) TurnIDsWithStatus(ctx context.Context, status termapi.TurnStatus, limit int) ([]string, error) {
	ids, err := db.queryIDs(ctx, `SELECT turn_id FROM term_turns WHERE status = ? ORDER BY turn_id LIMIT ?`,
		status, store.ClampPage(limit, store.MaxPage))
	if err != nil {
		return nil, fmt.Errorf("turn ids with status %s: %w", status, err)
	}
	return ids, nil
}
