package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/clawconnect/clawconnect/internal/store"
)

// LeaseTable names a table whose rows are followed under leases, one live
// process per row: the running tasks, and term_leases, where each piece of
// terminal work (a Turn's monitor, a watch's follower, a callback's
// delivery attempt, a transition) is one row. The table has a TEXT key
// column "id" and the columns
//
//	owner       TEXT   NOT NULL DEFAULT ''   -- the follower's process id (store.Process.ID)
//	lease_until BIGINT NOT NULL DEFAULT 0    -- Unix ms; expired = claimable
//	fence       BIGINT NOT NULL DEFAULT 1    -- fencing token, raised by each claim
//
// and a partial index on (owner, id) WHERE <Active>, plus one on
// (lease_until, id) WHERE <Active> for claims. A follower claims rows
// (ClaimRows: expired ones, fence raised), renews and releases exactly the
// rows it follows (RenewRows, ReleaseRows), and adds FenceCond with the
// token its claim returned to every write of the row; a write that matches
// nothing on a row whose fence moved on is store.ErrLeaseLost. A process
// proven dead (owner.Identity.Dead) has ReleaseRows(owner, nil) applied to
// each lease table.
type LeaseTable struct {
	// Name is the table.
	Name string
	// Active is the SQL condition of a row that still needs a follower
	// ("status = 'running'").
	Active string
}

// FenceCond is the condition every write of a follower adds, with its
// fencing token as the argument.
const FenceCond = " AND fence = ?"

// Lease is one row a claim took: its key and the new fencing token.
type Lease struct {
	ID    string
	Fence int64
}

// tasksTable is the tasks' LeaseTable.
func tasksTable() LeaseTable { return LeaseTable{Name: "tasks", Active: runningTask()} }

// idChunk and bigChunk are how many ids one renewal, release or batched
// read statement names: a list of up to idChunk ids is padded to
// idChunk, a longer one goes in statements of bigChunk (the last padded),
// so every statement has one of two fixed shapes and stays prepared,
// while a host renewing or probing a thousand rows needs two statements,
// not thirty. Both stay far below the parameter limits of SQLite (32766)
// and PostgreSQL (65535).
const (
	idChunk  = 32
	bigChunk = 512
)

// inList returns "(?, ?, …)" for the shape of ids (idChunk when
// len(ids) ≤ idChunk, else bigChunk; len(ids) ≤ bigChunk, at least one)
// and the padded arguments.
func inList(ids []string) (string, []any) {
	n := idChunk
	if len(ids) > idChunk {
		n = bigChunk
	}
	args := make([]any, n)
	for i := range args {
		if i < len(ids) {
			args[i] = ids[i]
		} else {
			args[i] = ids[0]
		}
	}
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")", args
}

// ClaimRows leases to owner (until until) up to limit active rows of lt
// whose lease expired before now, raising their fence, and returns them.
func (db *DB) ClaimRows(ctx context.Context, lt LeaseTable, owner string, now, until int64, limit int) ([]Lease, error) {
	if owner == "" {
		return nil, errors.New("claim rows: owner is required")
	}
	// Most claims find nothing: a read says so without taking the write
	// lock every process sharing a SQLite file contends for.
	var any int
	err := db.r.QueryRowContext(ctx, `SELECT 1 FROM `+lt.Name+` WHERE `+lt.Active+` AND lease_until < ? LIMIT 1`, now).Scan(&any)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", lt.Name, err)
	}
	rows, err := db.w.QueryContext(ctx, `UPDATE `+lt.Name+` SET owner = ?, lease_until = ?, fence = fence + 1 WHERE id IN (
		SELECT id FROM `+lt.Name+` WHERE `+lt.Active+` AND lease_until < ? ORDER BY lease_until, id LIMIT ?`+db.d.SkipLocked+`)
		RETURNING id, fence`, owner, until, now, store.ClampPage(limit, store.MaxPage))
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", lt.Name, db.classify(err))
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		if err := rows.Scan(&l.ID, &l.Fence); err != nil {
			return nil, fmt.Errorf("claim %s: %w", lt.Name, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claim %s: %w", lt.Name, db.classify(err))
	}
	return out, nil
}

