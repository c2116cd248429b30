package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/request"

	"github.com/clawconnect/clawconnect/internal/terminal/ids"
	"github.com/clawconnect/clawconnect/internal/terminal/transition"
	"github.com/clawconnect/clawconnect/termapi"
)

// submissionPayload checks a request and returns the exact text sent and
// its sha256 hex.
func submissionPayload(text string) (string, string, error) {
	p, err := request.Prepare(text)
	switch {
	case errors.Is(err, request.ErrEmpty):
		return "", "", fmt.Errorf("%w: the request is empty; say what the agent should do", termapi.ErrBadInput)
	case errors.Is(err, request.ErrSlashCommand):
		return "", "", fmt.Errorf("%w: %w; terminal sends never run native commands, so nothing was typed", termapi.ErrBadInput, err)
	case err != nil:
		return "", "", fmt.Errorf("%w: %w; nothing was typed", termapi.ErrBadInput, err)
	}
	return p.Text, p.Hash, nil
}

// checkPrincipal validates the MCP caller a Turn is sent for.
func checkPrincipal(p string) error {
	if len(p) > 256 {
		return fmt.Errorf("%w: the principal is longer than 256 bytes", termapi.ErrBadInput)
	}
	for _, r := range p {
		if r < ' ' || r == 0x7f {
			return fmt.Errorf("%w: the principal %q contains a control character", termapi.ErrBadInput, p)
		}
	}
	return nil
}

