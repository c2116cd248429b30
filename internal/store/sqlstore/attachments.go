package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/clawconnect/clawconnect/internal/store"
)

// LoadAttachments implements store.Store.
func (db *DB) LoadAttachments(ctx context.Context, agent, sessionKey string) (*store.AttachmentState, error) {
	s := &store.AttachmentState{Agent: agent, SessionKey: sessionKey}
	err := db.r.QueryRowContext(ctx, `SELECT current_id, version FROM attachment_sessions WHERE agent = ? AND session_key = ?`,
		agent, sessionKey).Scan(&s.CurrentID, &s.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load attachments: %w", err)
	}
	rows, err := db.r.QueryContext(ctx, `SELECT id, seq, observation_token, data FROM attachments
		WHERE agent = ? AND session_key = ? ORDER BY seq`, agent, sessionKey)
	if err != nil {
		return nil, fmt.Errorf("load attachments: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r store.AttachmentRecord
		var data string
		if err := rows.Scan(&r.ID, &r.Seq, &r.ObservationToken, &data); err != nil {
			return nil, fmt.Errorf("load attachments: %w", err)
		}
		r.Data = []byte(data)
		s.Records = append(s.Records, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load attachments: %w", err)
	}
	return s, nil
}

// SaveAttachments implements store.Store.
func (db *DB) SaveAttachments(ctx context.Context, w store.AttachmentWrite) (int64, error) {
	err := db.tx(ctx, func(tx *txn) error {
		var res sql.Result
		var err error
		if w.ExpectVersion == 0 {
			res, err = tx.ExecContext(ctx, `INSERT INTO attachment_sessions (agent, session_key, current_id, version)
				VALUES (?, ?, ?, 1) ON CONFLICT (agent, session_key) DO NOTHING`, w.Agent, w.SessionKey, w.CurrentID)
		} else {
			res, err = tx.ExecContext(ctx, `UPDATE attachment_sessions SET current_id = ?, version = version + 1
				WHERE agent = ? AND session_key = ? AND version = ?`, w.CurrentID, w.Agent, w.SessionKey, w.ExpectVersion)
		}
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return store.ErrConflict
		}
		for _, r := range w.Records {
			if _, err := tx.ExecContext(ctx, `INSERT INTO attachments (agent, session_key, id, seq, observation_token, data)
				VALUES (?, ?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM attachments WHERE agent = ? AND session_key = ?), ?, ?)
				ON CONFLICT (agent, session_key, id)
				DO UPDATE SET observation_token = excluded.observation_token, data = excluded.data`,
				w.Agent, w.SessionKey, r.ID, w.Agent, w.SessionKey, r.ObservationToken, string(r.Data)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("save attachments: %w", err)
	}
	return w.ExpectVersion + 1, nil
}

// MaxObservationToken implements store.Store.
func (db *DB) MaxObservationToken(ctx context.Context) (int64, error) {
	var n sql.NullInt64
	if err := db.r.QueryRowContext(ctx, `SELECT MAX(observation_token) FROM attachments`).Scan(&n); err != nil {
		return 0, fmt.Errorf("max observation token: %w", err)
	}
	return n.Int64, nil
}
