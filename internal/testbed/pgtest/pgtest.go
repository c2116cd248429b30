// Package pgtest gives a test its own empty PostgreSQL database on the
// server TEST_DATABASE_URL names, so tests that share the store through
// several processes or replicas never see each other's rows.
package pgtest

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"
)

// FreshDatabase creates an empty database for t on TEST_DATABASE_URL's
// server and returns its URL; it is dropped when t ends. Without
// TEST_DATABASE_URL it skips t.
func FreshDatabase(t testing.TB) string {
	t.Helper()
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		t.Skip("TEST_DATABASE_URL is not set; source scripts/setup/postgres.sh to run the PostgreSQL tests")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	r := make([]byte, 6)
	_, _ = rand.Read(r)
	name := "cctasks_" + hex.EncodeToString(r)
	if _, err := db.ExecContext(t.Context(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	u.Path = "/" + name
	return u.String()
}
