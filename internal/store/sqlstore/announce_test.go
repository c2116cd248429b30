package sqlstore

import (
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// TestAnnounceOnlyWhenHeard: a transaction writes its change row and
// signals only while some process listens; one that skipped its row asks
// again once committed and, should a listener have come between its
// question and its commit, announces then, so that listener's reader (which
// may have read the store before the commit) is woken.
func TestAnnounceOnlyWhenHeard(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sqldb, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "announce.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	sqldb.SetMaxOpenConns(1)
	if _, err := sqldb.ExecContext(ctx, `CREATE TABLE task_changes (seq INTEGER PRIMARY KEY, task_id TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name          string
		answers       []bool // what Heard answers, in turn
		rows, signals int
	}{
		{"heard in the transaction", []bool{true}, 1, 1},
		{"heard only once committed", []bool{false, true}, 1, 1},
		{"never heard", []bool{false, false}, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := sqldb.ExecContext(ctx, `DELETE FROM task_changes`); err != nil {
				t.Fatal(err)
			}
			asked, signals := 0, 0
			db := New(sqldb, sqldb, Dialect{Name: "sqlite", Notify: `INSERT INTO task_changes (task_id) VALUES (?)`, ChangeTable: true,
				Committed: func() { signals++ },
				Heard: func() bool {
					if asked >= len(tt.answers) {
						t.Fatalf("Heard asked %d times, want %d", asked+1, len(tt.answers))
					}
					asked++
					return tt.answers[asked-1]
				}}, nil)
			if err := db.tx(ctx, func(tx *txn) error {
				db.announce(ctx, tx, "t1")
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			var rows int
			if err := sqldb.QueryRowContext(ctx, `SELECT COUNT(*) FROM task_changes WHERE task_id = 't1'`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != tt.rows || signals != tt.signals || asked != len(tt.answers) {
				t.Errorf("%d change rows, %d signals, Heard asked %d times; want %d, %d, %d", rows, signals, asked, tt.rows, tt.signals, len(tt.answers))
			}
		})
	}
}
