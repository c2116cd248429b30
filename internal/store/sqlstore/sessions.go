package sqlstore

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/clawconnect/clawconnect/internal/store"
)

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
