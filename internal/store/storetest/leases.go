package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/termapi"
)

// RunWorkLeases runs the lease-table suite once per kind of terminal work
// (monitor, watch, callback, transition): claim, renewal, loss on expiry,
// the fence that rejects a stale writer, release, and the release of a
// provably dead owner's leases (owner.Identity.ReapDead).
func RunWorkLeases(t *testing.T, newStore func(t *testing.T) store.Store) {
	for _, kind := range store.LeaseKinds() {
		t.Run(kind, func(t *testing.T) {
			for _, tc := range []struct {
				name string
				fn   func(t *testing.T, s store.Store, kind string)
			}{
				{"Claim", testLeaseClaim},
				{"Renew", testLeaseRenew},
				{"LostOnExpiry", testLeaseLostOnExpiry},
				{"FenceRejectsStaleWriter", testLeaseFence},
				{"Release", testLeaseRelease},
				{"DeadOwnerReaped", testLeaseDeadOwner},
			} {
				t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t), kind) })
			}
		})
	}
}

func mustClaim(t *testing.T, s store.Store, kind, id, who string, now, until int64) store.WorkLease {
	t.Helper()
	l, err := s.ClaimWork(t.Context(), kind, id, who, now, until)
	if err != nil {
		t.Fatalf("claim %s %s by %s at %d: %v", kind, id, who, now, err)
	}
	return l
}

func leaseOf(t *testing.T, s store.Store, kind, id string) (store.WorkLease, bool) {
	t.Helper()
	ls, err := s.WorkLeases(t.Context(), kind, []string{id})
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) == 0 {
		return store.WorkLease{}, false
	}
	return ls[0], true
}

func testLeaseClaim(t *testing.T, s store.Store, kind string) {
	if _, ok := leaseOf(t, s, kind, "w-1"); ok {
		t.Fatal("a lease no one claimed is stored")
	}
	a := mustClaim(t, s, kind, "w-1", "A", 100, 200)
	if want := (store.WorkLease{Kind: kind, ID: "w-1", Owner: "A", Fence: 1, Until: 200}); a != want {
		t.Fatalf("claim = %+v, want %+v", a, want)
	}
	if got, _ := leaseOf(t, s, kind, "w-1"); got != a {
		t.Fatalf("stored lease = %+v, want %+v", got, a)
	}
	if _, err := s.ClaimWork(t.Context(), kind, "w-1", "B", 150, 250); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("claim of A's live lease by B: %v, want ErrLeaseLost", err)
	}
	// The holder may claim again (a restarted follower of the same
	// process); its fence moves on.
	if again := mustClaim(t, s, kind, "w-1", "A", 150, 250); again.Fence != 2 {
		t.Fatalf("re-claim by the holder = %+v, want fence 2", again)
	}
	// Kinds are separate rows: the same id of another kind is free.
	for _, other := range store.LeaseKinds() {
		if other != kind {
			mustClaim(t, s, other, "w-1", "B", 150, 250)
		}
	}
	for _, other := range store.LeaseKinds() {
		if got, ok := leaseOf(t, s, other, "w-1"); !ok || got.Until != 250 {
			t.Fatalf("%s lease of w-1 = %+v, want one until 250", other, got)
		}
	}
}

func testLeaseRenew(t *testing.T, s store.Store, kind string) {
	ctx := t.Context()
	mustClaim(t, s, kind, "w-1", "A", 100, 200)
	mustClaim(t, s, kind, "w-2", "A", 100, 200)
	lost, err := s.RenewWork(ctx, kind, "A", 500, []string{"w-1", "w-2", "w-never"})
	if err != nil || !slices.Equal(lost, []string{"w-never"}) {
		t.Fatalf("renew = lost %v, %v; want only the never-claimed id", lost, err)
	}
	if got, _ := leaseOf(t, s, kind, "w-2"); got.Until != 500 || got.Fence != 1 {
		t.Fatalf("renewed lease = %+v, want until 500 and the same fence", got)
	}
	if lost, err := s.RenewWork(ctx, kind, "B", 900, []string{"w-1"}); err != nil || !slices.Equal(lost, []string{"w-1"}) {
		t.Fatalf("renew of A's lease by B = lost %v, %v", lost, err)
	}
	if _, err := s.ClaimWork(ctx, kind, "w-1", "B", 400, 900); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("claim of a renewed lease before its new expiry: %v, want ErrLeaseLost", err)
	}
}

