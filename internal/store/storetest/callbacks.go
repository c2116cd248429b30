package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// testDeadOwnerFreesCallbackAttempts: ReleaseLeases(owner, nil), what a
// process that proved owner dead calls, frees owner's callback delivery
// attempts at once; the next claim fences the dead owner out.
func testDeadOwnerFreesCallbackAttempts(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-1", "t1", "k1")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn := tc.Turn
	turn.Status = termapi.TurnIdle
	cb := &store.Callback{MessageID: "msg-cb-1", TurnID: "turn-1", SessionID: "session-1", Kind: "completion",
		SessionKey: "agent:main:s", Message: json.RawMessage(`{"id":"msg-cb-1"}`), Status: termapi.CallbackPending,
		NextAttemptAt: 10, CreatedAt: 10, UpdatedAt: 10}
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Also: func(ctx context.Context, tx store.TerminalTx) error {
		return tx.PutCallback(ctx, cb)
	}}); err != nil {
		t.Fatal(err)
	}
	held, err := s.ClaimCallback(ctx, "msg-cb-1", "dead", 100, 120_100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimCallback(ctx, "msg-cb-1", "B", 200, 120_200); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("claim of a live attempt lease: %v, want ErrLeaseLost", err)
	}
	if n, err := s.ReleaseLeases(ctx, "someone-else", nil); err != nil || n != 0 {
		t.Fatalf("release of another owner = %d, %v", n, err)
	}
	if n, err := s.ReleaseLeases(ctx, "dead", nil); err != nil || n != 1 {
		t.Fatalf("release of the dead owner = %d, %v, want 1", n, err)
	}
	due, err := s.DueCallbacks(ctx, 200, 10)
	if err != nil || len(due) != 1 || due[0].MessageID != "msg-cb-1" {
		t.Fatalf("due after the release = %+v, %v", due, err)
	}
	b, err := s.ClaimCallback(ctx, "msg-cb-1", "B", 200, 120_200)
	if err != nil || b.LeaseToken <= held.LeaseToken {
		t.Fatalf("claim after the release = %+v, %v", b, err)
	}
	held.Status, held.LastError = termapi.CallbackFailed, "late"
	if err := s.SaveCallback(ctx, held); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the dead owner settled the callback: %v", err)
	}
	if n, err := s.ReleaseLeases(ctx, "dead", nil); err != nil || n != 0 {
		t.Fatalf("release of the dead owner again = %d, %v (B's lease must stay)", n, err)
	}
	if _, err := s.ClaimCallback(ctx, "msg-cb-1", "C", 300, 120_300); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("claim of B's attempt: %v, want ErrLeaseLost", err)
	}
}
