package storetest

import (
	"errors"
	"maps"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

func advance(t *testing.T, s store.TerminalStore, turn *store.Turn, d *store.Dispatch, status termapi.DispatchStatus) {
	t.Helper()
	nd := *d
	nd.Status = status
	if err := s.WriteTurn(t.Context(), store.TurnWrite{Turn: turn,
		Dispatch: &store.DispatchAdvance{TerminalKey: d.TerminalKey, GenerationID: d.GenerationID, Update: &nd}}); err != nil {
		t.Fatal(err)
	}
	*d = nd
}

func testDispatchLedger(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Two Sessions on one terminal share its ledger.
	a := TermSession("session-a", "ta", "term")
	b := TermSession("session-b", "tb", "term")
	mustCreateSession(t, s, a)
	mustCreateSession(t, s, b)
	tc := NewTurn("turn-a", a, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn, d := tc.Turn, tc.Dispatch
	// Every write of the entry moves its version, as Versions reports it.
	ledgerVersion := func() int64 {
		t.Helper()
		got, err := s.GetDispatch(ctx, "term")
		if err != nil {
			t.Fatal(err)
		}
		vs, err := s.Versions(ctx, store.VersionDispatch, []string{"term", "term-never"})
		if err != nil || !maps.Equal(vs, map[string]int64{"term": got.Version}) {
			t.Fatalf("dispatch Versions = %v, %v; want term at %d", vs, err, got.Version)
		}
		return got.Version
	}
	first := ledgerVersion()
	if first < 1 {
		t.Fatalf("a new ledger entry has version %d, want at least 1", first)
	}
	for _, st := range []termapi.DispatchStatus{termapi.DispatchPrepared, termapi.DispatchTextInjected, termapi.DispatchUncertain} {
		if st != termapi.DispatchPrepared {
			advance(t, s, turn, d, st)
		}
		if err := s.CreateTurn(ctx, NewTurn("turn-b", b, 11)); !errors.Is(err, store.ErrTerminalBusy) {
			t.Fatalf("ledger %s: second session's send: %v, want ErrTerminalBusy", st, err)
		}
	}
	// Uncertain blocks even after the owner Turn failed; only an explicit
	// release frees it.
	turn.Status = termapi.TurnFailed
	advance(t, s, turn, d, termapi.DispatchUncertain)
	if err := s.CreateTurn(ctx, NewTurn("turn-b", b, 11)); !errors.Is(err, store.ErrTerminalBusy) {
		t.Fatalf("uncertain after failure: %v, want ErrTerminalBusy", err)
	}
	rel := *d
	rel.ReleasedAt = 20
	advance(t, s, turn, &rel, termapi.DispatchUncertain)
	released := ledgerVersion()
	if released <= first {
		t.Fatalf("ledger version after advances = %d, want above %d", released, first)
	}
	if err := s.CreateTurn(ctx, NewTurn("turn-b", b, 11)); err != nil {
		t.Fatalf("after release: %v", err)
	}
	if v := ledgerVersion(); v != released+1 {
		t.Fatalf("ledger version after a new Turn took it = %d, want %d", v, released+1)
	}
	got, err := s.GetDispatch(ctx, "term")
	if err != nil || got.TurnID != "turn-b" || got.PreviousGenerationID != "gen-turn-a" {
		t.Fatalf("ledger = %+v, %v", got, err)
	}
	// agent_accepted blocks until the owner is released.
	tb, _ := s.GetTurn(ctx, "turn-b")
	db := *got
	tb.Status = termapi.TurnWaitingForAgent
	advance(t, s, tb, &db, termapi.DispatchAgentAccepted)
	c := TermSession("session-c", "tc", "term")
	mustCreateSession(t, s, c)
	if err := s.CreateTurn(ctx, NewTurn("turn-c", c, 12)); !errors.Is(err, store.ErrTerminalBusy) {
		t.Fatalf("accepted + running owner: %v", err)
	}
	tb.Status = termapi.TurnIdle
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: tb}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTurn(ctx, NewTurn("turn-c", c, 12)); err != nil {
		t.Fatalf("accepted + idle owner: %v", err)
	}
	// A stale generation cannot advance the ledger.
	stale := *d
	stale.Status = termapi.DispatchAgentAccepted
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn,
		Dispatch: &store.DispatchAdvance{TerminalKey: "term", GenerationID: d.GenerationID, Update: &stale}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale ledger advance: %v, want ErrConflict", err)
	}
}