// Send starts a new Turn: it verifies the target, takes the terminal's next
// input in the store, types the request, presses Enter, and waits (at most
// the acceptance timeout) for native evidence that the agent took it. The
// Turn is then followed by the monitor host. Bad input and a target that
// cannot take the request are refused before anything changes.
func (s *Service) Send(ctx context.Context, req termapi.SendRequest) (termapi.SendResult, error) {
	payload, hash, err := submissionPayload(req.Request)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("send: %w", err)
	}
	if err := ids.CheckSessionKey(req.OriginSession); err != nil {
		return termapi.SendResult{}, fmt.Errorf("send: %w", err)
	}
	if err := checkPrincipal(req.Principal); err != nil {
		return termapi.SendResult{}, fmt.Errorf("send: %w", err)
	}
	if err := termapi.CheckTimeouts(req); err != nil {
		return termapi.SendResult{}, fmt.Errorf("send: %w", err)
	}
	if req.GatewayURL == "" {
		req.GatewayURL = s.o.CallbackGateway
	}
	if (req.SessionID == "") == (req.TerminalID == "") {
		return termapi.SendResult{}, fmt.Errorf("send: %w: give exactly one of a session id (session_exact; --session on the command line) or a terminal id (terminal_follow_current; --terminal), as `clawconnect terminal list` shows them", termapi.ErrBadInput)
	}
	if host, ok := s.sendHost(ctx, req); ok {
		return s.sendOn(ctx, host, req)
	}
	var (
		sess *store.TermSession
		p    agents.Pane
		a    agents.Agent
		id   agents.Identity
	)
	if req.SessionID != "" {
		if err := ids.Check("session id", "session-", req.SessionID); err != nil {
			return termapi.SendResult{}, fmt.Errorf("send: %w", err)
		}
		if sess, p, a, id, err = s.exactTarget(ctx, req.SessionID); err != nil {
			return termapi.SendResult{}, fmt.Errorf("send: %w", err)
		}
	} else {
		if err := ids.CheckTerminal(req.TerminalID); err != nil {
			return termapi.SendResult{}, fmt.Errorf("send: %w", err)
		}
		if p, a, id, err = s.followTarget(ctx, req.TerminalID); err != nil {
			return termapi.SendResult{}, fmt.Errorf("send: %w", err)
		}
		if err := transition.CheckSwitch(ctx, s.o.Store, p, id); err != nil {
			return termapi.SendResult{}, fmt.Errorf("send: %w", err)
		}
	}
	if _, err := s.checkScreen(ctx, a, p); err != nil {
		return termapi.SendResult{}, fmt.Errorf("send: %w", err)
	}
	unproven, err := s.checkVersion(a, p)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("send: %w", err)
	}
	if sess == nil {
		if sess, err = s.followSession(ctx, p, id); err != nil {
			return termapi.SendResult{}, fmt.Errorf("send: %w", err)
		}
	}
	token := freshness(sess, p, id)
	anchor, err := a.Anchor(ctx, p, id)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("send: anchor the session file: %w", err)
	}
	now := time.Now()
	inact, hard := s.o.InactivityTimeout, s.o.HardTimeout
	if req.InactivityTimeout > 0 {
		inact = req.InactivityTimeout
	}
	if req.HardTimeout > 0 {
		hard = req.HardTimeout
	}
	ctrl, _ := json.Marshal(p)
	turn := &store.Turn{
		TurnID: ids.Turn(now), SessionID: sess.SessionID, Agent: sess.Agent, Workspace: sess.Workspace,
		TerminalBindingID: sess.Binding.BindingID, TerminalBindingGeneration: sess.Binding.Generation,
		NativeThreadID: id.ThreadID, UserRequest: payload, Status: termapi.TurnCreated,
		CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli(),
		OriginSessionKey: req.OriginSession, GatewayURL: req.GatewayURL, Principal: req.Principal, UnprovenVersion: unproven,
		Takeover: store.Takeover{
			TerminalID: p.TerminalID, TerminalKey: p.Key, TerminalControl: ctrl, AgentPID: p.PID, ProcessBirth: p.Birth,
			RequestText: payload, StartedAt: now.UnixMilli(),
			InactivityTimeoutMinutes: inact.Minutes(), HardTimeoutMinutes: hard.Minutes(),
			InactivityDeadlineAt: now.Add(inact).UnixMilli(), HardDeadlineAt: now.Add(hard).UnixMilli(),
			LastActivityAt: now.UnixMilli(), LastActivityReason: "send",
		},
	}
	msg, err := newMessage(turn, ActorOpenClaw, actorOf(sess.Agent), MsgTask, payload, now.UnixMilli())
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("send: %w", err)
	}
	turn.Takeover.Submission = store.Submission{MessageID: msg.ID, MessageType: MsgTask, RequestHash: hash,
		Status: termapi.DispatchPrepared, Anchor: anchor, PreparedAt: now.UnixMilli()}
	d := &store.Dispatch{
		TerminalKey: p.Key, GenerationID: "dispatch-" + ids.UUID(), SessionID: sess.SessionID, TurnID: turn.TurnID,
		MessageID: msg.ID, MessageType: MsgTask, RequestHash: hash, Status: termapi.DispatchPrepared,
		BindingID: sess.Binding.BindingID, BindingGeneration: sess.Binding.Generation, PreparedAt: now.UnixMilli(),
	}
	if err := s.retireReplaced(ctx, p); err != nil {
		return termapi.SendResult{}, fmt.Errorf("send: %w", err)
	}
	s.sealTurn(turn)
	// The sender holds the Turn's monitor lease from before the Turn exists,
	// so no host's rescan can start a monitor that writes under the send.
	lease, err := s.senderLease(ctx, turn.TurnID)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("send: %w", err)
	}
	err = s.o.Store.CreateTurn(ctx, store.TurnCreate{Turn: turn, Dispatch: d,
		Events: []store.TurnEvent{event(now.UnixMilli(), "terminal_message_submit_prepared", map[string]any{"message_id": msg.ID, "request_hash": hash})}})
	if err != nil {
		_ = s.o.Store.ReleaseWork(context.WithoutCancel(ctx), lease)
		if errors.Is(err, store.ErrTerminalBusy) || errors.Is(err, store.ErrConflict) {
			return termapi.SendResult{}, fmt.Errorf("send: %w: %w; wait for it, or cancel/close it first", termapi.ErrRefused, err)
		}
		return termapi.SendResult{}, fmt.Errorf("send: %w", err)
	}
	s.notify(turn.TurnID)
	res := termapi.SendResult{SessionID: sess.SessionID, TurnID: turn.TurnID}
	outcome, derr := s.dispatch(ctx, lease, turn, d, p, a, token, msg)
	res.SubmissionOutcome = outcome
	res.DoNotRetry = outcome != termapi.OutcomeNotSent
	return res, derr
}

