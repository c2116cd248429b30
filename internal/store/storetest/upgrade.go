package storetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// Schema6Downgrade returns the statements that take a store of the
// current schema back to schema 6: they drop what migrations 7 (watches),
// 8 (transitions), 9 (the callback lease-owner index), 10 (the Turn's
// principal column), 11 (the shared lease table), 12 (the dispatch
// ledger's version column) and 13 (the terminal host directory) created, and rebuild
// the monitor lease table and the callback outbox as migrations 3 and 6 in
// dir create them (keeping the callbacks). A backend test checks that the
// result has exactly the schema migrations 1-6 build before it reopens the
// store with the current code.
func Schema6Downgrade(t *testing.T, dir string) []string {
	t.Helper()
	create := func(prefix string) []string {
		var out []string
		for _, q := range MigrationStatements(t, dir, 6) {
			if strings.HasPrefix(q, prefix) {
				out = append(out, q)
			}
		}
		if len(out) == 0 {
			t.Fatalf("no %q statement in migrations 1-6 of %s", prefix, dir)
		}
		return out
	}
	const cols = `message_id, turn_id, status, next_attempt_at, created_at, data`
	out := []string{
		`ALTER TABLE term_turns DROP COLUMN principal`,
		`ALTER TABLE term_dispatch DROP COLUMN version`,
		`CREATE TABLE term_callbacks_v6 AS SELECT ` + cols + ` FROM term_callbacks`,
		`DROP TABLE term_callbacks`,
	}
	out = append(out, create("CREATE TABLE term_callbacks ")...)
	out = append(out, create("CREATE INDEX term_callbacks_")...)
	out = append(out, `INSERT INTO term_callbacks (`+cols+`) SELECT `+cols+` FROM term_callbacks_v6`, `DROP TABLE term_callbacks_v6`)
	out = append(out, create("CREATE TABLE term_monitor_leases ")...)
	return append(out,
		`DROP TABLE term_host_ops`,
		`DROP TABLE term_hosts`,
		`DROP TABLE term_leases`,
		`DROP TABLE term_transitions`,
		`DROP TABLE term_watches`,
		`UPDATE clawconnect_meta SET value = '6' WHERE key = 'schema_version'`,
	)
}

// MigrationStatements returns the statements of the migration files in dir
// numbered 1 to upto, preceded by the meta table a migrated store has: what
// a build of that schema version creates in an empty database.
func MigrationStatements(t *testing.T, dir string, upto int) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if len(names) < upto {
		t.Fatalf("%s has %d migrations, want at least %d", dir, len(names), upto)
	}
	out := []string{
		`CREATE TABLE clawconnect_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)`,
		`INSERT INTO clawconnect_meta (key, value) VALUES ('format', 'clawconnect-store'), ('schema_version', '0')`,
	}
	for _, n := range names[:upto] {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		var cur strings.Builder
		for line := range strings.SplitSeq(string(b), "\n") {
			if l := strings.TrimSpace(line); l == "" || strings.HasPrefix(l, "--") {
				continue
			}
			cur.WriteString(line + "\n")
			if strings.HasSuffix(strings.TrimSpace(line), ";") {
				out = append(out, strings.TrimSpace(cur.String()))
				cur.Reset()
			}
		}
	}
	return out
}

// UpgradeRecords is what SeedUpgrade wrote, as read back before the
// downgrade.
type UpgradeRecords struct {
	Task     *store.Task
	Logs     []store.LogEntry
	Session  *store.TermSession
	Turn     *store.Turn
	Events   []store.TurnEvent
	Callback *store.Callback
}

