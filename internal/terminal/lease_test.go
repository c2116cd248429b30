package terminal

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// countingStore counts the work-lease claims and reads a host makes.
type countingStore struct {
	store.Store
	mu     sync.Mutex
	claims map[string]int
	reads  chan struct{}
}

func (c *countingStore) ClaimWork(ctx context.Context, kind, id, owner string, now, until int64) (store.WorkLease, error) {
	c.mu.Lock()
	c.claims[id]++
	c.mu.Unlock()
	return c.Store.ClaimWork(ctx, kind, id, owner, now, until)
}

func (c *countingStore) WorkLeases(ctx context.Context, kind string, ids []string) ([]store.WorkLease, error) {
	select {
	case c.reads <- struct{}{}:
	default:
	}
	return c.Store.WorkLeases(ctx, kind, ids)
}

// TestRescanOnlyReadsWorkOthersFollow: a host's rescan reads the lease of
// an open Turn another live process follows and leaves it; it never tries
// to claim it (a write) at every rescan.
func TestRescanOnlyReadsWorkOthersFollow(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 180)
	r := newRig(t, a)
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := r.st.ClaimWork(ctx, store.LeaseMonitor, res.TurnID, "other-live-host", now.UnixMilli(), now.Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: r.st, claims: map[string]int{}, reads: make(chan struct{})}
	svc := NewService(Options{Store: cs, Terminals: r.ft, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}}})
	r.start(svc, hostpkg.Options{Rescan: 5 * time.Millisecond})
	for range 5 { // five rescans read the lease
		select {
		case <-cs.reads:
		case <-time.After(10 * time.Second):
			t.Fatal("the host did not rescan")
		}
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if n := cs.claims[res.TurnID]; n != 0 {
		t.Fatalf("the host tried to claim a Turn another live host follows %d times", n)
	}
}

// TestHostStopsFollowingALostLease: when the host's renewal finds a
// Turn's lease taken by another process (it expired while this host was
// paused), the host stops its monitor; the new holder's writes stand.
func TestHostStopsFollowingALostLease(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 185)
	r := newRig(t, a)
	ctx := t.Context()
	h := r.start(r.svc, hostpkg.Options{LeaseTTL: 300 * time.Millisecond, Rescan: time.Hour})
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	var held store.WorkLease
	r.until("the host follows the Turn", func() bool {
		ls, err := r.st.WorkLeases(ctx, store.LeaseMonitor, []string{res.TurnID})
		if err != nil || len(ls) == 0 || ls[0].Owner != h.Owner() || ls[0].Until == 0 {
			return false
		}
		held = ls[0]
		return true
	})
	// Another process takes the lease over (as after this host's pause).
	if err := r.st.ReleaseWork(ctx, held); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := r.st.ClaimWork(ctx, store.LeaseMonitor, res.TurnID, "thief", now.UnixMilli(), now.Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	r.until("the host stops its monitor", func() bool { return h.Monitoring() == 0 })
	ls, err := r.st.WorkLeases(ctx, store.LeaseMonitor, []string{res.TurnID})
	if err != nil || len(ls) != 1 || ls[0].Owner != "thief" || ls[0].Until == 0 {
		t.Fatalf("lease after the host let go = %+v, %v; want the thief's", ls, err)
	}
}
