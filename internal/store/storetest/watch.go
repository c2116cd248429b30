package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// NewWatch returns a valid active watch of terminal key for tests.
func NewWatch(id, terminalKey string, at int64) *store.Watch {
	return &store.Watch{WatchID: id, Agent: "codex", TerminalID: "terminal:v2:tmux:codex:s:0.0:42", TerminalKey: terminalKey,
		PID: 42, ProcessBirth: "b1", SessionID: "session-w", BindingID: "binding-w", BindingGeneration: 1,
		OriginSessionKey: "agent:main:main", Status: store.WatchActive, CreatedAt: at, UpdatedAt: at, DeadlineAt: at + 60_000}
}

// RunWatches runs the terminal-watch suite.
func RunWatches(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"RoundTripAndOneActivePerTerminal", testWatchOneActive},
		{"SaveIsCASAndFinalStatusSticks", testWatchCAS},
		{"FencedByMonitorLease", testWatchFence},
		{"NotificationJoinsTheWrite", testWatchAlso},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func testWatchOneActive(t *testing.T, s store.Store) {
	ctx := t.Context()
	w := NewWatch("watch-1", "k1", 1000)
	if err := s.CreateWatch(ctx, w); err != nil {
		t.Fatal(err)
	}
	if w.Revision != 1 {
		t.Fatalf("revision after create = %d, want 1", w.Revision)
	}
	got, err := s.GetWatch(ctx, "watch-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(w, got); diff != "" {
		t.Fatalf("watch (-want +got):\n%s", diff)
	}
	if err := s.CreateWatch(ctx, NewWatch("watch-2", "k1", 1001)); !errors.Is(err, store.ErrWatched) {
		t.Fatalf("second active watch of k1: %v, want ErrWatched", err)
	}
	if err := s.CreateWatch(ctx, NewWatch("watch-1", "k9", 1001)); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate watch id: %v, want ErrExists", err)
	}
	if err := s.CreateWatch(ctx, NewWatch("watch-3", "k2", 1002)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetWatch(ctx, "watch-nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown watch: %v, want ErrNotFound", err)
	}
	got.Status, got.Settlement = store.WatchCancelled, &store.WatchSettlement{Kind: "cancelled", SettledAt: 1100}
	if err := s.SaveWatch(ctx, store.WatchWrite{Watch: got}); err != nil {
		t.Fatal(err)
	}
	// A settled watch frees the terminal for the next one.
	if err := s.CreateWatch(ctx, NewWatch("watch-2", "k1", 1200)); err != nil {
		t.Fatalf("watch after the first settled: %v", err)
	}
	active, err := s.ActiveWatches(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range active {
		ids = append(ids, a.WatchID)
	}
	if diff := cmp.Diff([]string{"watch-3", "watch-2"}, ids); diff != "" {
		t.Fatalf("active watches (-want +got):\n%s", diff)
	}
	if got, err := s.ActiveWatchIDs(ctx, 10); err != nil || !cmp.Equal(ids, got) {
		t.Fatalf("ActiveWatchIDs = %v, %v; want %v", got, err, ids)
	}
	if vs, err := s.Versions(ctx, store.VersionWatch, ids); err != nil || len(vs) != 2 {
		t.Fatalf("watch Versions = %v, %v", vs, err)
	}
	byTerm, err := s.TerminalWatches(ctx, "k1", 10)
	if err != nil {
		t.Fatal(err)
	}
	ids = nil
	for _, a := range byTerm {
		ids = append(ids, a.WatchID+":"+a.Status)
	}
	if diff := cmp.Diff([]string{"watch-2:active", "watch-1:cancelled"}, ids); diff != "" {
		t.Fatalf("terminal watches (-want +got):\n%s", diff)
	}
}