// SeedUpgrade writes one record of each kind a schema-6 store holds (a
// task with logs, a terminal Session, a Turn with its events and an
// undelivered callback) and returns them as stored.
func SeedUpgrade(t *testing.T, s store.Store) UpgradeRecords {
	t.Helper()
	ctx := t.Context()
	if err := s.CreateTask(ctx, Task("task-up", "main", "agent:main:up", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendLogs(ctx, "task-up", 1, []store.LogEntry{{Seq: 1, TS: 2, Type: "tool", Text: "ünïcode ✓"}, {Seq: 2, TS: 3, Type: "text", Text: "done", IsError: true}}); err != nil {
		t.Fatal(err)
	}
	sess := TermSession("session-up", "11111111-2222-4333-8444-555555555555", "k-up")
	mustCreateSession(t, s, sess)
	tc := NewTurn("turn-up", sess, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn := tc.Turn
	turn.Status = termapi.TurnIdle
	err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn,
		Dispatch: &store.DispatchAdvance{TerminalKey: "k-up", GenerationID: tc.Dispatch.GenerationID, Update: func() *store.Dispatch {
			d := *tc.Dispatch
			d.Status = termapi.DispatchAgentAccepted
			return &d
		}()},
		Also: func(ctx context.Context, tx store.TerminalTx) error {
			return tx.PutCallback(ctx, &store.Callback{MessageID: "msg-up-1", TurnID: "turn-up", SessionID: "session-up", Kind: "done",
				SessionKey: "agent:main:up", BindingID: sess.Binding.BindingID, Generation: 1, Message: []byte(`{"id":"msg-up-1"}`),
				Status: termapi.CallbackPending, CreatedAt: 20, UpdatedAt: 20})
		}})
	if err != nil {
		t.Fatal(err)
	}
	return readUpgrade(t, s)
}

func readUpgrade(t *testing.T, s store.Store) UpgradeRecords {
	t.Helper()
	ctx := t.Context()
	var r UpgradeRecords
	var err error
	if r.Task, err = s.GetTask(ctx, "main", "task-up"); err != nil {
		t.Fatal(err)
	}
	if r.Logs, err = s.Logs(ctx, "task-up", 0, 100); err != nil {
		t.Fatal(err)
	}
	if r.Session, err = s.GetTermSession(ctx, "session-up"); err != nil {
		t.Fatal(err)
	}
	if r.Turn, err = s.GetTurn(ctx, "turn-up"); err != nil {
		t.Fatal(err)
	}
	if r.Events, err = s.TurnEvents(ctx, "turn-up", 0, 100); err != nil {
		t.Fatal(err)
	}
	if r.Callback, err = s.GetCallback(ctx, "msg-up-1"); err != nil {
		t.Fatal(err)
	}
	return r
}

// CheckUpgraded checks that s, a schema-6 store SeedUpgrade filled and the
// current code reopened, still holds want, and that the records the later
// migrations added work in it: the callback outbox claims and releases by
// owner, a watch and a transition can be written, a new Turn keeps its
// principal and the pre-upgrade Turn has none.
func CheckUpgraded(t *testing.T, s store.Store, want UpgradeRecords) {
	t.Helper()
	ctx := t.Context()
	if diff := cmp.Diff(want, readUpgrade(t, s)); diff != "" {
		t.Fatalf("records after the upgrade (-before +after):\n%s", diff)
	}
	if _, err := s.ClaimCallback(ctx, "msg-up-1", "pid:1:birth:x", 30, 90); err != nil {
		t.Fatalf("claim the pre-upgrade callback: %v", err)
	}
	if n, err := s.ReleaseLeases(ctx, "pid:1:birth:x", nil); err != nil || n != 1 {
		t.Fatalf("release the dead owner's leases: %v (freed %d)", err, n)
	}
	w := NewWatch("watch-up", "k-watch", 100)
	if err := s.CreateWatch(ctx, w); err != nil {
		t.Fatalf("create a watch in the upgraded store: %v", err)
	}
	if got, err := s.GetWatch(ctx, "watch-up"); err != nil || got.Status != store.WatchActive {
		t.Fatalf("watch after the upgrade: %v, %v", got, err)
	}
	if err := s.PrepareTransition(ctx, Transition("transition-up", store.TransitionNewThread, nil, "k-free", "session-new")); err != nil {
		t.Fatalf("prepare a transition in the upgraded store: %v", err)
	}
	// The pre-upgrade Turn's undelivered callback still blocks its pane.
	err := s.PrepareTransition(ctx, Transition("transition-busy", store.TransitionNewThread, want.Session, "k-up", "session-b"))
	if !errors.Is(err, store.ErrTerminalBusy) {
		t.Fatalf("transition on the pane with the pre-upgrade callback: %v, want ErrTerminalBusy", err)
	}
	if want.Turn.Principal != "" {
		t.Fatalf("the pre-upgrade turn has principal %q, want none", want.Turn.Principal)
	}
	old := *want.Turn
	old.Principal = "user:late"
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: &old}); err == nil {
		t.Fatal("a write gave the pre-upgrade turn a principal")
	}
	sess := TermSession("session-up2", "21111111-2222-4333-8444-555555555555", "k-up2")
	mustCreateSession(t, s, sess)
	tc := NewTurn("turn-up2", sess, 200)
	tc.Turn.Principal = "user:up"
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatalf("create a turn with a principal in the upgraded store: %v", err)
	}
	if got, err := s.GetTurn(ctx, "turn-up2"); err != nil || got.Principal != "user:up" {
		t.Fatalf("turn after the upgrade: %+v, %v; want principal user:up", got, err)
	}
}

