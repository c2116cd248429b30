package terminal

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
)

// The dispatch ledger is keyed by the pane, but a Turn belongs to one agent
// process (the terminal id carries its pid). When that process dies, or
// another one starts in the same pane (respawn-pane, or a user running the
// agent again there), nothing of the old process can take the pane's input
// any more: its Turn ends stalled and releases the ledger, so the new
// process, a new terminal, is never held by it.

// reasonAgentGone is the stalled reason of a Turn whose agent process is gone.
const reasonAgentGone = "the agent process exited before the Turn completed"

// stallWrite marks t stalled with reason and returns its write: the
// stalled event and the callback that tells the sender.
func stallWrite(t *store.Turn, code, reason string, now int64) store.TurnWrite {
	stallTurn(t, now, reason)
	w := store.TurnWrite{Turn: t, Events: []store.TurnEvent{
		event(now, "conversation_stalled", map[string]any{"code": code, "reason": reason})}}
	if msg, err := newMessage(t, actorOf(t.Agent), ActorOpenClaw, MsgBlocked, "The Turn stalled: "+reason, now); err == nil {
		id := callbackID(t.TurnID, t.Takeover.Submission.MessageID, code, strconv.FormatInt(now, 10))
		w.Also = prepareCallback(t, msg, id, KindStall, map[string]any{"reason": code, "next_steps": nextSteps(t, time.UnixMilli(now))})
	}
	return w
}

// releaseInput adds to w the release of the ledger entry d if t holds it.
func releaseInput(w *store.TurnWrite, t *store.Turn, d *store.Dispatch, now int64) {
	if d == nil || d.TurnID != t.TurnID || d.ReleasedAt != 0 {
		return
	}
	nd := *d
	nd.ReleasedAt = now
	w.Dispatch = &store.DispatchAdvance{TerminalKey: d.TerminalKey, GenerationID: d.GenerationID, Update: &nd}
}

// stallAgentGone stalls a Turn whose agent process was verified dead
// (code says how far the submission got) and releases the pane's next
// input it held.
func (m *monitor) stallAgentGone(ctx context.Context, t *store.Turn, code string) error {
	d, err := m.s.o.Store.GetDispatch(ctx, t.Takeover.TerminalKey)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	now := time.Now().UnixMilli()
	w := stallWrite(t, code, reasonAgentGone, now)
	releaseInput(&w, t, d, now)
	return m.write(ctx, w)
}

// retireReplaced releases the pane's next input from a Turn sent to
// another agent process than the one p runs now: that process is gone
// from the pane, so its Turn can never take the input. A Turn still
// followed ends stalled; one already ended (stalled, or failed with an
// uncertain submission) only lets go of the ledger. A concurrent write
// (the old Turn's monitor stalling it at the same moment) is read again.
func (s *Service) retireReplaced(ctx context.Context, p agents.Pane) error {
	for range 3 {
		err := s.retireOnce(ctx, p)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return nil // still contended: creating the Turn reports the pane busy
}

func (s *Service) retireOnce(ctx context.Context, p agents.Pane) error {
	d, err := s.o.Store.GetDispatch(ctx, p.Key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil || d.TurnID == "" || d.MessageType == store.DispatchTransition {
		return err
	}
	t, err := s.o.Store.GetTurn(ctx, d.TurnID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !d.Blocks(t.Status) || (t.Takeover.AgentPID == p.PID && t.Takeover.ProcessBirth == p.Birth) {
		return nil
	}
	now := nowMs()
	w := store.TurnWrite{Turn: t, Events: []store.TurnEvent{event(now, "terminal_input_released", map[string]any{
		"reason": "agent_process_replaced", "terminal_id": p.TerminalID})}}
	if t.Status.Monitored() {
		w = stallWrite(t, "agent_process_replaced", reasonAgentGone+"; another process now runs in its pane", now)
	}
	releaseInput(&w, t, d, now)
	t.UpdatedAt = now
	if err := s.o.Store.WriteTurn(ctx, w); err != nil {
		return err
	}
	s.log.Info("released the pane's input from a turn whose agent process was replaced",
		"turn_id", t.TurnID, "pane_key", p.Key, "old_pid", t.Takeover.AgentPID, "pid", p.PID)
	s.notify()
	return nil
}
