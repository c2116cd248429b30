package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"os"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

// testURL returns TEST_DATABASE_URL or skips.
func testURL(t testing.TB) string {
	u := os.Getenv("TEST_DATABASE_URL")
	if u == "" {
		t.Skip("TEST_DATABASE_URL is not set; source scripts/setup/postgres.sh to run the PostgreSQL store tests")
	}
	return u
}

// freshSchema returns a new random schema name, dropped at cleanup.
func freshSchema(t testing.TB, url string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "cctest_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		db, err := sql.Open("pgx", url)
		if err != nil {
			return
		}
		defer db.Close()
		_, _ = db.ExecContext(context.Background(), `DROP SCHEMA IF EXISTS `+name+` CASCADE`)
	})
	return name
}

func TestConformance(t *testing.T) {
	url := testURL(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: freshSchema(t, url)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestTwoReplicasShareOneSchema(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	a, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: schema})
	if err != nil {
		t.Fatalf("second replica: %v", err)
	}
	defer b.Close()
	if err := a.CreateTask(t.Context(), storetest.Task("t1", "main", "k", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetTask(t.Context(), "main", "t1"); err != nil {
		t.Fatalf("replica b cannot read a's task: %v", err)
	}
}

func TestRefusesForeignSchema(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`CREATE SCHEMA ` + schema, `CREATE TABLE ` + schema + `.invoices (id INT)`} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: schema}); !errors.Is(err, store.ErrIncompatible) {
		t.Fatalf("Open on a foreign schema = %v, want ErrIncompatible", err)
	}
}

func TestBadOptions(t *testing.T) {
	tests := []struct{ name, url, schema string }{
		{"not a postgres url", "mysql://x", ""},
		{"hostile schema", "postgres://127.0.0.1:1/x", "a; DROP TABLE x"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := postgres.Open(t.Context(), postgres.Options{URL: tc.url, Schema: tc.schema}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
