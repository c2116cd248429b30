package terminal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"

	"github.com/clawconnect/clawconnect/internal/terminal/ids"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/termapi"
)

func ts(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// View converts a stored Turn.
func View(t *store.Turn) termapi.TurnView {
	return termapi.TurnView{
		TurnID: t.TurnID, SessionID: t.SessionID, Agent: t.Agent, TerminalID: t.Takeover.TerminalID, Status: t.Status,
		SubmissionOutcome: t.Takeover.Submission.Outcome, Result: t.Result, Approval: t.Approval, Question: t.Question,
		StalledReason: t.StalledReason, CloseReason: t.CloseReason, DetectorDiagnostic: t.Takeover.DetectorDiagnostic,
		CreatedAt: ts(t.CreatedAt), UpdatedAt: ts(t.UpdatedAt), IdleSince: ts(t.IdleSince), StalledAt: ts(t.StalledAt),
		ClosedAt: ts(t.ClosedAt), InactivityDeadline: ts(t.Takeover.InactivityDeadlineAt), HardDeadline: ts(t.Takeover.HardDeadlineAt),
		OriginSession: t.OriginSessionKey, Principal: t.Principal, NextSteps: nextSteps(t, time.Now()),
		UnprovenVersion: t.UnprovenVersion, AutoApprovals: t.AutoApprovals,
	}
}

// Running reports whether a Turn in status is still with the agent
// (termapi.Running).
func Running(status termapi.TurnStatus) bool { return status.Running() }

func (s *Service) turn(ctx context.Context, turnID string) (*store.Turn, error) {
	if err := ids.Check("turn id", "turn-", turnID); err != nil {
		return nil, err
	}
	t, err := s.o.Store.GetTurn(ctx, turnID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: no turn %s; a send prints the turn id", termapi.ErrNotFound, turnID)
	}
	return t, err
}

// Status returns the Turn.
func (s *Service) Status(ctx context.Context, turnID string) (termapi.TurnView, error) {
	t, err := s.turn(ctx, turnID)
	if err != nil {
		return termapi.TurnView{}, fmt.Errorf("status: %w", err)
	}
	v := View(t)
	if cbs, err := s.o.Store.TurnCallbacks(ctx, turnID, 1); err == nil && len(cbs) > 0 {
		cv := outbox.View(cbs[0])
		v.CallbackDelivery = &cv
	}
	return v, nil
}

// RetryCallback makes the Turn's latest callback due again with a fresh
// retry budget, reusing its message and ids (the gateway side dedups by
// them). A delivered callback is left as it is and reported.
func (s *Service) RetryCallback(ctx context.Context, turnID string) (termapi.TurnView, error) {
	t, err := s.turn(ctx, turnID)
	if err != nil {
		return termapi.TurnView{}, fmt.Errorf("retry-callback: %w", err)
	}
	cbs, err := s.o.Store.TurnCallbacks(ctx, t.TurnID, 1)
	if err != nil {
		return termapi.TurnView{}, fmt.Errorf("retry-callback: %w", err)
	}
	if len(cbs) == 0 {
		return termapi.TurnView{}, fmt.Errorf("retry-callback: %w: turn %s has no callback (it was sent without an origin session, or has not reported yet)", termapi.ErrNotFound, turnID)
	}
	if _, err := s.o.Store.RearmCallback(ctx, cbs[0].MessageID, time.Now().UnixMilli()); err != nil {
		return termapi.TurnView{}, fmt.Errorf("retry-callback: %w", err)
	}
	s.notify()
	return s.Status(ctx, turnID)
}

// waitRecheck is how often a Wait re-reads its Turn although the store's
// change feed announced nothing: the store announces a change after the
// write has committed and does not retry an announcement that failed, so
// one can be lost. (A feed that stops listening wakes every waiter
// itself.)
const waitRecheck = 5 * time.Second

// waitPoll is how often a Wait re-reads its Turn when the store has no
// change feed, so changes by other processes go unannounced.
const waitPoll = time.Second

// Wait blocks until the Turn leaves the running statuses or ctx ends, and
// returns it. It wakes on the Turn's own changes only: at once for changes
// made in this process, and on the store's change feed for changes made
// by other processes.
func (s *Service) Wait(ctx context.Context, turnID string) (termapi.TurnView, error) {
	return s.WaitFor(ctx, turnID, func(v termapi.TurnView) bool { return !Running(v.Status) })
}

// WaitFor blocks until done reports true for the Turn or ctx ends, and
// returns the Turn as done last saw it. It wakes as Wait does; done is
// called on every read, from the caller's goroutine.
func (s *Service) WaitFor(ctx context.Context, turnID string, done func(termapi.TurnView) bool) (termapi.TurnView, error) {
	// Register before the first read, so a change written after it is not
	// missed.
	mine, stop := s.waitTurn(turnID)
	defer stop()
	announced, stopFeed := s.o.Store.WatchTask(turnID)
	defer stopFeed()
	recheck := waitRecheck
	if announced == nil {
		recheck = waitPoll
	}
	timer := time.NewTimer(recheck)
	defer timer.Stop()
	for {
		t, err := s.turn(ctx, turnID)
		if err != nil {
			return termapi.TurnView{}, fmt.Errorf("wait: %w", err)
		}
		v := View(t)
		if done(v) {
			return v, nil
		}
		timer.Reset(recheck)
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("wait for turn %s: %w", turnID, ctx.Err())
		case <-mine:
		case <-announced:
		case <-timer.C:
		}
	}
}

