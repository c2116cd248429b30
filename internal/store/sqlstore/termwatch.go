package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/clawconnect/clawconnect/internal/store"
)

var _ store.WatchStore = (*DB)(nil)

const watchCols = `revision, data`

func scanWatch(sc scanner) (*store.Watch, error) {
	var rev int64
	var data string
	if err := sc.Scan(&rev, &data); err != nil {
		return nil, err
	}
	var w store.Watch
	if err := json.Unmarshal([]byte(data), &w); err != nil {
		return nil, fmt.Errorf("watch has an unreadable data column: %v: %w", err, store.ErrIncompatible)
	}
	w.Revision = rev
	return &w, nil
}

func (db *DB) termWatch(ctx context.Context, q termQuerier, id string, lock bool) (*store.Watch, error) {
	stmt := `SELECT ` + watchCols + ` FROM term_watches WHERE watch_id = ?`
	if lock {
		stmt += db.d.ForUpdate
	}
	w, err := scanWatch(q.QueryRowContext(ctx, stmt, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("watch %s: %w", id, store.ErrNotFound)
	}
	return w, err
}

// CreateWatch implements store.WatchStore.
func (db *DB) CreateWatch(ctx context.Context, w *store.Watch) error {
	switch {
	case w.Revision != 0:
		return fmt.Errorf("create watch %s: revision must be 0 for a new watch", w.WatchID)
	case !strings.HasPrefix(w.WatchID, "watch-"):
		return fmt.Errorf("create watch %q: ids start with watch-", w.WatchID)
	case w.TerminalKey == "" || w.Agent == "":
		return fmt.Errorf("create watch %s: terminal key and agent are required", w.WatchID)
	case w.Status != store.WatchActive:
		return fmt.Errorf("create watch %s: a new watch is active, not %q", w.WatchID, w.Status)
	}
	w.Revision = 1
	data, err := json.Marshal(w)
	if err != nil {
		w.Revision = 0
		return fmt.Errorf("create watch: %w", err)
	}
	err = db.tx(ctx, func(tx *txn) error {
		if _, err := db.termWatch(ctx, tx, w.WatchID, false); err == nil {
			return fmt.Errorf("watch %s: %w", w.WatchID, store.ErrExists)
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO term_watches (watch_id, terminal_key, status, revision, created_at, data)
			VALUES (?, ?, ?, 1, ?, ?)`, w.WatchID, w.TerminalKey, w.Status, w.CreatedAt, string(data))
		if err != nil && db.d.IsUniqueViolation != nil && db.d.IsUniqueViolation(err) {
			return fmt.Errorf("terminal %s: %w", w.TerminalKey, store.ErrWatched)
		}
		return err
	})
	if err != nil {
		w.Revision = 0
		return fmt.Errorf("create watch: %w", db.classify(err))
	}
	return nil
}

// GetWatch implements store.WatchStore.
func (db *DB) GetWatch(ctx context.Context, id string) (*store.Watch, error) {
	w, err := db.termWatch(ctx, db.r, id, false)
	if err != nil {
		return nil, fmt.Errorf("get watch: %w", err)
	}
	return w, nil
}

// SaveWatch implements store.WatchStore.
func (db *DB) SaveWatch(ctx context.Context, ww store.WatchWrite) error {
	w := ww.Watch
	if !store.ValidWatchStatus(w.Status) {
		return fmt.Errorf("save watch %s: invalid status %q", w.WatchID, w.Status)
	}
	next := *w
	next.Revision = w.Revision + 1
	data, err := json.Marshal(&next)
	if err != nil {
		return fmt.Errorf("save watch: %w", err)
	}
	err = db.tx(ctx, func(tx *txn) error {
		if ww.Fence != nil {
			if err := db.checkFence(ctx, tx, store.LeaseWatch, w.WatchID, *ww.Fence); err != nil {
				return err
			}
		}
		cur, err := db.termWatch(ctx, tx, w.WatchID, true)
		if err != nil {
			return err
		}
		if cur.Revision != w.Revision {
			return fmt.Errorf("watch %s changed since revision %d: %w", w.WatchID, w.Revision, store.ErrConflict)
		}
		if cur.Status != store.WatchActive && cur.Status != w.Status {
			return fmt.Errorf("watch %s is %s, a final status: %w", w.WatchID, cur.Status, store.ErrConflict)
		}
		if cur.TerminalKey != w.TerminalKey || cur.Agent != w.Agent || cur.CreatedAt != w.CreatedAt {
			return fmt.Errorf("watch %s: terminal, agent and created_at are immutable: %w", w.WatchID, store.ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE term_watches SET status = ?, revision = ?, data = ? WHERE watch_id = ? AND revision = ?`,
			w.Status, next.Revision, string(data), w.WatchID, w.Revision); err != nil {
			return err
		}
		if ww.Also != nil {
			return ww.Also(ctx, termTx{db, tx})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save watch %s: %w", w.WatchID, db.classify(err))
	}
	w.Revision = next.Revision
	return nil
}

func (db *DB) queryWatches(ctx context.Context, q string, args ...any) ([]*store.Watch, error) {
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*store.Watch
	for rows.Next() {
		w, err := scanWatch(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// ActiveWatches implements store.WatchStore.
func (db *DB) ActiveWatches(ctx context.Context, limit int) ([]*store.Watch, error) {
	out, err := db.queryWatches(ctx, `SELECT `+watchCols+` FROM term_watches WHERE `+activeWatch()+`
		ORDER BY created_at, watch_id LIMIT ?`, store.ClampPage(limit, store.MaxPage))
	if err != nil {
		return nil, fmt.Errorf("active watches: %w", err)
	}
	return out, nil
}

// TerminalWatches implements store.WatchStore.
func (db *DB) TerminalWatches(ctx context.Context, terminalKey string, limit int) ([]*store.Watch, error) {
	out, err := db.queryWatches(ctx, `SELECT `+watchCols+` FROM term_watches WHERE terminal_key = ?
		ORDER BY created_at DESC, watch_id DESC LIMIT ?`, terminalKey, store.ClampPage(limit, store.MaxPage))
	if err != nil {
		return nil, fmt.Errorf("terminal watches: %w", err)
	}
	return out, nil
}
