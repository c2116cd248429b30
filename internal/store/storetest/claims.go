package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

func claimFor(turn string, fp string) *store.CompletionClaim {
	return &store.CompletionClaim{TurnID: turn, MessageID: "msg-" + turn, CompletionFingerprint: fp,
		CompletionID: "c-" + fp, CallbackMessageID: "msg-cb-" + fp, Outcome: "completed", ClaimedAt: 50}
}

func testCompletionClaim(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-1", "t1", "k1")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn := tc.Turn
	// A failing Also hook rolls back the claim with everything else.
	turn.Status = termapi.TurnIdle
	boom := errors.New("outbox full")
	err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp1"),
		Also: func(ctx context.Context, tx store.TerminalTx) error {
			if err := tx.AppendTurnEvents(ctx, "turn-1", []store.TurnEvent{{TS: 1, Type: "outbox"}}); err != nil {
				return err
			}
			return boom
		}})
	if !errors.Is(err, boom) {
		t.Fatalf("write with failing hook: %v", err)
	}
	if _, err := s.GetCompletionClaim(ctx, "turn-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim survived a rolled-back write: %v", err)
	}
	if ev, _ := s.TurnEvents(ctx, "turn-1", 0, 10); len(ev) != 1 {
		t.Fatalf("events of the rolled-back write kept: %+v", ev)
	}
	err = s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp1"),
		Also: func(ctx context.Context, tx store.TerminalTx) error {
			return tx.AppendTurnEvents(ctx, "turn-1", []store.TurnEvent{{TS: 1, Type: "outbox"}})
		}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCompletionClaim(ctx, "turn-1")
	if err != nil || got.CompletionFingerprint != "fp1" {
		t.Fatalf("claim = %+v, %v", got, err)
	}
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp2")}); !errors.Is(err, store.ErrClaimed) {
		t.Fatalf("second different claim: %v, want ErrClaimed", err)
	}
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp1")}); err != nil {
		t.Fatalf("same claim again (a resumed monitor): %v", err)
	}
}

func testConcurrentClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-1", "t1", "k1")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			turn, err := s.GetTurn(ctx, "turn-1")
			if err != nil {
				t.Error(err)
				return
			}
			if turn.Status != termapi.TurnCreated {
				return
			}
			turn.Status = termapi.TurnIdle
			err = s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", fmt.Sprint("fp", i)),
				Events: []store.TurnEvent{{TS: 1, Type: "terminal_bridge_completion_claimed"}}})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrClaimed):
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d completions won, want exactly 1", wins.Load())
	}
	ev, _ := s.TurnEvents(ctx, "turn-1", 0, 100)
	n := 0
	for _, e := range ev {
		if e.Type == "terminal_bridge_completion_claimed" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d completion events, want 1", n)
	}
}
