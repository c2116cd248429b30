package postgres_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	neturl "net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
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

// Replicas that start together on a fresh database all open it: creating
// the schema is serialized like the migration, so none of them sees the
// catalog's unique violation of a schema created at the same moment.
func TestReplicasStartingTogetherOnAFreshSchema(t *testing.T) {
	url := testURL(t)
	for range 5 {
		schema := freshSchema(t, url)
		const n = 6
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: schema, MaxConns: 1})
				if err == nil {
					err = s.Close()
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("replica starting with %d others on schema %s: %v", n-1, schema, err)
			}
		}
	}
}

// A role that may not create schemas opens the one an administrator made
// for it.
func TestOpensASchemaMadeForARoleThatCannotCreateOne(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	role := schema + "_role"
	admin, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{`CREATE ROLE ` + role + ` LOGIN`, `CREATE SCHEMA ` + schema + ` AUTHORIZATION ` + role} {
		if _, err := admin.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = admin.ExecContext(context.Background(), `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
		_, _ = admin.ExecContext(context.Background(), `DROP ROLE IF EXISTS `+role)
	})
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.User(role)
	other := schema + "_other"
	_, err = postgres.Open(t.Context(), postgres.Options{URL: u.String(), Schema: other})
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("the role created a schema of its own: %v (the test needs a role without CREATE on the database)", err)
	}
	if want := "CREATE SCHEMA " + other + " AUTHORIZATION <role>"; !strings.Contains(err.Error(), want) {
		t.Errorf("refused schema: %v; want it to say what to do (%q)", err, want)
	}
	s, err := postgres.Open(t.Context(), postgres.Options{URL: u.String(), Schema: schema})
	if err != nil {
		t.Fatalf("open the schema made for the role: %v", err)
	}
	defer s.Close()
	if err := s.CreateTask(t.Context(), storetest.Task("t1", "main", "k", 1)); err != nil {
		t.Fatal(err)
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
	tests := []struct{ name, url, schema, want string }{
		{"not a postgres url", "mysql://x", "", "must start with postgres://"},
		{"hostile schema", "postgres://127.0.0.1:1/x", "a; DROP TABLE x", "invalid schema name"},
		{"upper case", "postgres://127.0.0.1:1/x", "Tasks", "invalid schema name"},
		{"leading digit", "postgres://127.0.0.1:1/x", "1tasks", "invalid schema name"},
		{"quote", "postgres://127.0.0.1:1/x", `a"b`, "invalid schema name"},
		{"non-ASCII", "postgres://127.0.0.1:1/x", "tâches", "invalid schema name"},
		{"64 bytes", "postgres://127.0.0.1:1/x", strings.Repeat("a", 64), "invalid schema name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := postgres.Open(t.Context(), postgres.Options{URL: tc.url, Schema: tc.schema})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want an error saying %q", err, tc.want)
			}
		})
	}
	// The longest and the oddest valid names pass validation (and then
	// fail to connect).
	for _, schema := range []string{strings.Repeat("a", 63), "_", "a_1"} {
		_, err := postgres.Open(t.Context(), postgres.Options{URL: "postgres://127.0.0.1:1/x", Schema: schema})
		if err == nil || strings.Contains(err.Error(), "invalid schema name") {
			t.Fatalf("Open(schema %q) = %v, want a connection error", schema, err)
		}
	}
}

// TestChangeFeed: a task change written through one replica wakes the
// watchers of that task in another replica on the same schema, and no
// watcher of another task or in another schema.
func TestChangeFeed(t *testing.T) {
	url := testURL(t)
	schema := freshSchema(t, url)
	open := func(schema string) *postgresStore {
		s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b, other := open(schema), open(schema), open(freshSchema(t, url))
	ctx := t.Context()
	if err := a.CreateTask(ctx, storetest.Task("t1", "main", "k", 1)); err != nil {
		t.Fatal(err)
	}
	t1, stop := b.WatchTask("t1")
	defer stop()
	t2, stop2 := b.WatchTask("t2")
	defer stop2()
	otherT1, stop3 := other.WatchTask("t1")
	defer stop3()

	if err := a.AppendLogs(ctx, "t1", 1, []store.LogEntry{{Seq: 1, Type: "x", Text: "one"}}); err != nil {
		t.Fatal(err)
	}
	awaitSignal(t, t1, "b's watch of t1 after a's log append")
	task, err := a.GetTask(ctx, "main", "t1")
	if err != nil {
		t.Fatal(err)
	}
	task.Status = store.StatusCompleted
	if err := a.UpdateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	awaitSignal(t, t1, "b's watch of t1 after a's update")
	// b's listener handles announcements in order, so a misrouted one
	// would already be pending on t2.
	select {
	case <-t2:
		t.Fatal("the watch of t2 was woken by changes to t1")
	default:
	}
	// Likewise in the other schema, once its own announcement got through.
	if err := other.CreateTask(ctx, storetest.Task("t9", "main", "k", 1)); err != nil {
		t.Fatal(err)
	}
	t9, stop9 := other.WatchTask("t9")
	defer stop9()
	if err := other.AppendLogs(ctx, "t9", 1, []store.LogEntry{{Seq: 1, Type: "x"}}); err != nil {
		t.Fatal(err)
	}
	awaitSignal(t, t9, "the other schema's own announcement")
	select {
	case <-otherT1:
		t.Fatal("a store on another schema was woken by this schema's task t1")
	default:
	}
}

// TestNewTaskFeed: a task created through one replica wakes the watchers
// of new tasks in another, and an outcome does not.
func TestNewTaskFeed(t *testing.T) {
	open := handles(t)
	storetest.NewTaskFeed(t, open(), open())
}

// TestTerminalWorkFeed: terminal work announced through one handle (a
// command) wakes the monitor hosts watching through another.
func TestTerminalWorkFeed(t *testing.T) {
	open := handles(t)
	storetest.TerminalWorkFeed(t, open(), open())
}

// handles returns a func that opens one more handle (a process, a
// replica) on a fresh schema of the test database.
func handles(t *testing.T) func() *postgresStore {
	t.Helper()
	url := testURL(t)
	schema := freshSchema(t, url)
	return func() *postgresStore {
		s, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

type postgresStore = sqlstore.DB

// awaitSignal waits (bounded) for a value on ch.
func awaitSignal(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no change announcement reached %s", what)
	}
}
