package sqlstore

import (
	"context"
	"fmt"
)

// SeedTasks inserts n tasks of agent with ids prefix+"1" … prefix+n, each on
// its own session (prefix+"s"+i), in one server-side statement. It exists
// for benchmarks that need 10^6 rows quickly. Running tasks are unowned;
// finished ones are completed.
func (db *DB) SeedTasks(ctx context.Context, agent, prefix string, n int, running bool) error {
	status, ended := "completed", "x"
	if running {
		status, ended = "running", "0"
	}
	data := `{"prompt":{"task":"seeded task"},"message":"seeded task","lastEventAt":1,"upstream":"connected","transcript":"complete","cancellation":"none","artifacts":{"filesChanged":[],"commandsRun":[]},"summary":"seeded summary"}`
	seq := `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ` + fmt.Sprint(n) + `) `
	if _, err := db.w.db.ExecContext(ctx, db.w.rebind(seq+`INSERT INTO tasks (`+taskCols+`)
		SELECT CAST(? AS TEXT) || CAST(x AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT) || 's' || CAST(x AS TEXT), CAST(? AS TEXT), x, `+ended+`, '', 0, 1, 1, 0, 0, 0, CAST(? AS TEXT) FROM c`), prefix, agent, prefix, status, data); err != nil {
		return fmt.Errorf("seed tasks: %w", err)
	}
	if _, err := db.w.db.ExecContext(ctx, db.w.rebind(seq+`INSERT INTO sessions (agent, session_key, last_job_id, created_at, updated_at)
		SELECT CAST(? AS TEXT), CAST(? AS TEXT) || 's' || CAST(x AS TEXT), CAST(? AS TEXT) || CAST(x AS TEXT), x, x FROM c`), agent, prefix, prefix); err != nil {
		return fmt.Errorf("seed sessions: %w", err)
	}
	if db.d.AfterBulk != "" {
		if _, err := db.w.db.ExecContext(ctx, db.d.AfterBulk); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	return nil
}