func testLeaseLostOnExpiry(t *testing.T, s store.Store, kind string) {
	ctx := t.Context()
	a := mustClaim(t, s, kind, "w-1", "A", 100, 200)
	b := mustClaim(t, s, kind, "w-1", "B", 201, 400)
	if b.Fence <= a.Fence {
		t.Fatalf("takeover fence %d, want above %d", b.Fence, a.Fence)
	}
	if lost, err := s.RenewWork(ctx, kind, "A", 600, []string{"w-1"}); err != nil || !slices.Equal(lost, []string{"w-1"}) {
		t.Fatalf("renew by the expired holder = lost %v, %v; want w-1 lost", lost, err)
	}
	if got, _ := leaseOf(t, s, kind, "w-1"); got != b {
		t.Fatalf("lease after A's late renewal = %+v, want B's %+v", got, b)
	}
}

// testLeaseFence: after a takeover the old holder can change neither the
// lease (release) nor the work it fences.
func testLeaseFence(t *testing.T, s store.Store, kind string) {
	ctx := t.Context()
	stale, write := fencedWork(t, s, kind)
	fresh := mustClaim(t, s, kind, stale.ID, "B", stale.Until+1, stale.Until+1000)
	if err := s.ReleaseWork(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if got, _ := leaseOf(t, s, kind, stale.ID); got != fresh {
		t.Fatalf("a stale release changed the lease: %+v, want %+v", got, fresh)
	}
	if write == nil {
		return // no record of this kind carries a fence of its own
	}
	if err := write(stale, stale.Until+2); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("write under the stale fence: %v, want ErrLeaseLost", err)
	}
	if err := write(fresh, stale.Until+2); err != nil {
		t.Fatalf("write under the current fence: %v", err)
	}
}

// fencedWork creates one piece of work of kind, claims it for "A" at 100
// until 200, and returns the lease and a write of the work fenced by a
// lease at now (nil for a kind whose record has no fenced write).
func fencedWork(t *testing.T, s store.Store, kind string) (store.WorkLease, func(l store.WorkLease, now int64) error) {
	t.Helper()
	ctx := t.Context()
	switch kind {
	case store.LeaseMonitor:
		ss := TermSession("session-1", "t1", "k1")
		mustCreateSession(t, s, ss)
		tc := NewTurn("turn-1", ss, 10)
		if err := s.CreateTurn(ctx, tc); err != nil {
			t.Fatal(err)
		}
		return mustClaim(t, s, kind, "turn-1", "A", 100, 200), func(l store.WorkLease, now int64) error {
			turn, err := s.GetTurn(ctx, "turn-1")
			if err != nil {
				return err
			}
			turn.Status = termapi.TurnWaitingForAgent
			return s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Fence: &store.Fence{Owner: l.Owner, Token: l.Fence, Now: now}})
		}
	case store.LeaseWatch:
		if err := s.CreateWatch(ctx, NewWatch("watch-1", "k1", 10)); err != nil {
			t.Fatal(err)
		}
		return mustClaim(t, s, kind, "watch-1", "A", 100, 200), func(l store.WorkLease, now int64) error {
			w, err := s.GetWatch(ctx, "watch-1")
			if err != nil {
				return err
			}
			return s.SaveWatch(ctx, store.WatchWrite{Watch: w, Fence: &store.Fence{Owner: l.Owner, Token: l.Fence, Now: now}})
		}
	case store.LeaseCallback:
		putCallback(t, s, "msg-cb-1")
		cb, err := s.ClaimCallback(ctx, "msg-cb-1", "A", 100, 200)
		if err != nil {
			t.Fatal(err)
		}
		return store.WorkLease{Kind: kind, ID: cb.MessageID, Owner: cb.LeaseOwner, Fence: cb.LeaseToken, Until: cb.LeaseUntil},
			func(l store.WorkLease, _ int64) error {
				cb.LeaseOwner, cb.LeaseToken, cb.Status, cb.LeaseUntil = l.Owner, l.Fence, termapi.CallbackFailed, 0
				return s.SaveCallback(ctx, cb)
			}
	}
	return mustClaim(t, s, kind, "transition-1", "A", 100, 200), nil
}

