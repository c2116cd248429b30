package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

// TestUpgradeFromSchema6 opens a store of schema 6 (the last release
// before watches, transitions, the callback lease-owner index and the
// Turn's principal) that holds a task, a terminal Session, a Turn and an
// undelivered callback, with the current code: it migrates to the current
// schema and keeps every record.
func TestUpgradeFromSchema6(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, sqlite.FileName)
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	want := storetest.SeedUpgrade(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	execAll(t, path, storetest.Schema6Downgrade(t, filepath.Join("..", "sqlstore", "migrations")))

	// The downgraded file has exactly the schema migrations 1-6 build.
	ref := filepath.Join(dir, "ref.db")
	execAll(t, ref, storetest.MigrationStatements(t, filepath.Join("..", "sqlstore", "migrations"), 6))
	if diff := cmp.Diff(sqliteSchema(t, ref), sqliteSchema(t, path)); diff != "" {
		t.Fatalf("downgraded store is not a schema-6 store (-migrations 1-6 +downgraded):\n%s", diff)
	}

	s, err = sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatalf("open the schema-6 store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := sqlstore.CheckSchema(t.Context(), rawDB(t, path)); err != nil {
		t.Fatalf("schema after the upgrade: %v", err)
	}
	storetest.CheckUpgraded(t, s, want)
}

func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func execAll(t *testing.T, path string, stmts []string) {
	t.Helper()
	db := rawDB(t, path)
	for _, q := range stmts {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// sqliteSchema lists the file's tables and indexes with their SQL.
func sqliteSchema(t *testing.T, path string) []string {
	t.Helper()
	rows, err := rawDB(t, path).QueryContext(t.Context(),
		`SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUpgradeCarriesTerminalLeasesOver opens a store of schema 10 whose
// Turn, watch and callback hold leases in the tables of that schema: the
// migration to the shared lease table keeps every one.
func TestUpgradeCarriesTerminalLeasesOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	stmts := storetest.MigrationStatements(t, filepath.Join("..", "sqlstore", "migrations"), 10)
	stmts = append(stmts, `UPDATE clawconnect_meta SET value = '10' WHERE key = 'schema_version'`)
	execAll(t, path, append(stmts, storetest.Schema10Leases()...))
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatalf("open the schema-10 store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	storetest.CheckCarriedLeases(t, s)
}
