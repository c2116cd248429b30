package transition

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

// newStoreService returns a Service over a fresh SQLite store; its pane
// interfaces are unset (the tests here drive no pane).
func newStoreService(t *testing.T) (*Service, store.Store) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return New(Options{Store: st}), st
}

// TestADeadTransitionOwnersLeaseIsFreedAtOnce: a process running a
// transition is registered as its lease's owner, so once it is proven
// dead (here: its registered incarnation is not the one running under its
// pid) a host's reap frees the transition's lease at once, as it does a
// dead host's monitor leases, instead of after the two-minute lease.
func TestADeadTransitionOwnersLeaseIsFreedAtOnce(t *testing.T) {
	self := owner.Self()
	if self.Host == "" || self.Start == "" {
		t.Skip("proving a process dead needs /proc")
	}
	s, st := newStoreService(t)
	ctx := t.Context()
	release, err := s.holdWork(ctx, store.LeaseTransition, "transition-1", leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	ls, err := st.WorkLeases(ctx, store.LeaseTransition, []string{"transition-1"})
	if err != nil || len(ls) != 1 {
		t.Fatalf("transition leases = %v, %v", ls, err)
	}
	ps, err := st.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ps, func(p store.Process) bool { return p.ID == ls[0].Owner })
	if i < 0 {
		t.Fatalf("the transition's lease owner %s is not in the process registry (%+v): no reap can prove it dead", ls[0].Owner, ps)
	}
	if ps[i].Role != WorkRole {
		t.Fatalf("registered role = %q, want %q", ps[i].Role, WorkRole)
	}
	dead := ps[i]
	dead.Start = "another-boot:1" // the pid now runs another incarnation
	if err := st.Heartbeat(ctx, dead); err != nil {
		t.Fatal(err)
	}
	if _, n := self.ReapDead(ctx, st, 0, nil); n != 1 {
		t.Fatalf("reaped %d processes, want the transition's owner", n)
	}
	now := time.Now()
	if _, err := st.ClaimWork(ctx, store.LeaseTransition, "transition-1", "host-b", now.UnixMilli(), now.Add(time.Minute).UnixMilli()); err != nil {
		t.Fatalf("claim after the owner was reaped: %v, want it free at once", err)
	}
}

// TestTransitionOwnerLeavesTheRegistry: the registration lasts while the
// process holds work of its own, and ends with the last of it.
func TestTransitionOwnerLeavesTheRegistry(t *testing.T) {
	s, st := newStoreService(t)
	ctx := t.Context()
	registered := func() bool {
		t.Helper()
		ps, err := st.Processes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(ps, func(p store.Process) bool { return p.ID == selfIdentity().ID })
	}
	r1, err := s.holdWork(ctx, store.LeaseTransition, "transition-1", leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.holdWork(ctx, store.LeaseTransition, "transition-2", leaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	r1()
	if !registered() {
		t.Fatal("unregistered while a transition is still held")
	}
	r2()
	if registered() {
		t.Fatal("still registered after the last transition ended")
	}
}

// TestATransitionHoldsItsLease: while a transition runs, its process holds
// the transition's lease, renews it, and releases it when it ends.
func TestATransitionHoldsItsLease(t *testing.T) {
	s, st := newStoreService(t)
	ctx := t.Context()
	release, err := s.holdWork(ctx, store.LeaseTransition, "transition-held", 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.WorkLeases(ctx, store.LeaseTransition, []string{"transition-held"})
	if err != nil || len(first) != 1 || first[0].Owner != selfIdentity().ID {
		t.Fatalf("lease while the transition runs = %+v, %v", first, err)
	}
	poll.Until(t, 10*time.Second, "the lease is renewed", func() bool {
		ls, err := st.WorkLeases(ctx, store.LeaseTransition, []string{"transition-held"})
		return err == nil && len(ls) == 1 && ls[0].Until > first[0].Until && ls[0].Fence == first[0].Fence
	})
	release()
	ls, err := st.WorkLeases(ctx, store.LeaseTransition, []string{"transition-held"})
	if err != nil || len(ls) != 1 || ls[0].Until != 0 {
		t.Fatalf("lease after release = %+v, %v", ls, err)
	}
}