// advance writes turn with the ledger moved to status (and fields set by
// f), retrying nothing: a conflict is returned.
func (s *Service) advance(ctx context.Context, turn *store.Turn, d *store.Dispatch, status termapi.DispatchStatus, evType string, data any) error {
	now := nowMs()
	prev := d.GenerationID
	nd := *d
	nd.Status = status
	switch status {
	case termapi.DispatchTextInjected:
		nd.TextInjectedAt = now
	case termapi.DispatchEnterDispatched:
		nd.EnterDispatchedAt = now
	case termapi.DispatchAgentAccepted:
		nd.AgentAcceptedAt = now
	case termapi.DispatchNotAccepted:
		nd.NotAcceptedAt = now
	case termapi.DispatchUncertain:
		nd.UncertainAt = now
	}
	turn.Takeover.Submission.Status = status
	turn.UpdatedAt = now
	err := s.o.Store.WriteTurn(ctx, store.TurnWrite{Turn: turn,
		Dispatch: &store.DispatchAdvance{TerminalKey: d.TerminalKey, GenerationID: prev, Update: &nd},
		Events:   []store.TurnEvent{event(now, evType, data)}})
	if err != nil {
		return err
	}
	*d = nd
	s.notify(turn.TurnID)
	return nil
}

// failSubmission ends a submission that never reached the agent: the
// ledger records status, the Turn fails with reason.
func (s *Service) failSubmission(ctx context.Context, turn *store.Turn, d *store.Dispatch, status termapi.DispatchStatus, outcome, reason string, cause error) (string, error) {
	ctx = context.WithoutCancel(ctx)
	d.Error = reason
	if status == termapi.DispatchAborted && outcome == termapi.OutcomeNotSent {
		d.SafeToRetry = true
	}
	failTurn(turn, "submission_"+outcome, reason)
	turn.Takeover.Submission.Outcome = outcome
	if err := s.advance(ctx, turn, d, status, "terminal_message_"+outcome, map[string]any{"reason": reason}); err != nil {
		return outcome, errors.Join(cause, err)
	}
	return outcome, fmt.Errorf("%s: %w", reason, cause)
}

// senderLeaseTTL bounds how long a send keeps the Turn's monitor lease; a
// sender that dies mid-send leaves the Turn to a monitor after it.
const senderLeaseTTL = 60 * time.Second

// senderLease takes the Turn's monitor lease for a send, before the write
// that makes the Turn one a monitor follows: while a sender holds it no
// monitor (of any process) writes the Turn.
func (s *Service) senderLease(ctx context.Context, turnID string) (store.MonitorLease, error) {
	now := time.Now()
	l, err := s.o.Store.ClaimWork(ctx, store.LeaseMonitor, turnID, "send-"+ids.UUID(), now.UnixMilli(), now.Add(senderLeaseTTL).UnixMilli())
	if errors.Is(err, store.ErrLeaseLost) {
		return l, fmt.Errorf("%w: a monitor is still following this Turn; retry in a moment: %w", termapi.ErrRefused, err)
	}
	return l, err
}

// dispatch types msg into the pane, presses Enter and waits for acceptance
// under the sender's lease, then releases it and hands the Turn to the
// host. Nothing past prepared is retried.
func (s *Service) dispatch(ctx context.Context, lease store.MonitorLease, turn *store.Turn, d *store.Dispatch, p agents.Pane, a agents.Agent, token string, msg Message) (string, error) {
	outcome, err := s.dispatchLocked(ctx, turn, d, p, a, token, msg)
	_ = s.o.Store.ReleaseWork(context.WithoutCancel(ctx), lease)
	if outcome == termapi.OutcomeAccepted || outcome == termapi.OutcomePendingAcceptance {
		s.startMonitor(ctx, turn.TurnID)
	}
	return outcome, err
}

