package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

func testSessionCAS(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := TermSession("session-1", "Thread-A", "k1")
	mustCreateSession(t, s, want)
	if want.Revision != 1 {
		t.Fatalf("revision after create = %d, want 1", want.Revision)
	}
	got, err := s.GetTermSession(ctx, "session-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("session (-want +got):\n%s", diff)
	}
	stale := *got
	got.UpdatedAt = 2000
	got.Binding.LastVerifiedAt = 2000
	if err := s.SaveTermSession(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got.Revision != 2 {
		t.Fatalf("revision after save = %d, want 2", got.Revision)
	}
	if err := s.SaveTermSession(ctx, &stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale save: %v, want ErrConflict", err)
	}
	if _, err := s.GetTermSession(ctx, "session-nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	if err := s.CreateTermSession(ctx, TermSession("session-1", "Thread-B", "k1")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate session: %v, want ErrExists", err)
	}
	byThread, err := s.SessionByThread(ctx, "codex", "thread-a")
	if err != nil || byThread.SessionID != "session-1" {
		t.Fatalf("SessionByThread (case-insensitive) = %v, %v", byThread, err)
	}
	byTerm, err := s.SessionsByTerminal(ctx, "k1")
	if err != nil || len(byTerm) != 1 || byTerm[0].Revision != 2 {
		t.Fatalf("SessionsByTerminal = %v, %v", byTerm, err)
	}
}

func testBindingRules(t *testing.T, s store.Store) {
	ctx := t.Context()
	bad := TermSession("session-g2", "t-g2", "k")
	bad.Binding.Generation = 2
	if err := s.CreateTermSession(ctx, bad); !errors.Is(err, store.ErrBindingRule) {
		t.Fatalf("first binding with generation 2: %v", err)
	}
	base := TermSession("session-r", "", "k")
	mustCreateSession(t, s, base)
	edit := func(name string, f func(x *store.TermSession), want error) {
		t.Helper()
		cur, err := s.GetTermSession(ctx, "session-r")
		if err != nil {
			t.Fatal(err)
		}
		f(cur)
		err = s.SaveTermSession(ctx, cur)
		if !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("%s: %v, want %v", name, err, want)
		}
	}
	edit("refine fills the missing thread", func(x *store.TermSession) { x.Binding.NativeThreadID = "T-R" }, nil)
	edit("same binding may not change the thread", func(x *store.TermSession) { x.Binding.NativeThreadID = "T-X" }, store.ErrBindingRule)
	edit("same binding may not change the pid", func(x *store.TermSession) { x.Binding.NativeProcess.PID = 7 }, store.ErrBindingRule)
	edit("binding may not be removed", func(x *store.TermSession) { x.Binding = nil; x.Status = store.SessionDetached }, store.ErrBindingRule)
	edit("workspace immutable", func(x *store.TermSession) { x.Workspace = "/other" }, store.ErrBindingRule)
	edit("replacement skips a generation", func(x *store.TermSession) {
		x.Binding = &store.Binding{BindingID: "binding-new", Generation: 3, TerminalID: "t", TerminalKey: "k"}
	}, store.ErrBindingRule)
	edit("replacement with same id and next generation", func(x *store.TermSession) { x.Binding.Generation = 2 }, store.ErrBindingRule)
	edit("replacement with new id and generation+1", func(x *store.TermSession) {
		x.Binding = &store.Binding{BindingID: "binding-new", Generation: 2, TerminalID: "t", TerminalKey: "k", NativeThreadID: "T-R2"}
	}, nil)
	got, _ := s.GetTermSession(ctx, "session-r")
	if got.Binding.Generation != 2 || got.Revision != 3 {
		t.Fatalf("after replacement: generation %d revision %d", got.Binding.Generation, got.Revision)
	}
}

func testOneSessionPerThread(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateSession(t, s, TermSession("session-a", "THREAD-1", "k"))
	if err := s.CreateTermSession(ctx, TermSession("session-b", "thread-1", "k")); !errors.Is(err, store.ErrThreadBound) {
		t.Fatalf("second session on the same thread: %v, want ErrThreadBound", err)
	}
	if _, err := s.GetTermSession(ctx, "session-b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused session was stored: %v", err)
	}
	b := TermSession("session-b", "", "k")
	mustCreateSession(t, s, b)
	b.Binding.NativeThreadID = "Thread-1"
	if err := s.SaveTermSession(ctx, b); !errors.Is(err, store.ErrThreadBound) {
		t.Fatalf("refining to a bound thread: %v, want ErrThreadBound", err)
	}
}

// testSessionSaveInTurnWrite pins the Session write inside a Turn write
// (the completion's checkpoint): it commits with the Turn, rolls back with
// it, and keeps the compare-and-set on the Session's revision.
func testSessionSaveInTurnWrite(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-1", "t1", "k1")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn := tc.Turn
	turn.Status = termapi.TurnIdle
	checkpoint := func(anchor string, fail error) func(context.Context, store.TerminalTx) error {
		return func(ctx context.Context, tx store.TerminalTx) error {
			sess, err := tx.GetTermSession(ctx, "session-1")
			if err != nil {
				return err
			}
			sess.Binding.Checkpoint, sess.UpdatedAt = json.RawMessage(anchor), 2000
			if err := tx.SaveTermSession(ctx, sess); err != nil {
				return err
			}
			return fail
		}
	}

	// A failure after the Session save rolls back the Session, the claim
	// and the Turn together.
	boom := errors.New("host stopped")
	err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp1"), Also: checkpoint(`{"offset":1}`, boom)})
	if !errors.Is(err, boom) {
		t.Fatalf("write with failing hook: %v", err)
	}
	if got, _ := s.GetTermSession(ctx, "session-1"); got.Revision != 1 || len(got.Binding.Checkpoint) != 0 {
		t.Fatalf("session after a rolled-back write: revision %d, checkpoint %s", got.Revision, got.Binding.Checkpoint)
	}
	if got, _ := s.GetTurn(ctx, "turn-1"); got.Status != termapi.TurnCreated {
		t.Fatalf("turn after a rolled-back write: %s", got.Status)
	}

	// Committed: the Turn, the claim and the Session's checkpoint are in.
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp1"), Also: checkpoint(`{"offset":2}`, nil)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTermSession(ctx, "session-1")
	if err != nil || got.Revision != 2 || string(got.Binding.Checkpoint) != `{"offset":2}` || got.UpdatedAt != 2000 {
		t.Fatalf("session after the write = %+v (revision %d), %v", got.Binding, got.Revision, err)
	}
	if tr, _ := s.GetTurn(ctx, "turn-1"); tr.Status != termapi.TurnIdle {
		t.Fatalf("turn after the write: %s", tr.Status)
	}

	// A stale revision inside the transaction is a conflict and rolls the
	// Turn write back.
	stale := *got
	stale.Revision = 1
	turn.Status = termapi.TurnClosed
	err = s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Also: func(ctx context.Context, tx store.TerminalTx) error {
		return tx.SaveTermSession(ctx, &stale)
	}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale session save in a turn write: %v, want ErrConflict", err)
	}
	if tr, _ := s.GetTurn(ctx, "turn-1"); tr.Status != termapi.TurnIdle {
		t.Fatalf("turn after a conflicting write: %s", tr.Status)
	}
}