// write stores t with events; on a conflict the caller re-reads.
func (s *Service) write(ctx context.Context, t *store.Turn, events ...store.TurnEvent) error {
	t.UpdatedAt = nowMs()
	if err := s.o.Store.WriteTurn(ctx, store.TurnWrite{Turn: t, Events: events}); err != nil {
		return err
	}
	s.notify(t.TurnID)
	return nil
}

// turnPane verifies that the Turn's binding is still its Session's current
// binding and returns its live pane (same process incarnation).
func (s *Service) turnPane(ctx context.Context, t *store.Turn) (agents.Pane, agents.Agent, error) {
	sess, err := s.o.Store.GetTermSession(ctx, t.SessionID)
	if err != nil {
		return agents.Pane{}, nil, err
	}
	if sess.Binding == nil || sess.Binding.BindingID != t.TerminalBindingID || sess.Binding.Generation != t.TerminalBindingGeneration {
		return agents.Pane{}, nil, fmt.Errorf("%w: turn %s belongs to a superseded binding of session %s", termapi.ErrRefused, t.TurnID, t.SessionID)
	}
	p, err := s.findPane(ctx, t.Takeover.TerminalKey, t.Takeover.AgentPID, t.Takeover.ProcessBirth)
	if err != nil {
		return agents.Pane{}, nil, err
	}
	a, err := s.agent(p.Agent)
	return p, a, err
}

// Respond continues a Turn that waits for OpenClaw with an answer typed
// into the pane, as a new message of the same Turn.
func (s *Service) Respond(ctx context.Context, turnID, request string) (termapi.SendResult, error) {
	payload, hash, err := submissionPayload(request)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("respond: %w", err)
	}
	t, err := s.turn(ctx, turnID)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("respond: %w", err)
	}
	if err := accepts(StepRespond, t, time.Now()); err != nil {
		return termapi.SendResult{}, fmt.Errorf("respond: %w", err)
	}
	var remote termapi.SendResult
	if ok, err := s.turnOn(ctx, t, hostOpRespond, request, &remote); ok {
		return remote, err
	}
	if t.Question != nil {
		// The agent asks in its own dialog: the answer picks a row there
		// instead of being typed as a new prompt.
		res, err := s.answer(ctx, t, payload)
		if err != nil {
			return termapi.SendResult{}, fmt.Errorf("respond: %w", err)
		}
		return res, nil
	}
	p, a, err := s.turnPane(ctx, t)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("respond: %w", err)
	}
	if _, err := s.checkScreen(ctx, a, p); err != nil {
		return termapi.SendResult{}, fmt.Errorf("respond: %w", err)
	}
	sess, err := s.o.Store.GetTermSession(ctx, t.SessionID)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("respond: %w", err)
	}
	id, err := s.identify(ctx, a, p)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("respond: %w", err)
	}
	token := freshness(sess, p, id)
	anchor, err := a.Anchor(ctx, p, id)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("respond: %w", err)
	}
	now := nowMs()
	msg, err := newMessage(t, ActorOpenClaw, actorOf(t.Agent), MsgAnswer, payload, now)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("respond: %w", err)
	}
	d := &store.Dispatch{
		TerminalKey: p.Key, GenerationID: "dispatch-" + ids.UUID(), SessionID: t.SessionID, TurnID: t.TurnID,
		MessageID: msg.ID, MessageType: MsgAnswer, RequestHash: hash, Status: termapi.DispatchPrepared,
		BindingID: t.TerminalBindingID, BindingGeneration: t.TerminalBindingGeneration, PreparedAt: now,
	}
	t.Approval = nil
	t.Takeover.Submission = store.Submission{MessageID: msg.ID, MessageType: MsgAnswer, RequestHash: hash, Text: payload,
		Status: termapi.DispatchPrepared, Anchor: anchor, PreparedAt: now}
	t.Takeover.LastActivityAt, t.Takeover.LastActivityReason = now, "respond"
	t.UpdatedAt = now
	// A monitor that still follows the waiting Turn keeps its lease (and
	// reads the answer's dispatch); otherwise the responder holds it while
	// it types.
	lease, _ := s.senderLease(ctx, t.TurnID)
	if err := s.o.Store.WriteTurn(ctx, store.TurnWrite{Turn: t, NewDispatch: d,
		Events: []store.TurnEvent{event(now, "terminal_message_submit_prepared", map[string]any{"message_id": msg.ID, "request_hash": hash})}}); err != nil {
		_ = s.o.Store.ReleaseWork(context.WithoutCancel(ctx), lease)
		if errors.Is(err, store.ErrTerminalBusy) || errors.Is(err, store.ErrConflict) {
			return termapi.SendResult{}, fmt.Errorf("respond: %w: %w", termapi.ErrRefused, err)
		}
		return termapi.SendResult{}, fmt.Errorf("respond: %w", err)
	}
	s.notify(t.TurnID)
	outcome, derr := s.dispatch(ctx, lease, t, d, p, a, token, msg)
	return termapi.SendResult{SessionID: t.SessionID, TurnID: t.TurnID, SubmissionOutcome: outcome, DoNotRetry: outcome != termapi.OutcomeNotSent}, derr
}

