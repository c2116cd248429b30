package postgres_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

// TestUpgradeFromSchema6 opens a schema-6 store (before watches,
// transitions, the callback lease-owner index and the Turn's principal)
// holding a task, a terminal Session, a Turn and an undelivered callback
// with the current code: it migrates to the current schema and keeps
// every record.
func TestUpgradeFromSchema6(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	want := storetest.SeedUpgrade(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	execIn(t, url, schema, storetest.Schema6Downgrade(t, filepath.Join("..", "sqlstore", "migrations")))

	// The downgraded schema is exactly what migrations 1-6 build.
	ref := freshSchema(t, url)
	execIn(t, url, ref, append([]string{`CREATE SCHEMA ` + ref},
		storetest.MigrationStatements(t, filepath.Join("..", "sqlstore", "migrations"), 6)...))
	if diff := cmp.Diff(pgSchema(t, url, ref), pgSchema(t, url, schema)); diff != "" {
		t.Fatalf("downgraded store is not a schema-6 store (-migrations 1-6 +downgraded):\n%s", diff)
	}

	s, err = postgres.Open(t.Context(), postgres.Options{URL: url, Schema: schema})
	if err != nil {
		t.Fatalf("open the schema-6 store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := sqlstore.CheckSchema(t.Context(), rawIn(t, url, schema)); err != nil {
		t.Fatalf("schema after the upgrade: %v", err)
	}
	storetest.CheckUpgraded(t, s, want)
}

// rawIn is a plain connection whose search_path is schema.
func rawIn(t *testing.T, url, schema string) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["search_path"] = schema
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func execIn(t *testing.T, url, schema string, stmts []string) {
	t.Helper()
	db := rawIn(t, url, schema)
	for _, q := range stmts {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// pgSchema lists the schema's columns and indexes, the schema's name
// replaced by S.
func pgSchema(t *testing.T, url, schema string) []string {
	t.Helper()
	rows, err := rawIn(t, url, schema).QueryContext(t.Context(), `
		SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' null=' || is_nullable || ' default=' || coalesce(column_default, '')
		  FROM information_schema.columns WHERE table_schema = $1
		UNION ALL
		SELECT 'index ' || indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = $1
		UNION ALL
		SELECT 'constraint ' || conname || ': ' || pg_get_constraintdef(c.oid)
		  FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1
		ORDER BY 1`, schema)
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
		out = append(out, strings.ReplaceAll(s, schema+".", "S."))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("schema %s has no columns", schema)
	}
	return out
}

// TestUpgradeCarriesTerminalLeasesOver opens a store of schema 10 whose
// Turn, watch and callback hold leases in the tables of that schema: the
// migration to the shared lease table keeps every one.
func TestUpgradeCarriesTerminalLeasesOver(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	stmts := append([]string{`CREATE SCHEMA ` + schema},
		storetest.MigrationStatements(t, filepath.Join("..", "sqlstore", "migrations"), 10)...)
	stmts = append(stmts, `UPDATE clawconnect_meta SET value = '10' WHERE key = 'schema_version'`)
	execIn(t, url, schema, append(stmts, storetest.Schema10Leases()...))
	s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: schema})
	if err != nil {
		t.Fatalf("open the schema-10 store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	storetest.CheckCarriedLeases(t, s)
}