// RenewRows extends to until the leases owner holds on the active rows of
// lt that ids names, and returns the ids it no longer holds.
func (db *DB) RenewRows(ctx context.Context, lt LeaseTable, owner string, until int64, ids []string) ([]string, error) {
	if owner == "" {
		return nil, errors.New("renew leases: owner is required")
	}
	held := make(map[string]bool, len(ids))
	for chunk := range chunks(ids) {
		list, args := inList(chunk)
		rows, err := db.w.QueryContext(ctx, `UPDATE `+lt.Name+` SET lease_until = ?
			WHERE owner = ? AND `+lt.Active+` AND id IN `+list+` RETURNING id`,
			append([]any{until, owner}, args...)...)
		if err != nil {
			return nil, fmt.Errorf("renew leases: %w", db.classify(err))
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("renew leases: %w", err)
			}
			held[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("renew leases: %w", db.classify(err))
		}
	}
	var lost []string
	for _, id := range ids {
		if !held[id] {
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// ReleaseRows ends now the leases owner holds on the active rows of lt
// that ids names (all of owner's when ids is nil) and returns how many.
func (db *DB) ReleaseRows(ctx context.Context, lt LeaseTable, owner string, ids []string) (int, error) {
	if owner == "" {
		return 0, errors.New("release leases: owner is required")
	}
	if ids == nil {
		res, err := db.w.ExecContext(ctx, `UPDATE `+lt.Name+` SET lease_until = 0 WHERE owner = ? AND `+lt.Active, owner)
		if err != nil {
			return 0, fmt.Errorf("release leases: %w", db.classify(err))
		}
		n, err := res.RowsAffected()
		return int(n), err
	}
	total := 0
	for chunk := range chunks(ids) {
		list, args := inList(chunk)
		res, err := db.w.ExecContext(ctx, `UPDATE `+lt.Name+` SET lease_until = 0
			WHERE owner = ? AND `+lt.Active+` AND id IN `+list, append([]any{owner}, args...)...)
		if err != nil {
			return total, fmt.Errorf("release leases: %w", db.classify(err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("release leases: %w", err)
		}
		total += int(n)
	}
	return total, nil
}

// RenewLeases implements store.Store.
func (db *DB) RenewLeases(ctx context.Context, owner string, until int64, ids []string) ([]string, error) {
	return db.RenewRows(ctx, tasksTable(), owner, until, ids)
}

// ReleaseLeases implements store.Store. With ids nil it also ends every
// terminal work lease the owner holds (Turn monitors, watch followers,
// callback delivery attempts, transitions), so whoever proves a process
// dead (a task manager or a terminal host) frees everything it followed at
// once. A freed lease stays fenced: the next claim raises its fence, so
// the dead owner's writes could never land.
func (db *DB) ReleaseLeases(ctx context.Context, owner string, ids []string) (int, error) {
	n, err := db.ReleaseRows(ctx, tasksTable(), owner, ids)
	if err != nil || ids != nil {
		return n, err
	}
	m, err := db.ReleaseRows(ctx, allTermLeases, owner, nil)
	if err != nil {
		return n, fmt.Errorf("release terminal work leases of %s: %w", owner, err)
	}
	return n + m, nil
}

// chunks yields ids in slices of at most bigChunk.
func chunks(ids []string) func(yield func([]string) bool) {
	return func(yield func([]string) bool) {
		for len(ids) > 0 {
			n := min(len(ids), bigChunk)
			if !yield(ids[:n]) {
				return
			}
			ids = ids[n:]
		}
	}
}

// Heartbeat implements store.ProcessRegistry.
func (db *DB) Heartbeat(ctx context.Context, p store.Process) error {
	if p.ID == "" {
		return errors.New("heartbeat: process id is required")
	}
	_, err := db.w.ExecContext(ctx, `INSERT INTO processes (id, host, pid, start_id, role, started_at, heartbeat_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
		start_id = excluded.start_id, role = excluded.role, heartbeat_at = excluded.heartbeat_at`,
		p.ID, p.Host, p.PID, p.Start, p.Role, p.StartedAt, p.HeartbeatAt)
	if err != nil {
		return fmt.Errorf("heartbeat: %w", db.classify(err))
	}
	return nil
}

// Processes implements store.ProcessRegistry.
func (db *DB) Processes(ctx context.Context) ([]store.Process, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id, host, pid, start_id, role, started_at, heartbeat_at
		FROM processes ORDER BY started_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []store.Process
	for rows.Next() {
		var p store.Process
		if err := rows.Scan(&p.ID, &p.Host, &p.PID, &p.Start, &p.Role, &p.StartedAt, &p.HeartbeatAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list processes: %w", err)
		}
		out = append(out, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	for i := range out {
		ids, err := db.heldTasks(ctx, out[i].ID)
		if err != nil {
			return nil, fmt.Errorf("list processes: %w", err)
		}
		out[i].Tasks = ids
	}
	return out, nil
}

// heldTasks returns up to store.MaxPage running tasks owner holds.
func (db *DB) heldTasks(ctx context.Context, owner string) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT id FROM tasks WHERE owner = ? AND `+runningTask()+` ORDER BY id LIMIT ?`,
		owner, store.MaxPage)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// RemoveProcess implements store.ProcessRegistry.
func (db *DB) RemoveProcess(ctx context.Context, id string) error {
	if _, err := db.w.ExecContext(ctx, `DELETE FROM processes WHERE id = ?`, id); err != nil {
		return fmt.Errorf("remove process %s: %w", id, db.classify(err))
	}
	return nil
}
