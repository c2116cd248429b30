package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/clawconnect/clawconnect/internal/store"
)

var _ store.WorkLeases = (*DB)(nil)

// termLeases is the lease table of terminal work (store.WorkLease): every
// kind shares it, so renewal and release of one kind are LeaseTable calls
// on it, and a dead owner's release is one statement for all kinds.
// Only held rows count: a released or never-claimed lease is not renewed.
func termLeases(kind string) LeaseTable {
	return LeaseTable{Name: "term_leases", Active: "kind = '" + kind + "' AND lease_until > 0"}
}

// allTermLeases is every held row of term_leases, whatever its kind.
var allTermLeases = LeaseTable{Name: "term_leases", Active: "lease_until > 0"}

func validKind(kind string) error {
	for _, k := range store.LeaseKinds() {
		if k == kind {
			return nil
		}
	}
	return fmt.Errorf("unknown work lease kind %q", kind)
}

// claimWorkQ takes a lease if it was never taken, expired or is the
// claimer's own, in one conditional write.
const claimWorkQ = `INSERT INTO term_leases (kind, id, owner, lease_until, fence) VALUES (?, ?, ?, ?, 1)
	ON CONFLICT (kind, id) DO UPDATE SET owner = excluded.owner, lease_until = excluded.lease_until, fence = term_leases.fence + 1
	WHERE term_leases.lease_until < ? OR term_leases.owner = excluded.owner
	RETURNING fence`

// claimWork runs claimWorkQ on q (the writer or a transaction).
func claimWork(ctx context.Context, q termQuerier, kind, id, owner string, now, until int64) (store.WorkLease, error) {
	l := store.WorkLease{Kind: kind, ID: id, Owner: owner, Until: until}
	err := q.QueryRowContext(ctx, claimWorkQ, kind, id, owner, until, now).Scan(&l.Fence)
	if errors.Is(err, sql.ErrNoRows) {
		return store.WorkLease{}, store.ErrLeaseLost
	}
	return l, err
}

// ClaimWork implements store.WorkLeases. It reads the lease first: a
// claim of work another process follows, the common case of a rescan,
// then takes no write lock.
func (db *DB) ClaimWork(ctx context.Context, kind, id, owner string, now, until int64) (store.WorkLease, error) {
	if err := validKind(kind); err != nil {
		return store.WorkLease{}, fmt.Errorf("claim %s lease: %w", kind, err)
	}
	if owner == "" || id == "" {
		return store.WorkLease{}, fmt.Errorf("claim %s lease: id and owner are required", kind)
	}
	cur, err := db.workLease(ctx, db.r, kind, id, false)
	switch {
	case err == nil && cur.Owner != owner && cur.Until >= now:
		return store.WorkLease{}, fmt.Errorf("claim %s lease of %s: held by %s until %d: %w", kind, id, cur.Owner, cur.Until, store.ErrLeaseLost)
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return store.WorkLease{}, fmt.Errorf("claim %s lease of %s: %w", kind, id, err)
	}
	l, err := claimWork(ctx, db.w, kind, id, owner, now, until)
	if err != nil {
		return store.WorkLease{}, fmt.Errorf("claim %s lease of %s: %w", kind, id, db.classify(err))
	}
	return l, nil
}

// RenewWork implements store.WorkLeases.
func (db *DB) RenewWork(ctx context.Context, kind, owner string, until int64, ids []string) ([]string, error) {
	if err := validKind(kind); err != nil {
		return nil, fmt.Errorf("renew %s leases: %w", kind, err)
	}
	return db.RenewRows(ctx, termLeases(kind), owner, until, ids)
}

// ReleaseWork implements store.WorkLeases.
func (db *DB) ReleaseWork(ctx context.Context, l store.WorkLease) error {
	if l.Owner == "" {
		return nil // nothing was claimed
	}
	_, err := db.w.ExecContext(ctx, `UPDATE term_leases SET lease_until = 0 WHERE kind = ? AND id = ? AND owner = ?`+FenceCond,
		l.Kind, l.ID, l.Owner, l.Fence)
	if err != nil {
		return fmt.Errorf("release %s lease of %s: %w", l.Kind, l.ID, db.classify(err))
	}
	return nil
}

// workLease reads one lease (locked where the database can when lock).
func (db *DB) workLease(ctx context.Context, q termQuerier, kind, id string, lock bool) (store.WorkLease, error) {
	l := store.WorkLease{Kind: kind, ID: id}
	stmt := `SELECT owner, fence, lease_until FROM term_leases WHERE kind = ? AND id = ?`
	if lock {
		stmt += db.d.ForUpdate
	}
	err := q.QueryRowContext(ctx, stmt, kind, id).Scan(&l.Owner, &l.Fence, &l.Until)
	if errors.Is(err, sql.ErrNoRows) {
		return l, store.ErrNotFound
	}
	return l, err
}

// WorkLeases implements store.WorkLeases.
func (db *DB) WorkLeases(ctx context.Context, kind string, ids []string) ([]store.WorkLease, error) {
	found := make(map[string]store.WorkLease, len(ids))
	for chunk := range chunks(ids) {
		list, args := inList(chunk)
		out, err := db.queryWorkLeases(ctx, `SELECT kind, id, owner, fence, lease_until FROM term_leases
			WHERE kind = ? AND id IN `+list, append([]any{kind}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("read %s leases: %w", kind, err)
		}
		for _, l := range out {
			found[l.ID] = l
		}
	}
	var out []store.WorkLease
	for _, id := range ids {
		if l, ok := found[id]; ok {
			out = append(out, l)
		}
	}
	return out, nil
}

func (db *DB) queryWorkLeases(ctx context.Context, q string, args ...any) ([]store.WorkLease, error) {
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.WorkLease
	for rows.Next() {
		var l store.WorkLease
		if err := rows.Scan(&l.Kind, &l.ID, &l.Owner, &l.Fence, &l.Until); err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// checkFence fails with store.ErrLeaseLost unless f still holds kind's
// lease of id at f.Now; it locks the lease row for the rest of tx.
func (db *DB) checkFence(ctx context.Context, tx termQuerier, kind, id string, f store.Fence) error {
	l, err := db.workLease(ctx, tx, kind, id, true)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%s lease of %s: never claimed: %w", kind, id, store.ErrLeaseLost)
	}
	if err != nil {
		return err
	}
	if l.Owner != f.Owner || l.Fence != f.Token || l.Until < f.Now {
		return fmt.Errorf("%s lease of %s (fence %d) is held by %s with fence %d: %w", kind, id, f.Token, l.Owner, l.Fence, store.ErrLeaseLost)
	}
	return nil
}
