package terminal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/termapi"
)

// Callback kinds.
const (
	KindCompletion = "completion"
	KindApproval   = "approval"
	KindStall      = "stall"
)

// callbackID is the deterministic id of a callback message: the same
// completion (or approval, or stall) always yields the same id.
func callbackID(parts ...string) string {
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return "msg-terminal-" + hex.EncodeToString(sum[:])[:32]
}

// prepareCallback returns the hook that writes the callback of msg into the
// outbox in the Turn write's transaction, or nil when the Turn has no
// origin session. The callback is prepared only while the Turn's binding
// id and generation are the Session's current ones; otherwise a
// callback_refused event is logged and nothing is queued.
func prepareCallback(t *store.Turn, msg Message, id, kind string, meta map[string]any) func(context.Context, store.TerminalTx) error {
	if t.OriginSessionKey == "" {
		return nil
	}
	md := map[string]any{"source": "terminal_bridge", "kind": kind, "gateway_session": t.OriginSessionKey,
		"agent": t.Agent, "terminal_bridge_message_id": t.Takeover.Submission.MessageID}
	if t.UnprovenVersion != "" {
		md["unproven_version"] = t.UnprovenVersion
	}
	if len(t.AutoApprovals) > 0 {
		// The prompts a rule answered without a person: every callback
		// after one says so.
		md["auto_approvals"] = slices.Clone(t.AutoApprovals)
	}
	for k, v := range meta {
		md[k] = v
	}
	cm := outbox.CallbackMessage{ID: id, TS: msg.TS, From: msg.From, To: msg.To, Type: msg.Type, RequiresResponse: msg.RequiresResponse,
		Round: t.ResponseRoundsUsed, Body: msg.Body, SessionID: t.SessionID, TurnID: t.TurnID, ConversationID: t.TurnID, Metadata: md}
	turn := *t
	return func(ctx context.Context, tx store.TerminalTx) error {
		sess, err := tx.GetTermSession(ctx, turn.SessionID)
		if err != nil {
			return fmt.Errorf("prepare callback: %w", err)
		}
		if sess.Binding == nil || sess.Binding.BindingID != turn.TerminalBindingID || sess.Binding.Generation != turn.TerminalBindingGeneration {
			return tx.AppendTurnEvents(ctx, turn.TurnID, []store.TurnEvent{event(msg.TS, "callback_refused", map[string]any{
				"message_id": id, "reason": "the Session was re-bound (binding id or generation changed) before the callback was prepared"})})
		}
		body, err := json.Marshal(cm)
		if err != nil {
			return fmt.Errorf("prepare callback: %w", err)
		}
		cb := &store.Callback{MessageID: id, TurnID: turn.TurnID, SessionID: turn.SessionID, Kind: kind, SessionKey: turn.OriginSessionKey,
			GatewayURL: turn.GatewayURL, BindingID: turn.TerminalBindingID, Generation: turn.TerminalBindingGeneration, Message: body,
			Status: termapi.CallbackPending, NextAttemptAt: msg.TS, CreatedAt: msg.TS, UpdatedAt: msg.TS}
		if err := tx.PutCallback(ctx, cb); err != nil {
			return err
		}
		return tx.AppendTurnEvents(ctx, turn.TurnID, []store.TurnEvent{event(msg.TS, "callback_prepared",
			map[string]any{"message_id": id, "type": msg.Type, "session_key": turn.OriginSessionKey})})
	}
}
