package codex

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	_ "modernc.org/sqlite" // the driver of Codex's state database reads
)

// StateThread is one row of the threads table of Codex's state database
// ($CODEX_HOME/state_N.sqlite, written by Codex 0.171.0 next to the
// rollouts).
type StateThread struct {
	ID          string
	RolloutPath string
	Title       string
	FirstPrompt string
	// CreatedAt and UpdatedAt are Unix seconds.
	CreatedAt int64
	UpdatedAt int64
}

var stateDBName = lazyRE(`^state_(\d+)\.sqlite$`)

// StateDBPath returns the state database with the highest schema number in
// codexHome, or "" when there is none.
func StateDBPath(codexHome string) string {
	ents, err := os.ReadDir(codexHome)
	if err != nil {
		return ""
	}
	best, bestN := "", -1
	for _, e := range ents {
		m := stateDBName().FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		if n, err := strconv.Atoi(m[1]); err == nil && n > bestN {
			best, bestN = filepath.Join(codexHome, e.Name()), n
		}
	}
	return best
}

// ReadStateThreads reads the state database's threads of workspace cwd
// (read-only; the database is Codex's, never written). No database is no
// rows and no error.
func ReadStateThreads(ctx context.Context, codexHome, cwd string) ([]StateThread, error) {
	path := StateDBPath(codexHome)
	if path == "" {
		return nil, nil
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_pragma=query_only(1)&_pragma=busy_timeout(250)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open codex state database %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `select id, coalesce(rollout_path, ''), coalesce(title, ''), coalesce(first_user_message, ''),
		coalesce(created_at, 0), coalesce(updated_at, 0) from threads where cwd = ?`, cwd)
	if err != nil {
		return nil, fmt.Errorf("read codex state database %s: %w", path, err)
	}
	defer rows.Close()
	var out []StateThread
	for rows.Next() {
		var t StateThread
		if err := rows.Scan(&t.ID, &t.RolloutPath, &t.Title, &t.FirstPrompt, &t.CreatedAt, &t.UpdatedAt); err != nil {
			return nil, fmt.Errorf("read codex state database %s: %w", path, err)
		}
		t.ID = strings.ToLower(t.ID)
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read codex state database %s: %w", path, err)
	}
	return out, nil
}
