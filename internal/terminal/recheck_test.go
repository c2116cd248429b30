package terminal

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/termapi"
)

// readCountingStore counts the record reads of a host's followers and
// signals each re-check tick's version probe.
type readCountingStore struct {
	store.Store
	mu     sync.Mutex
	reads  int
	probes chan struct{}
}

func (c *readCountingStore) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

func (c *readCountingStore) GetTurn(ctx context.Context, id string) (*store.Turn, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Store.GetTurn(ctx, id)
}

func (c *readCountingStore) GetTermSession(ctx context.Context, id string) (*store.TermSession, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Store.GetTermSession(ctx, id)
}

func (c *readCountingStore) Versions(ctx context.Context, kind string, ids []string) (map[string]int64, error) {
	vs, err := c.Store.Versions(ctx, kind, ids)
	if kind == store.VersionSession {
		select {
		case c.probes <- struct{}{}:
		case <-ctx.Done():
		}
	}
	return vs, err
}

// TestRecheckReadsOnlyMovedRecords: a monitor's re-checks of a quiet Turn
// read neither the Turn nor its Session again (one version probe per
// tick for every follower), and a re-bound Session (its version moved) is
// still read and noticed at the next tick.
func TestRecheckReadsOnlyMovedRecords(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 190)
	r := newRig(t, a)
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	cs := &readCountingStore{Store: r.st, probes: make(chan struct{})}
	svc := NewService(Options{Store: cs, Terminals: r.ft, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}}})
	r.start(svc, hostpkg.Options{Recheck: 10 * time.Millisecond})
	tick := func() {
		t.Helper()
		select {
		case <-cs.probes:
		case <-time.After(10 * time.Second):
			t.Fatal("no re-check tick")
		}
	}
	for range 3 { // the follower has looked once and is tracked
		tick()
	}
	tick() // the follower's look at the previous tick is over
	before := cs.count()
	for range 10 {
		tick()
	}
	if got := cs.count(); got != before {
		t.Fatalf("ten re-checks of a quiet Turn read %d records, want none", got-before)
	}
	rebind(t, r.st, res.SessionID)
	go func() { // keep the probes flowing until the test ends
		for {
			select {
			case <-cs.probes:
			case <-ctx.Done():
				return
			}
		}
	}()
	if v := r.waitStatus(res.TurnID, termapi.TurnStalled); !strings.Contains(v.StalledReason, "rebound") {
		t.Fatalf("turn = %+v, want stalled as re-bound", v)
	}
}

// ledgerCountingStore is the whole store (watches included) counting the
// records a watch's follower reads and signalling each re-check tick's
// probe of the watch versions.
type ledgerCountingStore struct {
	*sqlstore.DB
	mu     sync.Mutex
	reads  int
	probes chan struct{}
}

func (c *ledgerCountingStore) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

func (c *ledgerCountingStore) read() {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
}

func (c *ledgerCountingStore) GetDispatch(ctx context.Context, key string) (*store.Dispatch, error) {
	c.read()
	return c.DB.GetDispatch(ctx, key)
}

func (c *ledgerCountingStore) GetWatch(ctx context.Context, id string) (*store.Watch, error) {
	c.read()
	return c.DB.GetWatch(ctx, id)
}

func (c *ledgerCountingStore) GetTermSession(ctx context.Context, id string) (*store.TermSession, error) {
	c.read()
	return c.DB.GetTermSession(ctx, id)
}

func (c *ledgerCountingStore) Versions(ctx context.Context, kind string, ids []string) (map[string]int64, error) {
	vs, err := c.DB.Versions(ctx, kind, ids)
	if kind == store.VersionWatch {
		select {
		case c.probes <- struct{}{}:
		case <-ctx.Done():
		}
	}
	return vs, err
}

// TestRecheckReadsTheLedgerOnlyWhenItMoved: a watch's re-checks of a
// quiet pane read neither the watch, its Session nor the terminal's
// dispatch ledger (which it has none of yet) again: one version probe per
// kind and tick serves every follower. A Turn sent to the pane (the ledger
// moves) still ends the watch.
func TestRecheckReadsTheLedgerOnlyWhenItMoved(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 191)
	r := newRig(t, a)
	ctx := t.Context()
	v, err := r.svc.Watch(ctx, watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin})
	if err != nil {
		t.Fatal(err)
	}
	cs := &ledgerCountingStore{DB: r.st.(*sqlstore.DB), probes: make(chan struct{})}
	svc := NewService(Options{Store: cs, Terminals: r.ft, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}}})
	r.start(svc, hostpkg.Options{Recheck: 10 * time.Millisecond})
	tick := func() {
		t.Helper()
		select {
		case <-cs.probes:
		case <-time.After(10 * time.Second):
			t.Fatal("no re-check tick")
		}
	}
	for range 3 { // the follower has looked once and is tracked
		tick()
	}
	tick() // the follower's look at the previous tick is over
	before := cs.count()
	for range 10 {
		tick()
	}
	if got := cs.count(); got != before {
		t.Fatalf("ten re-checks of a quiet watch read %d records, want none", got-before)
	}
	go func() { // keep the probes flowing until the test ends
		for {
			select {
			case <-cs.probes:
			case <-ctx.Done():
				return
			}
		}
	}()
	if _, err := svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "ours"}); err != nil {
		t.Fatal(err)
	}
	if got := r.waitWatch(v.WatchID, store.WatchInvalidated); got.Settlement.Match != "clawconnect_turn_sent" {
		t.Fatalf("watch after our send = %+v, want invalidated by the Turn sent", got)
	}
}

// rebind re-binds the Session to another terminal context, as a thread
// transition or a human's resume does.
func rebind(t *testing.T, st store.Store, sessionID string) {
	t.Helper()
	sess, err := st.GetTermSession(t.Context(), sessionID)
	if err != nil {
		t.Fatal(err)
	}
	nb := *sess.Binding
	nb.BindingID, nb.Generation = "binding-rebound", nb.Generation+1
	sess.Binding = &nb
	if err := st.SaveTermSession(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
}
