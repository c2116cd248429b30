package terminal

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
)

// readCountingStore counts the record reads of a host's followers and
// signals each re-check tick's version probe.
type readCountingStore struct {
	store.TerminalStore
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
	return c.TerminalStore.GetTurn(ctx, id)
}

func (c *readCountingStore) GetTermSession(ctx context.Context, id string) (*store.TermSession, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.TerminalStore.GetTermSession(ctx, id)
}

func (c *readCountingStore) Versions(ctx context.Context, kind string, ids []string) (map[string]int64, error) {
	vs, err := c.TerminalStore.Versions(ctx, kind, ids)
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
	a := newFakeAgent(AgentCodex, 190)
	r := newRig(t, a)
	ctx := t.Context()
	res, err := r.svc.Send(ctx, SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	cs := &readCountingStore{TerminalStore: r.st, probes: make(chan struct{})}
	svc := NewService(Options{Store: cs, Terminals: r.ft, Agents: map[string]Agent{AgentCodex: fakeReader{r.ft}}})
	r.start(svc, HostOptions{Recheck: 10 * time.Millisecond})
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
	if v := r.waitStatus(res.TurnID, store.TurnStalled); !strings.Contains(v.StalledReason, "rebound") {
		t.Fatalf("turn = %+v, want stalled as re-bound", v)
	}
}

// rebind re-binds the Session to another terminal context, as a thread
// transition or a human's resume does.
func rebind(t *testing.T, st store.TerminalStore, sessionID string) {
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