func testWatchCAS(t *testing.T, s store.Store) {
	ctx := t.Context()
	w := NewWatch("watch-1", "k1", 1000)
	if err := s.CreateWatch(ctx, w); err != nil {
		t.Fatal(err)
	}
	stale := *w
	w.NativeTurnID = "turn-a"
	if err := s.SaveWatch(ctx, store.WatchWrite{Watch: w}); err != nil {
		t.Fatal(err)
	}
	if w.Revision != 2 {
		t.Fatalf("revision after save = %d, want 2", w.Revision)
	}
	if err := s.SaveWatch(ctx, store.WatchWrite{Watch: &stale}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale save: %v, want ErrConflict", err)
	}
	moved := *w
	moved.TerminalKey = "k2"
	if err := s.SaveWatch(ctx, store.WatchWrite{Watch: &moved}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("terminal change: %v, want ErrConflict", err)
	}
	bad := *w
	bad.Status = "paused"
	if err := s.SaveWatch(ctx, store.WatchWrite{Watch: &bad}); err == nil {
		t.Fatal("unknown status saved")
	}
	w.Status = store.WatchCompleted
	if err := s.SaveWatch(ctx, store.WatchWrite{Watch: w}); err != nil {
		t.Fatal(err)
	}
	w.Status = store.WatchActive
	if err := s.SaveWatch(ctx, store.WatchWrite{Watch: w}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("reopen a completed watch: %v, want ErrConflict", err)
	}
	got, err := s.GetWatch(ctx, "watch-1")
	if err != nil || got.Status != store.WatchCompleted || got.NativeTurnID != "turn-a" || got.Revision != 3 {
		t.Fatalf("stored watch = %+v, %v", got, err)
	}
}

func testWatchFence(t *testing.T, s store.Store) {
	ctx := t.Context()
	w := NewWatch("watch-1", "k1", 1000)
	if err := s.CreateWatch(ctx, w); err != nil {
		t.Fatal(err)
	}
	l1, err := s.ClaimWork(ctx, store.LeaseWatch, "watch-1", "host-a", 1000, 2000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimWork(ctx, store.LeaseWatch, "watch-1", "host-b", 1500, 3000); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("second follower while the lease lives: %v, want ErrLeaseLost", err)
	}
	if err := s.SaveWatch(ctx, store.WatchWrite{Watch: w, Fence: &store.Fence{Owner: "host-a", Token: l1.Fence, Now: 1500}}); err != nil {
		t.Fatal(err)
	}
	// host-a's lease expires; host-b takes over and host-a's writes fail.
	l2, err := s.ClaimWork(ctx, store.LeaseWatch, "watch-1", "host-b", 2500, 4000)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveWatch(ctx, store.WatchWrite{Watch: w, Fence: &store.Fence{Owner: "host-a", Token: l1.Fence, Now: 2600}}); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("write under a lost lease: %v, want ErrLeaseLost", err)
	}
	if err := s.SaveWatch(ctx, store.WatchWrite{Watch: w, Fence: &store.Fence{Owner: "host-b", Token: l2.Fence, Now: 2600}}); err != nil {
		t.Fatal(err)
	}
}

func testWatchAlso(t *testing.T, s store.Store) {
	ctx := t.Context()
	w := NewWatch("watch-1", "k1", 1000)
	if err := s.CreateWatch(ctx, w); err != nil {
		t.Fatal(err)
	}
	cb := &store.Callback{MessageID: "msg-watch-1", TurnID: "watch-1", SessionID: "session-w", Kind: "watch_completed",
		SessionKey: "agent:main:main", Message: []byte(`{"id":"msg-watch-1","body":"done"}`), Status: termapi.CallbackPending, CreatedAt: 1100, UpdatedAt: 1100}
	boom := errors.New("boom")
	w.Status = store.WatchCompleted
	err := s.SaveWatch(ctx, store.WatchWrite{Watch: w, Also: func(ctx context.Context, tx store.TerminalTx) error {
		if err := tx.PutCallback(ctx, cb); err != nil {
			return err
		}
		return boom
	}})
	if !errors.Is(err, boom) {
		t.Fatalf("failing hook: %v, want boom", err)
	}
	if _, err := s.GetCallback(ctx, "msg-watch-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("callback after a rolled-back write: %v, want ErrNotFound", err)
	}
	if got, _ := s.GetWatch(ctx, "watch-1"); got.Status != store.WatchActive || w.Revision != 1 {
		t.Fatalf("watch after a rolled-back write: %s rev %d", got.Status, w.Revision)
	}
	if err := s.SaveWatch(ctx, store.WatchWrite{Watch: w, Also: func(ctx context.Context, tx store.TerminalTx) error {
		return tx.PutCallback(ctx, cb)
	}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.TurnCallbacks(ctx, "watch-1", 10)
	if err != nil || len(got) != 1 || got[0].MessageID != "msg-watch-1" || got[0].Status != termapi.CallbackPending {
		t.Fatalf("watch callbacks = %v, %v", got, err)
	}
}