// approvalSettle is how long a prompt must have been shown before Approve
// presses its key.
const approvalSettle = 1500 * time.Millisecond

// Approve answers the approval prompt of a Turn waiting for OpenClaw, only
// when the pane still shows the exact prompt Status reported (fingerprint);
// an empty fingerprint means the one stored on the Turn.
func (s *Service) Approve(ctx context.Context, turnID, fingerprint string) (termapi.TurnView, error) {
	t, err := s.turn(ctx, turnID)
	if err != nil {
		return termapi.TurnView{}, fmt.Errorf("approve: %w", err)
	}
	if err := accepts(StepApprove, t, time.Now()); err != nil {
		return termapi.TurnView{}, fmt.Errorf("approve: %w", err)
	}
	var remote termapi.TurnView
	if ok, err := s.turnOn(ctx, t, hostOpApprove, fingerprint, &remote); ok {
		return remote, err
	}
	if fingerprint != "" && fingerprint != t.Approval.Fingerprint {
		return termapi.TurnView{}, fmt.Errorf("approve: %w: the approval shown for turn %s has fingerprint %s, not %s; run status again", termapi.ErrRefused, turnID, t.Approval.Fingerprint, fingerprint)
	}
	p, a, err := s.turnPane(ctx, t)
	if err != nil {
		return termapi.TurnView{}, fmt.Errorf("approve: %w", err)
	}
	// A TUI ignores keys for a moment after it draws a permission prompt
	// (so that typing cannot approve by accident): let the prompt settle.
	if wait := time.Until(time.UnixMilli(t.Approval.DetectedAt).Add(approvalSettle)); wait > 0 {
		select {
		case <-ctx.Done():
			return termapi.TurnView{}, fmt.Errorf("approve: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
	text, err := s.o.Terminals.Capture(ctx, p)
	if err != nil {
		return termapi.TurnView{}, fmt.Errorf("approve: capture pane: %w", err)
	}
	sc := a.Screen(text)
	switch {
	case sc.Approval == nil:
		return termapi.TurnView{}, fmt.Errorf("approve: %w: the pane no longer shows the approval prompt", termapi.ErrRefused)
	case sc.Approval.Fingerprint != t.Approval.Fingerprint:
		return termapi.TurnView{}, fmt.Errorf("approve: %w: the pane shows a different approval prompt than the one reported; run status again", termapi.ErrRefused)
	case !sc.Approval.Approvable:
		return termapi.TurnView{}, fmt.Errorf("approve: %w: the prompt does not have the exact shape that can be answered safely; answer it in the terminal", termapi.ErrRefused)
	}
	// One writer per resolution: the approve claims the prompt before it
	// presses the key, and the monitor leaves a claimed prompt's closing
	// to it. Without the claim a monitor that sees the prompt vanish first
	// logs the bridge's own key press as a human's answer.
	fp := t.Approval.Fingerprint
	t.Takeover.ApprovingFingerprint, t.Takeover.ApprovingAt = fp, nowMs()
	if err := s.write(ctx, t); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return termapi.TurnView{}, fmt.Errorf("approve: %w: turn %s changed while it was being approved; run status again", termapi.ErrRefused, turnID)
		}
		return termapi.TurnView{}, fmt.Errorf("approve: %w", err)
	}
	keys, _ := a.Keys()
	if err := s.o.Terminals.SendKeys(ctx, p, keys...); err != nil {
		s.releaseApproval(context.WithoutCancel(ctx), turnID, fp)
		return termapi.TurnView{}, fmt.Errorf("approve: press the approve key: %w", err)
	}
	for {
		now := nowMs()
		if t.Takeover.ApprovingFingerprint != fp {
			// The monitor recorded it for an approver that took too long.
			break
		}
		t.Takeover.ApprovingFingerprint, t.Takeover.ApprovingAt = "", 0
		t.Takeover.ApprovalResolvedAt = now
		if t.Status == termapi.TurnWaitingForOpenClaw && t.Approval != nil && t.Approval.Fingerprint == fp {
			approvalAnswered(t)
			t.Takeover.LastActivityAt, t.Takeover.LastActivityReason = now, "approved"
		}
		// The key was pressed: the approval is recorded even when the Turn
		// has moved on meanwhile (a new prompt, a completion, a cancel).
		err := s.write(context.WithoutCancel(ctx), t, event(now, "terminal_bridge_approval_resolved", map[string]any{"fingerprint": fp, "decision": "approve"}))
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrConflict) {
			return termapi.TurnView{}, fmt.Errorf("approve: the key was pressed but recording it failed: %w", err)
		}
		if t, err = s.turn(context.WithoutCancel(ctx), turnID); err != nil {
			return termapi.TurnView{}, fmt.Errorf("approve: %w", err)
		}
	}
	s.startMonitor(ctx, t.TurnID)
	return View(t), nil
}

