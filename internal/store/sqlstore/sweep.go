package sqlstore

import (
	"context"
	"fmt"

	"github.com/clawconnect/clawconnect/internal/store"
)

// Sweep implements store.Store.
func (db *DB) Sweep(ctx context.Context, cutoff int64, limit int) (store.SweepResult, error) {
	var res store.SweepResult
	limit = store.ClampPage(limit, store.MaxPage)
	err := db.tx(ctx, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, agent, session_key FROM tasks
			WHERE `+endedTask()+` AND ended_at < ? ORDER BY ended_at LIMIT ?`, cutoff, limit)
		if err != nil {
			return err
		}
		type key struct{ id, agent, session string }
		var victims []key
		for rows.Next() {
			var k key
			if err := rows.Scan(&k.id, &k.agent, &k.session); err != nil {
				rows.Close()
				return err
			}
			victims = append(victims, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, k := range victims {
			r, err := tx.ExecContext(ctx, `DELETE FROM task_logs WHERE task_id = ?`, k.id)
			if err != nil {
				return err
			}
			n, _ := r.RowsAffected()
			res.Logs += int(n)
			if _, err := tx.ExecContext(ctx, `DELETE FROM tasks WHERE id = ?`, k.id); err != nil {
				return err
			}
			res.Tasks++
			r, err = tx.ExecContext(ctx, `DELETE FROM sessions WHERE agent = ? AND session_key = ? AND last_job_id = ?`,
				k.agent, k.session, k.id)
			if err != nil {
				return err
			}
			n, _ = r.RowsAffected()
			res.Sessions += int(n)
		}
		return nil
	})
	if err != nil {
		return store.SweepResult{}, fmt.Errorf("sweep: %w", err)
	}
	return res, nil
}
