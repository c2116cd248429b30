package terminal

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox/outboxtest"
	"github.com/clawconnect/clawconnect/termapi"
)

// pgSchema opens n stores (as n processes would) on one fresh schema of
// TEST_DATABASE_URL, or skips.
func pgStores(t testing.TB, n int) []store.Store {
	t.Helper()
	url := os.Getenv("TEST_DATABASE_URL")
	if url == "" {
		t.Skip("TEST_DATABASE_URL is not set")
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "ccterm_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		if db, err := sql.Open("pgx", url); err == nil {
			_, _ = db.ExecContext(context.Background(), `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
			_ = db.Close()
		}
	})
	var out []store.Store
	for range n {
		st, err := postgres.Open(t.Context(), postgres.Options{URL: url, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		out = append(out, st)
	}
	return out
}

// TestHostsOnPostgresShareTurns runs two hosts over one PostgreSQL schema,
// as two processes would: one monitor per Turn, one completion, and the
// survivor takes the Turn over when the other host stops.
func TestHostsOnPostgresShareTurns(t *testing.T) {
	stores := pgStores(t, 2)
	a := newFakeAgent(termapi.AgentCodex, 300)
	r := newRig(t, a)
	mk := func(st store.Store) *Service {
		return NewService(Options{Store: st, Terminals: r.ft, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}}, DraftTimeout: time.Second})
	}
	s1, s2 := mk(stores[0]), mk(stores[1])
	r.svc, r.st = s1, stores[0]
	ctx := t.Context()

	// Host 1 follows the Turn; host 2 sees it open but leased.
	ctx1, stop1 := context.WithCancel(context.Background())
	h1 := hostpkg.New(s1, hostpkg.Options{Store: s1.o.Store, Rescan: 20 * time.Millisecond, LeaseTTL: 300 * time.Millisecond, Watch: r.fakeWatch})
	done1 := make(chan struct{})
	go func() { _ = h1.Run(ctx1); close(done1) }()
	t.Cleanup(func() { stop1(); <-done1 })
	r.start(s2, hostpkg.Options{Rescan: 20 * time.Millisecond, LeaseTTL: 300 * time.Millisecond})
	res, err := s1.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	r.until("host 1 monitors the turn", func() bool { return h1.Monitoring() == 1 })
	stop1()
	<-done1
	a.finish("finished under host 2", false)
	r.svc = s2
	if v := r.waitStatus(res.TurnID, termapi.TurnIdle); v.Result.Text != "finished under host 2" {
		t.Fatalf("turn = %+v", v)
	}
	if n := completionClaims(t, stores[0], res.TurnID); n != 1 {
		t.Fatalf("%d completions, want 1", n)
	}
}

// TestOutboxOnPostgresTwoHosts: two outboxes over one PostgreSQL schema (two
// processes) race for the same due callback; exactly one delivers it.
func TestOutboxOnPostgresTwoHosts(t *testing.T) {
	stores := pgStores(t, 2)
	a := newFakeAgent(termapi.AgentCodex, 310)
	r := &rig{t: t, st: stores[0], ft: &fakeTerminals{agents: []*fakeAgent{a}}}
	r.svc = r.service()
	r.start(r.svc, hostpkg.Options{})
	_, cb := completedTurn(t, r, a, "agent:main:pg", "the answer")
	gw := outboxtest.NewGateway()
	done := make(chan int, 2)
	for i, st := range stores {
		x := newTestOutbox(st, gw, "host-"+string(rune('a'+i)), time.Now)
		go func() {
			n, _ := x.DeliverDue(t.Context())
			done <- n
		}()
	}
	total := <-done + <-done
	got, err := stores[1].GetCallback(t.Context(), cb.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	if total != 1 || got.Status != termapi.CallbackDelivered || gw.Count(outbox.CallbackMethod) != 1 || gw.Runs() != 1 {
		t.Fatalf("attempts %d, callback %s, calls %v", total, got.Status, gw.Calls())
	}
}

// TestRecoveryLeavesAnotherHostsTransitionOnPostgres: the shared store
// where hosts meet.
func TestRecoveryLeavesAnotherHostsTransitionOnPostgres(t *testing.T) {
	st := pgStores(t, 1)[0]
	svc := NewService(Options{Store: st, Terminals: &fakeTerminals{}, DraftTimeout: time.Second})
	testRecoveryLeavesAnotherHostsTransition(t, svc, st)
}

// TestATurnWriteIsAnnouncedOnPostgres: as on SQLite, through NOTIFY.
func TestATurnWriteIsAnnouncedOnPostgres(t *testing.T) {
	stores := pgStores(t, 2)
	a := newFakeAgent(termapi.AgentCodex, 362)
	r := newRig(t, a)
	r.st = stores[0]
	r.svc = r.service()
	testTurnWriteAnnounced(t, r, a, stores[1])
}

// pgStoresIfSet is pgStores when TEST_DATABASE_URL is set, else nil.
func pgStoresIfSet(t testing.TB, n int) []store.Store {
	if os.Getenv("TEST_DATABASE_URL") == "" {
		return nil
	}
	return pgStores(t, n)
}
