package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/clawconnect/clawconnect/internal/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Format is the value of the "format" meta row that marks a database as
// ClawConnect's.
const Format = "clawconnect-store"

// migrations returns the embedded migrations in order.
func migrations() ([]string, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]string, 0, len(names))
	for _, n := range names {
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, string(b))
	}
	return out, nil
}

// SchemaVersion is the newest schema version this build knows.
func SchemaVersion() int {
	m, _ := migrations()
	return len(m)
}

// MigrateOptions says how to migrate one backend.
type MigrateOptions struct {
	// Lock, if set, runs first inside the migration transaction to
	// serialize concurrent migrators (e.g. a Postgres advisory lock).
	Lock string
	// Tables lists the tables of the database (or schema) the store owns.
	Tables func(ctx context.Context, tx *sql.Tx) ([]string, error)
	// Dollar selects $n placeholders.
	Dollar bool
}

// Migrate brings the database to the newest schema. It refuses (with
// store.ErrIncompatible) a database that holds tables but no ClawConnect
// meta row, or that a newer build migrated: evidence is never overwritten.
func Migrate(ctx context.Context, db *sql.DB, o MigrateOptions) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	q := func(s string) string { return rebind(s, o.Dollar) }
	// A current schema needs no lock: several processes open one SQLite
	// file, and one of them may hold its write lock (or be stopped while
	// holding it) for a while.
	if format, version, err := readMeta(ctx, db); err == nil && format == Format && version == len(ms) {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if o.Lock != "" {
		if _, err := tx.ExecContext(ctx, o.Lock); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
	}
	tables, err := o.Tables(ctx, tx)
	if err != nil {
		return fmt.Errorf("migrate: inspect: %w", err)
	}
	hasMeta := false
	for _, t := range tables {
		hasMeta = hasMeta || t == "clawconnect_meta"
	}
	var format string
	version := 0
	if hasMeta {
		if format, version, err = readMeta(ctx, tx); err != nil {
			return fmt.Errorf("migrate: read meta: %w", err)
		}
		if format != Format {
			return fmt.Errorf("migrate: the database has a clawconnect_meta table with format %q, not %q: %w",
				format, Format, store.ErrIncompatible)
		}
	} else {
		if len(tables) > 0 {
			return fmt.Errorf("migrate: the database already holds tables that are not ClawConnect's (%s); "+
				"refusing to write into it (point the store at an empty database or file): %w",
				strings.Join(tables, ", "), store.ErrIncompatible)
		}
		if _, err := tx.ExecContext(ctx, `CREATE TABLE clawconnect_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`); err != nil {
			return fmt.Errorf("migrate: create meta: %w", err)
		}
		if _, err := tx.ExecContext(ctx, q(`INSERT INTO clawconnect_meta (key, value) VALUES ('format', ?), ('schema_version', '0')`), Format); err != nil {
			return fmt.Errorf("migrate: create meta: %w", err)
		}
	}
	if version > len(ms) {
		return fmt.Errorf("migrate: the database has schema version %d but this build knows only %d; "+
			"upgrade clawconnect: %w", version, len(ms), store.ErrIncompatible)
	}
	if hasMeta && version == len(ms) {
		return nil // current: nothing to write (the deferred rollback ends the read)
	}
	for i := version; i < len(ms); i++ {
		for _, stmt := range splitSQL(ms[i]) {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migrate: version %d: %w", i+1, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, q(`UPDATE clawconnect_meta SET value = ? WHERE key = 'schema_version'`), strconv.Itoa(len(ms))); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

// splitSQL splits a migration into statements on ";" at line ends and drops
// comment-only lines.
func splitSQL(s string) []string {
	var out []string
	var cur strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, strings.TrimSpace(cur.String()))
	}
	return out
}

// readMeta reads the store's format and schema version.
func readMeta(ctx context.Context, q interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}) (format string, version int, err error) {
	rows, err := q.QueryContext(ctx, `SELECT key, value FROM clawconnect_meta`)
	if err != nil {
		return "", 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return "", 0, err
		}
		switch k {
		case "format":
			format = v
		case "schema_version":
			version, _ = strconv.Atoi(v)
		}
	}
	return format, version, rows.Err()
}

// CheckSchema verifies, without writing anything, that db holds a
// ClawConnect store at exactly this build's schema version; otherwise it
// returns store.ErrIncompatible.
func CheckSchema(ctx context.Context, db *sql.DB) error {
	format, version, err := readMeta(ctx, db)
	if err != nil {
		return fmt.Errorf("check schema: not a ClawConnect store (%v): %w", err, store.ErrIncompatible)
	}
	if format != Format {
		return fmt.Errorf("check schema: format %q, not %q: %w", format, Format, store.ErrIncompatible)
	}
	if want := SchemaVersion(); version != want {
		return fmt.Errorf("check schema: the store has schema version %d and this build %d; let the process that "+
			"owns it migrate it, or run the same clawconnect version: %w", version, want, store.ErrIncompatible)
	}
	return nil
}