// releaseApproval drops an approve's claim on prompt fp after its key
// could not be pressed, so that the monitor reads the prompt's closing
// again.
func (s *Service) releaseApproval(ctx context.Context, turnID, fp string) {
	for range 5 {
		t, err := s.turn(ctx, turnID)
		if err != nil || t.Takeover.ApprovingFingerprint != fp {
			return
		}
		t.Takeover.ApprovingFingerprint, t.Takeover.ApprovingAt = "", 0
		if err := s.write(ctx, t); !errors.Is(err, store.ErrConflict) {
			return
		}
	}
}

// Cancel interrupts the agent (Codex C-c, Claude Escape) and marks the Turn
// cancelled at once, with one cancelled callback to its origin session. An
// approval prompt the bridge cannot answer safely is left on the screen for
// a human (no key is pressed into it); it still refuses while some other
// dialog covers the pane.
func (s *Service) Cancel(ctx context.Context, turnID string) (termapi.TurnView, error) {
	t, err := s.turn(ctx, turnID)
	if err != nil {
		return termapi.TurnView{}, fmt.Errorf("cancel: %w", err)
	}
	if err := accepts(StepCancel, t, time.Now()); err != nil {
		return termapi.TurnView{}, fmt.Errorf("cancel: %w", err)
	}
	var remote termapi.TurnView
	if ok, err := s.turnOn(ctx, t, hostOpCancel, "", &remote); ok {
		return remote, err
	}
	p, a, err := s.turnPane(ctx, t)
	keysSent, left := false, ""
	switch {
	case err == nil:
		text, cerr := s.o.Terminals.Capture(ctx, p)
		if cerr != nil {
			return termapi.TurnView{}, fmt.Errorf("cancel: capture pane: %w", cerr)
		}
		switch sc := a.Screen(text); {
		case sc.Dialog:
			return termapi.TurnView{}, fmt.Errorf("cancel: %w: the pane shows a dialog that cannot be dismissed safely; handle it in the terminal", termapi.ErrRefused)
		case sc.Approval != nil && !sc.Approval.Approvable:
			// Any key could answer a prompt of a shape not recognised:
			// the agent waits at it, and a human decides.
			left = sc.Approval.Fingerprint
		default:
			_, keys := a.Keys()
			if err := s.o.Terminals.SendKeys(ctx, p, keys...); err != nil {
				return termapi.TurnView{}, fmt.Errorf("cancel: send the interrupt key: %w", err)
			}
			keysSent = true
		}
	case errors.Is(err, termapi.ErrRefused):
		// The pane or process is gone: nothing to interrupt.
	default:
		return termapi.TurnView{}, fmt.Errorf("cancel: %w", err)
	}
	body := "The Turn was cancelled through ClawConnect; the agent was sent its interrupt key."
	switch {
	case left != "":
		body = "The Turn was cancelled through ClawConnect; the approval prompt it waited at is left in the terminal for a human to answer."
	case !keysSent:
		body = "The Turn was cancelled through ClawConnect; its pane or agent process was gone, so nothing was interrupted."
	}
	for {
		now := nowMs()
		cancelTurn(t, now)
		data := map[string]any{"keys_sent": keysSent}
		if left != "" {
			data["prompt_left_in_terminal"] = left
		}
		w := store.TurnWrite{Turn: t, Events: []store.TurnEvent{event(now, "terminal_cancel_requested", data)}}
		if msg, merr := newMessage(t, actorOf(t.Agent), ActorOpenClaw, MsgCancelled, body, now); merr == nil {
			// One cancelled callback per Turn: only one write moves it to
			// cancelled, and the id is the Turn's.
			msg.ID = callbackID(t.TurnID, MsgCancelled)
			ApplyMessage(t, msg)
			w.Events = append(w.Events, event(now, "message", msg))
			w.Also = prepareCallback(t, msg, msg.ID, KindCancellation, map[string]any{"cancelled_by": CancelledByCaller,
				"keys_sent": keysSent, "next_steps": nextSteps(t, time.UnixMilli(now))})
		}
		t.UpdatedAt = now
		err := s.o.Store.WriteTurn(context.WithoutCancel(ctx), w)
		if err == nil {
			s.notify()
			return View(t), nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return termapi.TurnView{}, fmt.Errorf("cancel: %w", err)
		}
		if t, err = s.turn(ctx, turnID); err != nil {
			return termapi.TurnView{}, fmt.Errorf("cancel: %w", err)
		}
		if accepts(StepCancel, t, time.Now()) != nil {
			return View(t), nil
		}
	}
}