func (s *Service) dispatchLocked(ctx context.Context, turn *store.Turn, d *store.Dispatch, p agents.Pane, a agents.Agent, token string, msg Message) (string, error) {
	text := turn.Takeover.RequestText
	if msg.Type == MsgAnswer {
		text = msg.Body
	}
	if err := s.o.Terminals.SendText(ctx, p, text); err != nil {
		if errors.Is(err, termapi.ErrInputNotSent) {
			return s.failSubmission(ctx, turn, d, termapi.DispatchAborted, termapi.OutcomeNotSent, "the terminal refused the text; nothing was typed", err)
		}
		return s.failSubmission(ctx, turn, d, termapi.DispatchUncertain, termapi.OutcomeUncertain,
			"typing the text may or may not have reached the pane; it is never sent again — look at the pane, then close the Turn", err)
	}
	if err := s.advance(ctx, turn, d, termapi.DispatchTextInjected, "terminal_message_text_injected", map[string]any{"message_id": msg.ID}); err != nil {
		return termapi.OutcomeUncertain, err
	}
	// Enter submits whatever the composer holds, so it is pressed only once
	// the composer shows exactly the text typed: not a mode the text
	// switched on, a command it turned into, or a human's keys mixed in.
	if !waitDraft(ctx, s.o.Terminals, s.o.DraftTimeout, p, func(screen string) bool { return a.DraftVisible(screen, text) }) {
		return s.failSubmission(ctx, turn, d, termapi.DispatchAborted, termapi.OutcomeNotAccepted,
			"the draft did not show in the "+agentName(p.Agent)+" composer as typed, so Enter was not pressed; the text is left in the composer — clear it in the terminal", termapi.ErrRefused)
	}
	if err := s.revalidate(ctx, turn, p, a, token); err != nil {
		return s.failSubmission(ctx, turn, d, termapi.DispatchAborted, termapi.OutcomeNotAccepted,
			"the pane changed before Enter; the text is left in the composer", err)
	}
	if err := s.o.Terminals.SendKeys(ctx, p, "Enter"); err != nil {
		status, outcome := termapi.DispatchUncertain, termapi.OutcomeUncertain
		if errors.Is(err, termapi.ErrInputNotSent) {
			status, outcome = termapi.DispatchAborted, termapi.OutcomeNotAccepted
		}
		return s.failSubmission(ctx, turn, d, status, outcome, "pressing Enter failed; the request is not resent", err)
	}
	ApplyMessage(turn, msg)
	if err := s.advance(ctx, turn, d, termapi.DispatchEnterDispatched, "message", msg); err != nil {
		return termapi.OutcomeUncertain, err
	}
	return s.awaitAcceptance(ctx, turn, d, p, a, text)
}

// agentName is the product name of an agent kind, for messages.
func agentName(kind string) string {
	switch kind {
	case termapi.AgentCodex:
		return "Codex"
	case termapi.AgentClaude:
		return "Claude Code"
	}
	return kind
}

// waitDraft polls the screen until shown holds for it (the composer shows
// the draft) on two consecutive captures at least 120 ms apart, within
// timeout.
func waitDraft(ctx context.Context, terms Terminals, timeout time.Duration, p agents.Pane, shown func(screen string) bool) bool {
	deadline := time.Now().Add(timeout)
	var firstSeen time.Time
	for {
		screen, err := terms.Capture(ctx, p)
		if err == nil && shown(screen) {
			if firstSeen.IsZero() {
				firstSeen = time.Now()
			} else if time.Since(firstSeen) >= 120*time.Millisecond {
				return true
			}
		} else {
			firstSeen = time.Time{}
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(30 * time.Millisecond):
		}
	}
}

// revalidate re-derives the freshness token from the live pane.
func (s *Service) revalidate(ctx context.Context, turn *store.Turn, p agents.Pane, a agents.Agent, token string) error {
	sess, err := s.o.Store.GetTermSession(ctx, turn.SessionID)
	if err != nil {
		return err
	}
	live, err := s.findPane(ctx, p.Key, p.PID, p.Birth)
	if err != nil {
		return err
	}
	id, err := s.identify(ctx, a, live)
	if err != nil {
		return err
	}
	if freshness(sess, live, id) != token {
		return fmt.Errorf("%w: the session binding or native context changed during the send", termapi.ErrRefused)
	}
	return nil
}