// Schema10Leases returns statements that put into a store of schema 10
// the leases a build of that schema left: a Turn's and a watch's monitor
// lease (term_monitor_leases) and a callback's attempt lease (the
// callback's own columns).
func Schema10Leases() []string {
	return []string{
		`INSERT INTO term_monitor_leases (turn_id, owner, token, lease_until) VALUES ('turn-old', 'host-a', 3, 5000)`,
		`INSERT INTO term_monitor_leases (turn_id, owner, token, lease_until) VALUES ('watch-old', 'host-b', 2, 0)`,
		`INSERT INTO term_callbacks (message_id, turn_id, status, next_attempt_at, lease_owner, lease_token, lease_until, created_at, data)
			VALUES ('msg-old', 'turn-old', 'pending', 10, 'host-a', 4, 6000, 10,
			'{"message_id":"msg-old","turn_id":"turn-old","message":{"id":"msg-old"},"status":"pending","created_at":10}')`,
		`INSERT INTO term_callbacks (message_id, turn_id, status, next_attempt_at, created_at, data)
			VALUES ('msg-never', 'turn-old', 'pending', 10, 10,
			'{"message_id":"msg-never","turn_id":"turn-old","message":{"id":"msg-never"},"status":"pending","created_at":10}')`,
	}
}

// CheckCarriedLeases checks that the migration to the shared lease table
// carried over what Schema10Leases wrote, kind, holder, fence and expiry,
// and that a callback never claimed has no lease.
func CheckCarriedLeases(t *testing.T, s interface {
	store.WorkLeases
	store.CallbackStore
}) {
	t.Helper()
	ctx := t.Context()
	for _, want := range []store.WorkLease{
		{Kind: store.LeaseMonitor, ID: "turn-old", Owner: "host-a", Fence: 3, Until: 5000},
		{Kind: store.LeaseWatch, ID: "watch-old", Owner: "host-b", Fence: 2, Until: 0},
		{Kind: store.LeaseCallback, ID: "msg-old", Owner: "host-a", Fence: 4, Until: 6000},
	} {
		got, err := s.WorkLeases(ctx, want.Kind, []string{want.ID})
		if err != nil || len(got) != 1 || got[0] != want {
			t.Errorf("carried-over %s lease = %+v, %v; want %+v", want.Kind, got, err, want)
		}
	}
	if got, err := s.WorkLeases(ctx, store.LeaseCallback, []string{"msg-never"}); err != nil || len(got) != 0 {
		t.Errorf("lease of a callback never claimed = %+v, %v; want none", got, err)
	}
	cb, err := s.GetCallback(ctx, "msg-old")
	if err != nil || cb.LeaseOwner != "host-a" || cb.LeaseToken != 4 || cb.LeaseUntil != 6000 {
		t.Errorf("callback after the upgrade = %+v, %v; want host-a's attempt lease (fence 4, until 6000)", cb, err)
	}
}