// Renew resumes a stalled Turn before its hard deadline: a new inactivity
// deadline, and the monitor follows it again.
func (s *Service) Renew(ctx context.Context, turnID string, minutes float64) (termapi.TurnView, error) {
	t, err := s.turn(ctx, turnID)
	if err != nil {
		return termapi.TurnView{}, fmt.Errorf("renew: %w", err)
	}
	now := time.Now()
	if err := accepts(StepRenew, t, now); err != nil {
		return termapi.TurnView{}, fmt.Errorf("renew: %w", err)
	}
	if minutes < 0 {
		return termapi.TurnView{}, fmt.Errorf("renew: %w: minutes must be positive", termapi.ErrBadInput)
	}
	if minutes > 0 {
		t.Takeover.InactivityTimeoutMinutes = minutes
	}
	renewTurn(t, now, "renewed")
	if err := s.write(ctx, t, event(now.UnixMilli(), "terminal_bridge_renewed", map[string]any{"inactivity_timeout_minutes": t.Takeover.InactivityTimeoutMinutes})); err != nil {
		return termapi.TurnView{}, fmt.Errorf("renew: %w", err)
	}
	s.startMonitor(ctx, t.TurnID)
	return View(t), nil
}

// Close ends a Turn that is no longer with the agent (idle, failed,
// stalled, waiting for OpenClaw) and releases the terminal's next input if
// this Turn held it in an unresolved state (a not-accepted or uncertain
// submission that a human has looked at).
func (s *Service) Close(ctx context.Context, turnID, reason string) (termapi.TurnView, error) {
	t, err := s.turn(ctx, turnID)
	if err != nil {
		return termapi.TurnView{}, fmt.Errorf("close: %w", err)
	}
	if err := accepts(StepClose, t, time.Now()); err != nil {
		return termapi.TurnView{}, fmt.Errorf("close: %w", err)
	}
	if reason == "" {
		reason = "closed_by_user"
	}
	now := nowMs()
	w := store.TurnWrite{Turn: t, Events: []store.TurnEvent{event(now, "turn_closed", map[string]any{"reason": reason})}}
	if d, err := s.o.Store.GetDispatch(ctx, t.Takeover.TerminalKey); err == nil && d.TurnID == t.TurnID && d.ReleasedAt == 0 {
		nd := *d
		nd.ReleasedAt = now
		w.Dispatch = &store.DispatchAdvance{TerminalKey: d.TerminalKey, GenerationID: d.GenerationID, Update: &nd}
	}
	closeTurn(t, now, reason)
	if err := s.o.Store.WriteTurn(ctx, w); err != nil {
		return termapi.TurnView{}, fmt.Errorf("close: %w", err)
	}
	s.notify(t.TurnID)
	return View(t), nil
}