// awaitAcceptance polls native acceptance every 50 ms up to the acceptance
// timeout.
func (s *Service) awaitAcceptance(ctx context.Context, turn *store.Turn, d *store.Dispatch, p agents.Pane, a agents.Agent, text string) (string, error) {
	deadline := time.Now().Add(s.o.AcceptanceTimeout)
	var lastErr error
	for {
		// A detector error may be transient (a file being rotated or
		// opened); it decides only if it persists to the deadline.
		acc, err := a.Accepted(ctx, p, turn.Takeover.Submission.Anchor, text)
		lastErr = err
		if err == nil && acc != nil {
			return termapi.OutcomeAccepted, s.accept(ctx, turn, d, *acc)
		}
		if time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return termapi.OutcomePendingAcceptance, nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	if lastErr != nil {
		return s.failSubmission(ctx, turn, d, termapi.DispatchUncertain, termapi.OutcomeUncertain,
			"the session file could not prove whether the agent took the request ("+Redact(lastErr.Error())+")", lastErr)
	}
	if screen, err := s.o.Terminals.Capture(ctx, p); err == nil && a.DraftVisible(screen, text) {
		return s.failSubmission(ctx, turn, d, termapi.DispatchNotAccepted, termapi.OutcomeNotAccepted,
			"the agent did not take the request: it is still in the composer", termapi.ErrRefused)
	}
	turn.Takeover.Submission.Outcome = termapi.OutcomePendingAcceptance
	if err := s.o.Store.WriteTurn(context.WithoutCancel(ctx), store.TurnWrite{Turn: turn}); err != nil {
		return termapi.OutcomePendingAcceptance, err
	}
	return termapi.OutcomePendingAcceptance, nil
}

// accept records acceptance evidence and, for a virgin pane, binds the
// Session to the native thread that took the request. A respond types
// while the Turn's monitor still follows it, so the monitor may have
// written the Turn meanwhile (often recording this very acceptance): on a
// conflict the Turn is read again, and the acceptance is recorded on the
// fresh copy unless it is there already.
func (s *Service) accept(ctx context.Context, turn *store.Turn, d *store.Dispatch, acc agents.Acceptance) error {
	ctx = context.WithoutCancel(ctx)
	msgID := turn.Takeover.Submission.MessageID
	for range 3 {
		err := s.recordAcceptance(ctx, turn, d, acc)
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		fresh, gerr := s.o.Store.GetTurn(ctx, turn.TurnID)
		if gerr != nil {
			return errors.Join(err, gerr)
		}
		fd, gerr := s.o.Store.GetDispatch(ctx, turn.Takeover.TerminalKey)
		if gerr != nil {
			return errors.Join(err, gerr)
		}
		if fresh.Takeover.Submission.MessageID != msgID || fd.MessageID != msgID {
			return err // another message took the Turn or the terminal
		}
		*turn, *d = *fresh, *fd
		if sub := fresh.Takeover.Submission; sub.Status != termapi.DispatchEnterDispatched {
			return nil // the monitor recorded the acceptance (or an end) first
		}
	}
	return store.ErrConflict
}

func (s *Service) recordAcceptance(ctx context.Context, turn *store.Turn, d *store.Dispatch, acc agents.Acceptance) error {
	turn.Takeover.Submission.Outcome = termapi.OutcomeAccepted
	turn.Takeover.Submission.NativeTurnID = acc.NativeTurnID
	turn.Takeover.Submission.AcceptanceEvidence = acc.Evidence
	turn.Takeover.Submission.AcceptedAt = nowMs()
	if turn.NativeThreadID == "" && acc.ThreadID != "" {
		turn.NativeThreadID = acc.ThreadID
		if err := s.refineThread(ctx, turn.SessionID, turn.TerminalBindingID, acc.ThreadID); err != nil {
			s.log.Warn("bind the native thread", "turn_id", turn.TurnID, "err", err)
		}
	}
	return s.advance(ctx, turn, d, termapi.DispatchAgentAccepted, "terminal_message_agent_accepted",
		map[string]any{"native_turn_id": acc.NativeTurnID})
}

func (s *Service) refineThread(ctx context.Context, sessionID, bindingID, thread string) error {
	for range 3 {
		sess, err := s.o.Store.GetTermSession(ctx, sessionID)
		if err != nil {
			return err
		}
		if sess.Binding == nil || sess.Binding.BindingID != bindingID || sess.Binding.NativeThreadID != "" {
			return nil
		}
		sess.Binding.NativeThreadID = thread
		sess.UpdatedAt = nowMs()
		if err := s.o.Store.SaveTermSession(ctx, sess); !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return store.ErrConflict
}
