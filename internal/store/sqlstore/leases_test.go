package sqlstore

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	_ "modernc.org/sqlite"
)

// TestLeaseTableOnAnotherTable: the lease primitive works on any table with
// the lease columns (here a stand-in for a Turn monitor's table): claims
// raise the fence and skip live leases, renewal keeps only named rows,
// release makes rows claimable at once, and a write fenced with a stale
// token matches nothing.
func TestLeaseTableOnAnotherTable(t *testing.T) {
	t.Parallel()
	raw, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	db := New(raw, raw, Dialect{Name: "sqlite"}, nil)
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	if _, err := raw.Exec(`CREATE TABLE turns (id TEXT PRIMARY KEY, state TEXT NOT NULL, note TEXT NOT NULL DEFAULT '',
		owner TEXT NOT NULL DEFAULT '', lease_until BIGINT NOT NULL DEFAULT 0, fence BIGINT NOT NULL DEFAULT 1)`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`INSERT INTO turns (id, state) VALUES ('a', 'watching'), ('b', 'watching'), ('c', 'done')`); err != nil {
		t.Fatal(err)
	}
	lt := LeaseTable{Name: "turns", Active: "state = 'watching'"}
	got, err := db.ClaimRows(ctx, lt, "P", 100, 1000, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Lease{{"a", 2}, {"b", 2}}, got); diff != "" {
		t.Fatalf("claim (-want +got):\n%s", diff)
	}
	if again, err := db.ClaimRows(ctx, lt, "Q", 500, 2000, 10); err != nil || len(again) != 0 {
		t.Fatalf("Q claimed live leases: %v %v", again, err)
	}
	if lost, err := db.RenewRows(ctx, lt, "P", 3000, []string{"a", "c"}); err != nil || !cmp.Equal(lost, []string{"c"}) {
		t.Fatalf("renew lost %v, %v", lost, err)
	}
	if n, err := db.ReleaseRows(ctx, lt, "P", []string{"a"}); err != nil || n != 1 {
		t.Fatalf("release = %d, %v", n, err)
	}
	got, err = db.ClaimRows(ctx, lt, "Q", 1500, 5000, 10) // a (released) and b (expired at 1000)
	if err != nil || len(got) != 2 {
		t.Fatalf("Q's claim = %v, %v", got, err)
	}
	res, err := raw.Exec(`UPDATE turns SET note = 'stale' WHERE id = 'a'`+FenceCond, 2)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 0 {
		t.Fatal("a write fenced with P's token changed Q's row")
	}
}
