package sqlstore

import (
	"context"
	"fmt"

	"github.com/clawconnect/clawconnect/internal/store"
)

// versionCols names, per store.Version* kind, the table, key and version
// column Versions reads.
var versionCols = map[string][3]string{
	store.VersionTurn:     {"term_turns", "turn_id", "version"},
	store.VersionSession:  {"term_sessions", "session_id", "revision"},
	store.VersionWatch:    {"term_watches", "watch_id", "revision"},
	store.VersionDispatch: {"term_dispatch", "terminal_key", "version"},
}

// Versions implements store.TerminalStore: one indexed read per chunk of
// ids, no record decoded.
func (db *DB) Versions(ctx context.Context, kind string, ids []string) (map[string]int64, error) {
	c, ok := versionCols[kind]
	if !ok {
		return nil, fmt.Errorf("read versions: unknown record kind %q", kind)
	}
	out := make(map[string]int64, len(ids))
	for chunk := range chunks(ids) {
		list, args := inList(chunk)
		rows, err := db.r.QueryContext(ctx, `SELECT `+c[1]+`, `+c[2]+` FROM `+c[0]+` WHERE `+c[1]+` IN `+list, args...)
		if err != nil {
			return nil, fmt.Errorf("read %s versions: %w", kind, err)
		}
		for rows.Next() {
			var id string
			var v int64
			if err := rows.Scan(&id, &v); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read %s versions: %w", kind, err)
			}
			out[id] = v
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s versions: %w", kind, err)
		}
	}
	return out, nil
}

// OpenTurnIDs implements store.TerminalStore.
func (db *DB) OpenTurnIDs(ctx context.Context, limit int) ([]string, error) {
	ids, err := db.queryIDs(ctx, `SELECT turn_id FROM term_turns WHERE `+openTurn()+`
		ORDER BY turn_id LIMIT ?`, store.ClampPage(limit, store.MaxPage))
	if err != nil {
		return nil, fmt.Errorf("open turn ids: %w", err)
	}
	return ids, nil
}

// ActiveWatchIDs implements store.WatchStore.
func (db *DB) ActiveWatchIDs(ctx context.Context, limit int) ([]string, error) {
	ids, err := db.queryIDs(ctx, `SELECT watch_id FROM term_watches WHERE `+activeWatch()+`
		ORDER BY created_at, watch_id LIMIT ?`, store.ClampPage(limit, store.MaxPage))
	if err != nil {
		return nil, fmt.Errorf("active watch ids: %w", err)
	}
	return ids, nil
}

func (db *DB) queryIDs(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := db.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
