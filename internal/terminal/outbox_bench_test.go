package terminal

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/store"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/termapi"
)

// BenchmarkOutboxDeliveries1000 measures how many callbacks per second the
// outbox delivers from 1000 pending ones against the fake gateway over a
// real WebSocket (clawconnect.callback answered like the plugin, then
// chat.send and agent.wait), on a SQLite store.
func BenchmarkOutboxDeliveries1000(b *testing.B) {
	fg := fakegateway.New(b, fakegateway.Options{Token: "bench-token"})
	fg.Handle(outbox.CallbackMethod, func(_ context.Context, raw json.RawMessage) (any, error) {
		var p struct {
			SessionKey string `json:"sessionKey"`
			SessionID  string `json:"session_id"`
			TurnID     string `json:"turn_id"`
			Message    struct {
				ID string `json:"id"`
			} `json:"message"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		key := "clawconnect-callback:" + p.SessionID + ":" + p.TurnID + ":" + p.Message.ID
		return map[string]any{"ok": true, "enqueued": true, "delivery_required": true, "delivery_mode": "chat.send", "message_id": p.Message.ID,
			"chat_send": map[string]any{"sessionKey": p.SessionKey, "message": "callback", "idempotencyKey": key, "deliver": true}}, nil
	})
	a := newFakeAgent(termapi.AgentCodex, 501)
	r := newRig(b, a)
	r.start(r.svc, hostpkg.Options{})
	turnID, _ := completedTurn(b, r, a, "agent:main:bench", "reply")
	r.stop()
	<-r.done
	dial := func(ctx context.Context, _ string) (outbox.Caller, error) {
		return gateway.Dial(ctx, gateway.Options{URL: fg.URL(), Token: "bench-token"})
	}
	cs := r.st
	first := outbox.New(outbox.Options{Store: cs, Owner: "bench", Dial: dial, WaitTimeout: time.Second})
	if _, err := first.DeliverDue(b.Context()); err != nil { // the completion's own callback
		b.Fatal(err)
	}
	_ = first.Close()
	var delivered int
	var spent time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if err := seedCallbacks(b.Context(), r.st, turnID, "agent:main:bench", i, 1000); err != nil {
			b.Fatal(err)
		}
		x := outbox.New(outbox.Options{Store: cs, Owner: "bench", Dial: dial, WaitTimeout: time.Second})
		b.StartTimer()
		start := time.Now()
		n, err := x.DeliverDue(b.Context())
		spent += time.Since(start)
		b.StopTimer()
		_ = x.Close()
		if err != nil || n != 1000 {
			b.Fatalf("delivered %d of 1000: %v", n, err)
		}
		delivered += n
		b.StartTimer()
	}
	b.ReportMetric(float64(delivered)/spent.Seconds(), "deliveries/s")
}

// seedCallbacks writes n pending callbacks for turnID, as n completions
// would.
func seedCallbacks(ctx context.Context, st store.Store, turnID, sessionKey string, round, n int) error {
	t, err := st.GetTurn(ctx, turnID)
	if err != nil {
		return err
	}
	sessionID := t.SessionID
	now := time.Now().UnixMilli()
	for i := range n {
		id := callbackID(turnID, "bench", fmt.Sprint(round), fmt.Sprint(i))
		msg, _ := json.Marshal(outbox.CallbackMessage{ID: id, Type: MsgDone, Body: "reply", SessionID: sessionID, TurnID: turnID, ConversationID: turnID})
		cb := &store.Callback{MessageID: id, TurnID: turnID, SessionID: sessionID, Kind: KindCompletion, SessionKey: sessionKey,
			Message: msg, Status: termapi.CallbackPending, NextAttemptAt: now, CreatedAt: now, UpdatedAt: now}
		if t, err = st.GetTurn(ctx, turnID); err != nil {
			return err
		}
		if err := st.WriteTurn(ctx, store.TurnWrite{Turn: t, Also: func(ctx context.Context, tx store.TerminalTx) error { return tx.PutCallback(ctx, cb) }}); err != nil {
			return err
		}
	}
	return nil
}