// putCallback stores a pending callback of an idle Turn, due at 10.
func putCallback(t *testing.T, s store.Store, id string) {
	t.Helper()
	ctx := t.Context()
	ss := TermSession("session-cb", "tcb", "kcb")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-cb", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	tc.Turn.Status = termapi.TurnIdle
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: tc.Turn, Also: func(ctx context.Context, tx store.TerminalTx) error {
		return tx.PutCallback(ctx, &store.Callback{MessageID: id, TurnID: "turn-cb", SessionID: "session-cb", Kind: "completion",
			SessionKey: "agent:main:s", Message: json.RawMessage(`{"id":"` + id + `"}`), Status: termapi.CallbackPending,
			NextAttemptAt: 10, CreatedAt: 10, UpdatedAt: 10})
	}}); err != nil {
		t.Fatal(err)
	}
}

func testLeaseRelease(t *testing.T, s store.Store, kind string) {
	ctx := t.Context()
	a, _ := fencedWork(t, s, kind)
	if err := s.ReleaseWork(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, _ := leaseOf(t, s, kind, a.ID)
	if got.Until != 0 || got.Fence != a.Fence {
		t.Fatalf("released lease = %+v, want until 0 and fence %d", got, a.Fence)
	}
	if lost, err := s.RenewWork(ctx, kind, "A", 900, []string{a.ID}); err != nil || len(lost) != 1 {
		t.Fatalf("renewal of a released lease = lost %v, %v; want it lost", lost, err)
	}
	// Free at once, long before the released lease would have expired,
	// and fenced: the next claim moves the fence on.
	b := mustClaim(t, s, kind, a.ID, "B", 101, 300)
	if b.Fence <= a.Fence {
		t.Fatalf("claim after release = %+v, want a fence above %d", b, a.Fence)
	}
}

// testLeaseDeadOwner: a process proven dead (its pid now runs another
// process incarnation) has every
// lease released by the one reap, so another claims its work before the
// lease would have expired; a live process's leases stay.
func testLeaseDeadOwner(t *testing.T, s store.Store, kind string) {
	ctx := t.Context()
	self := owner.Self()
	if self.Host == "" || self.Start == "" {
		t.Skip("proving a process dead needs /proc")
	}
	dead := self
	dead.ID, dead.Start = "dead-owner", "another-boot:1" // this pid, an earlier incarnation
	live := owner.Self()
	// A host registers as one; a process running a transition of its own
	// registers under a role of its own while it does: the reap frees
	// either's leases.
	role := "terminal host"
	if kind == store.LeaseTransition {
		role = "transition"
	}
	for _, p := range []owner.Identity{dead, live} {
		if err := s.Heartbeat(ctx, p.Process(role, 100)); err != nil {
			t.Fatal(err)
		}
	}
	d := mustClaim(t, s, kind, "w-dead", dead.ID, 100, 1_000_000)
	mustClaim(t, s, kind, "w-live", live.ID, 100, 1_000_000)
	if _, err := s.ClaimWork(ctx, kind, "w-dead", "B", 200, 2_000_000); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("claim before the reap: %v, want ErrLeaseLost", err)
	}
	if _, n := self.ReapDead(ctx, s, 0, nil); n != 1 {
		t.Fatalf("reaped %d processes, want 1", n)
	}
	b := mustClaim(t, s, kind, "w-dead", "B", 200, 2_000_000)
	if b.Fence <= d.Fence {
		t.Fatalf("claim after the reap = %+v, want a fence above %d", b, d.Fence)
	}
	if _, err := s.ClaimWork(ctx, kind, "w-live", "B", 200, 2_000_000); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("claim of the live process's lease: %v, want ErrLeaseLost", err)
	}
}
