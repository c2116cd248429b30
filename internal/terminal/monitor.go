package terminal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
	"github.com/clawconnect/clawconnect/termapi"
)

// monitor follows one Turn.
type monitor struct {
	h      *hostpkg.Host
	s      *Service
	turnID string
	lease  store.MonitorLease

	pane       agents.Pane
	agent      agents.Agent
	activityAt time.Time
	diagnostic string
	// scanFailingSince is when the session-file scans began to fail
	// without a break (zero while they succeed).
	scanFailingSince time.Time
	// turn and sess are the Turn and Session as the last look left them
	// (the Turn as stored by its last write, unless spoiled: a write
	// failed after the look changed it); a re-check reuses them while
	// their stored versions stay (recheckClock).
	turn    *store.Turn
	sess    *store.TermSession
	spoiled bool
	// resume is where the last pending completion check stopped, valid
	// only for the submission resumeKey names (message, anchor, acceptance
	// evidence, native turn): the next check of it reads only what was
	// appended since, instead of everything after the anchor.
	resume    json.RawMessage
	resumeKey string
	// evidenceWait is the approval prompt whose auto-approval waits for
	// the session file to record its call, and since when (autoapprove.go).
	evidenceWait struct {
		fingerprint string
		since       time.Time
	}
}

func (m *monitor) run(ctx context.Context) error {
	if stop, err := m.screenForeign(ctx); stop {
		return err
	}
	l, ctx, release, err := m.h.Claim(ctx, store.LeaseMonitor, m.turnID)
	if errors.Is(err, store.ErrLeaseLost) {
		return nil // another host follows it
	}
	if err != nil {
		return err
	}
	m.lease = l
	defer release()
	t, err := m.s.o.Store.GetTurn(ctx, m.turnID)
	if err != nil {
		return err
	}
	if !t.Status.Monitored() {
		return nil
	}
	if err := json.Unmarshal(t.Takeover.TerminalControl, &m.pane); err != nil {
		return fmt.Errorf("turn %s has no readable pane record: %w", m.turnID, err)
	}
	if m.agent, err = m.s.agent(t.Agent); err != nil {
		return err
	}
	m.activityAt = time.UnixMilli(t.Takeover.LastActivityAt)
	anchor := t.Takeover.Submission.Anchor
	if ev := t.Takeover.Submission.AcceptanceEvidence; len(ev) > 0 {
		anchor = ev
	}
	return m.s.follow(ctx, m.h, m.pane, m.agent.WatchPaths(m.pane, anchor), "turn_id", m.turnID, m.check)
}

func (m *monitor) fence() *store.Fence {
	return &store.Fence{Owner: m.lease.Owner, Token: m.lease.Fence, Now: time.Now().UnixMilli()}
}

// write stores t fenced by the lease.
func (m *monitor) write(ctx context.Context, w store.TurnWrite) error {
	w.Fence = m.fence()
	w.Turn.UpdatedAt = time.Now().UnixMilli()
	if err := m.s.o.Store.WriteTurn(ctx, w); err != nil {
		m.spoiled = true // the look's copy now differs from the stored Turn
		return err
	}
	m.s.notify(w.Turn.TurnID)
	if w.Also != nil { // a callback was queued
		m.s.announceCallback(ctx)
	}
	return nil
}

// check looks at the Turn once. It returns stop when the Turn no longer
// needs a monitor, and when the next timeout falls due.
func (m *monitor) check(ctx context.Context, w hostpkg.Wake) (bool, time.Time, error) {
	never := time.Now().Add(time.Hour)
	held := m.turn
	m.turn = nil
	turnKey := hostpkg.Record{Kind: store.VersionTurn, ID: m.turnID}
	t, err := reuse(m.h, w, turnKey, held, turnVersion,
		func() (*store.Turn, error) { return m.s.o.Store.GetTurn(ctx, m.turnID) })
	if err != nil {
		return false, never, err
	}
	defer func() {
		if !m.spoiled {
			m.turn = t
		}
		m.spoiled = false
	}()
	if !t.Status.Monitored() {
		return true, never, nil
	}
	sessKey := hostpkg.Record{Kind: store.VersionSession, ID: t.SessionID}
	sess, err := reuse(m.h, w, sessKey, m.sess, sessionVersion,
		func() (*store.TermSession, error) { return m.s.o.Store.GetTermSession(ctx, t.SessionID) })
	if err != nil {
		return false, never, err
	}
	m.sess = sess
	m.h.Track(m.turnID, turnKey, sessKey)
	if b := sess.Binding; b == nil || b.BindingID != t.TerminalBindingID || b.Generation != t.TerminalBindingGeneration {
		return true, never, m.stall(ctx, t, "binding_superseded", "the session was rebound to another terminal context")
	}
	now := time.Now()
	if w.File {
		m.activityAt = now
	}
	m.s.followKey(m.pane.Key)
	p, alive, derr := m.s.livePane(ctx, 500*time.Millisecond, m.pane)
	if alive {
		m.pane = p
	}
	dead := derr == nil && !alive
	if pc, ok := m.s.o.Terminals.(ProcessChecker); ok {
		// The incarnation itself decides: a pane that is briefly not
		// listed (or not controllable) is not a dead agent.
		if running, err := pc.Alive(m.pane); err == nil {
			dead = !running
		} else {
			dead = false
		}
	}
	sub := t.Takeover.Submission
	var scanErr *native.ScanError
	if sub.Status == termapi.DispatchPrepared || sub.Status == termapi.DispatchTextInjected {
		// A sender owns these phases. Once it has had longer than any send
		// takes, it is gone: the text may be in the composer. Never resend.
		if due := time.UnixMilli(sub.PreparedAt).Add(senderLeaseTTL); now.Before(due) {
			return false, due, nil
		}
		return true, never, m.abandonSend(ctx, t)
	}
	if sub.Status == termapi.DispatchEnterDispatched {
		acc, err := m.agent.Accepted(ctx, m.pane, sub.Anchor, m.requestText(t))
		if err != nil {
			m.diagnose(ctx, t, "acceptance: "+err.Error())
			errors.As(err, &scanErr)
		} else if acc != nil {
			if err := m.accept(ctx, t, *acc); err != nil {
				return false, never, err
			}
			sub = t.Takeover.Submission
		}
	}
	if sub.Status == termapi.DispatchAgentAccepted {
		key := sub.MessageID + "\x00" + sub.NativeTurnID + "\x00" + string(sub.Anchor) + "\x00" + string(sub.AcceptanceEvidence)
		if key != m.resumeKey {
			m.resume, m.resumeKey = nil, key
		}
		c, resume, err := m.agent.Completion(ctx, m.pane, sub.Anchor, agents.Acceptance{NativeTurnID: sub.NativeTurnID, ThreadID: t.NativeThreadID, Evidence: sub.AcceptanceEvidence, Resume: m.resume})
		if err == nil && c == nil {
			// A failed check keeps the last point: what it read may hold
			// the failure, which the next check must meet again.
			m.resume = resume
		}
		if err != nil {
			m.diagnose(ctx, t, "completion: "+err.Error())
			errors.As(err, &scanErr)
		} else if c != nil {
			return true, never, m.complete(ctx, t, *c)
		}
	}
	if dead {
		reason := "bound_agent_process_verified_dead"
		if sub.Status != termapi.DispatchAgentAccepted {
			reason += "_completion_unverifiable"
		}
		return true, never, m.stallAgentGone(ctx, t, reason)
	}
	scanDue := never
	if scanErr == nil {
		m.scanFailingSince = time.Time{}
	} else {
		if m.scanFailingSince.IsZero() {
			m.scanFailingSince = now
		}
		if scanDue = m.scanFailingSince.Add(m.s.o.ScanGrace); !now.Before(scanDue) {
			return true, never, m.stall(ctx, t, string(scanErr.Code), fmt.Sprintf(
				"every scan of the agent's session file failed for %s (%s), so the Turn's end cannot be told from it; look at the pane", m.s.o.ScanGrace, Redact(scanErr.Error())))
		}
	}
	if alive {
		if err := m.screen(ctx, t, now); err != nil {
			return false, never, err
		}
	}
	if t.Status == termapi.TurnWaitingForOpenClaw {
		return false, scanDue, nil
	}
	// Timeouts: hard wins over inactivity.
	last := time.UnixMilli(t.Takeover.LastActivityAt)
	if m.activityAt.After(last) {
		last = m.activityAt
	}
	inact := time.Duration(t.Takeover.InactivityTimeoutMinutes * float64(time.Minute))
	hard := time.UnixMilli(t.Takeover.HardDeadlineAt)
	if t.Takeover.HardDeadlineAt > 0 && !now.Before(hard) {
		return true, never, m.stall(ctx, t, "hard_timeout",
			fmt.Sprintf("terminal bridge reached its hard lifetime of %g minutes", t.Takeover.HardTimeoutMinutes))
	}
	next := never
	if inact > 0 {
		due := last.Add(inact)
		if !now.Before(due) {
			return true, never, m.stall(ctx, t, "inactivity_timeout",
				fmt.Sprintf("terminal bridge observed no activity for %g minutes", t.Takeover.InactivityTimeoutMinutes))
		}
		next = due
		// Persist activity now and then, so a restarted host does not
		// stall a Turn that was active.
		if last.UnixMilli()-t.Takeover.LastActivityAt > min(inact.Milliseconds()/10, 30_000) {
			t.Takeover.LastActivityAt, t.Takeover.LastActivityReason = last.UnixMilli(), "observed"
			t.Takeover.InactivityDeadlineAt = due.UnixMilli()
			if err := m.write(ctx, store.TurnWrite{Turn: t}); err != nil {
				return false, next, err
			}
		}
	}
	if t.Takeover.HardDeadlineAt > 0 && hard.Before(next) {
		next = hard
	}
	if scanDue.Before(next) {
		next = scanDue
	}
	return false, next, nil
}

// approvalClaimStale is how long after an approve claimed a prompt the
// monitor stops waiting for it to record the prompt's resolution; an
// approve records it right after pressing the key.
const approvalClaimStale = 30 * time.Second

// screen reads the pane: question dialogs (question.go), approval prompts
// and screen activity.
func (m *monitor) screen(ctx context.Context, t *store.Turn, now time.Time) error {
	text, err := m.s.o.Terminals.Capture(ctx, m.pane)
	if err != nil {
		return nil // a failed capture proves nothing
	}
	// Only the agent's own session files count as activity: a spinner
	// that keeps redrawing over a hung model request is not progress.
	sc := m.agent.Screen(text)
	if err := m.forgetAnswered(ctx, t, sc); err != nil {
		return err
	}
	if handled, err := m.question(ctx, t, sc, now); handled {
		return err
	}
	switch {
	case sc.Approval != nil && t.Approval == nil && sc.Approval.Fingerprint == t.Takeover.LastApprovalFingerprint:
		// The prompt answered last is still drawn: the TUI redraws only
		// after it took the key, however long a loaded machine makes that.
		// It is being answered, not asked again, until a look finds it
		// gone (below).
		return nil
	case sc.Approval != nil && (t.Approval == nil || t.Approval.Fingerprint != sc.Approval.Fingerprint):
		handled, declined, err := m.autoApprove(ctx, t, sc.Approval)
		if handled {
			return err
		}
		cmd := ""
		if t.Agent == termapi.AgentCodex {
			cmd = Redact(sc.Approval.Command)
		}
		t.Approval = &termapi.Approval{Fingerprint: sc.Approval.Fingerprint, Kind: sc.Approval.Kind, Command: cmd, DetectedAt: now.UnixMilli()}
		t.Takeover.ApprovalBlocked = !sc.Approval.Approvable
		typ, body := MsgQuestion, "The agent asks for approval ("+sc.Approval.Kind+")."
		if !sc.Approval.Approvable {
			typ, body = MsgBlocked, "The agent shows an approval prompt that cannot be answered safely from here."
		}
		msg, err := newMessage(t, actorOf(t.Agent), ActorOpenClaw, typ, body, now.UnixMilli())
		if err != nil {
			return err
		}
		// The same prompt may be asked again (the screen showed it gone in
		// between): each asking is its own callback.
		msg.ID = callbackID(t.TurnID, t.Takeover.Submission.MessageID, sc.Approval.Fingerprint, typ, strconv.FormatInt(now.UnixMilli(), 10))
		ApplyMessage(t, msg)
		t.Takeover.LastApprovalFingerprint = sc.Approval.Fingerprint
		detected := map[string]any{"fingerprint": sc.Approval.Fingerprint, "approvable": sc.Approval.Approvable}
		meta := map[string]any{"reason": "approval_required", "approval_kind": sc.Approval.Kind, "approval_fingerprint": sc.Approval.Fingerprint,
			"approvable": sc.Approval.Approvable, "next_steps": nextSteps(t, now)}
		if declined != "" {
			// A rule of this agent and workspace exists: say why it did
			// not answer, so the person knows the rule was considered.
			detected["auto_approve_declined"], meta["auto_approve_declined"] = declined, declined
		}
		return m.write(ctx, store.TurnWrite{Turn: t, Events: []store.TurnEvent{
			event(now.UnixMilli(), "terminal_bridge_approval_detected", detected),
			event(now.UnixMilli(), "message", msg)},
			Also: prepareCallback(t, msg, msg.ID, KindApproval, meta)})
	case sc.Approval == nil && sc.Activity != string(screen.Unknown) && t.Status == termapi.TurnWaitingForOpenClaw && t.Approval != nil:
		data := map[string]any{"decision": "answered_in_terminal"}
		if t.Takeover.ApprovingFingerprint == t.Approval.Fingerprint {
			// An approve claimed this prompt: it records the resolution,
			// unless it has not done so long after pressing the key (its
			// process died in between), when the monitor records it.
			if now.Sub(time.UnixMilli(t.Takeover.ApprovingAt)) < approvalClaimStale {
				return nil
			}
			data = map[string]any{"fingerprint": t.Approval.Fingerprint, "decision": "approve", "recorded_by": "monitor"}
			t.Takeover.ApprovingFingerprint, t.Takeover.ApprovingAt = "", 0
		}
		// Answered in the terminal by a human (or by an approve whose
		// process stopped before recording it): a screen read without the
		// prompt, as one not read (a frame half drawn) proves nothing.
		approvalAnswered(t)
		t.Takeover.ApprovalResolvedAt = now.UnixMilli()
		t.Takeover.LastApprovalFingerprint = "" // off the screen already
		return m.write(ctx, store.TurnWrite{Turn: t, Events: []store.TurnEvent{
			event(now.UnixMilli(), "terminal_bridge_approval_resolved", data)}})
	}
	return nil
}

// forgetAnswered drops the fingerprint of the prompt or question dialog
// answered last once a readable screen no longer shows it. Until then the same
// prompt on the screen is the answered one that the TUI has not redrawn
// yet, however long a loaded machine makes it take; from then on it is
// the agent asking again. It re-reads t after its write.
func (m *monitor) forgetAnswered(ctx context.Context, t *store.Turn, sc agents.Screen) error {
	if sc.Activity == string(screen.Unknown) {
		return nil // a screen not read proves nothing gone (a frame half drawn)
	}
	tk := &t.Takeover
	approval := t.Approval == nil && tk.LastApprovalFingerprint != "" &&
		(sc.Approval == nil || sc.Approval.Fingerprint != tk.LastApprovalFingerprint)
	question := t.Question == nil && tk.LastQuestionFingerprint != "" && tk.AnsweringFingerprint == "" &&
		(sc.Question == nil || sc.Question.Fingerprint != tk.LastQuestionFingerprint)
	if !approval && !question {
		return nil
	}
	if approval {
		tk.LastApprovalFingerprint = ""
	}
	if question {
		tk.LastQuestionFingerprint = ""
	}
	if err := m.write(ctx, store.TurnWrite{Turn: t}); err != nil {
		return err
	}
	fresh, err := m.s.o.Store.GetTurn(ctx, t.TurnID)
	if err != nil {
		return err
	}
	*t = *fresh
	return nil
}

// requestText is the text of the message in flight.
func (m *monitor) requestText(t *store.Turn) string {
	if t.Takeover.Submission.MessageType == MsgAnswer {
		return t.Takeover.Submission.Text
	}
	return t.Takeover.RequestText
}

// diagnose records a detector error once (redacted); it never completes
// the Turn from a guess.
func (m *monitor) diagnose(ctx context.Context, t *store.Turn, msg string) {
	msg = Redact(msg)
	if msg == m.diagnostic {
		return
	}
	m.diagnostic = msg
	t.Takeover.DetectorDiagnostic = msg
	if err := m.write(ctx, store.TurnWrite{Turn: t, Events: []store.TurnEvent{event(time.Now().UnixMilli(), "terminal_bridge_detector_diagnostic", map[string]any{"diagnostic": msg})}}); err != nil {
		m.s.log.Warn("record detector diagnostic", "turn_id", t.TurnID, "err", err)
	}
}

// accept records acceptance found by the monitor after Send returned.
func (m *monitor) accept(ctx context.Context, t *store.Turn, acc agents.Acceptance) error {
	d, err := m.s.o.Store.GetDispatch(ctx, t.Takeover.TerminalKey)
	if err != nil {
		return err
	}
	if d.TurnID != t.TurnID || d.MessageID != t.Takeover.Submission.MessageID {
		return fmt.Errorf("the terminal's dispatch ledger moved to turn %s", d.TurnID)
	}
	now := time.Now().UnixMilli()
	nd := *d
	nd.Status, nd.AgentAcceptedAt = termapi.DispatchAgentAccepted, now
	t.Takeover.Submission.Status = termapi.DispatchAgentAccepted
	t.Takeover.Submission.Outcome = termapi.OutcomeAccepted
	t.Takeover.Submission.NativeTurnID = acc.NativeTurnID
	t.Takeover.Submission.AcceptanceEvidence = acc.Evidence
	t.Takeover.Submission.AcceptedAt = now
	if t.NativeThreadID == "" && acc.ThreadID != "" {
		t.NativeThreadID = acc.ThreadID
		if err := m.s.refineThread(ctx, t.SessionID, t.TerminalBindingID, acc.ThreadID); err != nil {
			m.s.log.Warn("bind the native thread", "turn_id", t.TurnID, "err", err)
		}
	}
	return m.write(ctx, store.TurnWrite{Turn: t,
		Dispatch: &store.DispatchAdvance{TerminalKey: d.TerminalKey, GenerationID: d.GenerationID, Update: &nd},
		Events:   []store.TurnEvent{event(now, "terminal_message_agent_accepted", map[string]any{"native_turn_id": acc.NativeTurnID, "by": "monitor"})}})
}

// complete claims the Turn's one completion and records the reply.
func (m *monitor) complete(ctx context.Context, t *store.Turn, c agents.Completion) error {
	sub := t.Takeover.Submission
	text := resultText(c.Text)
	b, _ := json.Marshal(map[string]string{"text": text, "match": c.Match, "id": c.ID, "native_turn_id": sub.NativeTurnID, "message_id": sub.MessageID})
	sum := sha256.Sum256(b)
	fp := hex.EncodeToString(sum[:])
	outcome := c.Outcome
	if outcome != "failed" && outcome != agents.OutcomeCancelled {
		outcome = "completed"
	}
	now := time.Now().UnixMilli()
	typ, body := MsgDone, text
	kind, meta := KindCompletion, map[string]any{"completion_fingerprint": fp, "completion_id": c.ID,
		"completion_outcome": outcome, "match": c.Match, "rollout_turn_id": sub.NativeTurnID}
	switch outcome {
	case "failed":
		typ = MsgError
	case agents.OutcomeCancelled:
		// Cancel sets the status before it presses the key and the monitor
		// stops: an interrupt read here was pressed in the terminal.
		typ, kind = MsgCancelled, KindCancellation
		body = "The agent's turn was interrupted in the terminal before it replied."
		meta["cancelled_by"] = CancelledInTerminal
	}
	if body == "" {
		body = "(the agent finished without reply text)"
	}
	msg, err := newMessage(t, actorOf(t.Agent), ActorOpenClaw, typ, body, now)
	if err != nil {
		return err
	}
	msg.ID = callbackID(t.TurnID, sub.MessageID, fp, outcome)
	ApplyMessage(t, msg)
	meta["next_steps"] = nextSteps(t, time.UnixMilli(now))
	t.Result = &termapi.TurnResult{Outcome: outcome, Text: text, Match: c.Match}
	t.Approval, t.Question = nil, nil
	claim := &store.CompletionClaim{TurnID: t.TurnID, MessageID: sub.MessageID, CompletionFingerprint: fp,
		CompletionID: c.ID, CallbackMessageID: msg.ID, Outcome: outcome, ClaimedAt: now}
	// The Session's checkpoint commits with the completion: a host
	// stopped between two separate writes would leave the Turn done with
	// the previous checkpoint, and its own prompt would then look like a
	// human's to the next session_exact send.
	err = m.write(ctx, store.TurnWrite{Turn: t, Claim: claim, Events: []store.TurnEvent{
		event(now, "terminal_bridge_completion_claimed", claim), event(now, "message", msg)},
		Also: joinHooks(
			bindingCurrent(t),
			prepareCallback(t, msg, msg.ID, kind, meta),
			m.checkpoint(ctx, t, now))})
	if errors.Is(err, errBindingSuperseded) {
		// Re-bound between this check's look at the Session and the
		// claim: the completion belongs to a context the Session left.
		fresh, gerr := m.s.o.Store.GetTurn(ctx, t.TurnID)
		if gerr != nil {
			return gerr
		}
		return m.stall(ctx, fresh, "binding_superseded", "the session was rebound to another terminal context")
	}
	return err
}

// errBindingSuperseded refuses a completion claim whose Turn's binding is
// no longer its Session's current one.
var errBindingSuperseded = errors.New("the Session was re-bound before the completion was claimed")

// bindingCurrent returns the hook that fences a write by the Turn's
// binding: it fails with errBindingSuperseded, rolling the write back,
// when the Session was re-bound since the monitor looked.
func bindingCurrent(t *store.Turn) func(context.Context, store.TerminalTx) error {
	sessionID, bindingID, gen := t.SessionID, t.TerminalBindingID, t.TerminalBindingGeneration
	return func(ctx context.Context, tx store.TerminalTx) error {
		sess, err := tx.GetTermSession(ctx, sessionID)
		if err != nil {
			return fmt.Errorf("completion fence: %w", err)
		}
		if b := sess.Binding; b == nil || b.BindingID != bindingID || b.Generation != gen {
			return errBindingSuperseded
		}
		return nil
	}
}

// checkpoint returns the hook that records on the Session, in the
// completion's transaction, where its native context ended, so a later
// session_exact send can tell whether a human typed since. It returns nil
// (no checkpoint; the next exact send skips the check) when the pane's
// context cannot be read.
func (m *monitor) checkpoint(ctx context.Context, t *store.Turn, now int64) func(context.Context, store.TerminalTx) error {
	id, err := m.s.identify(ctx, m.agent, m.pane)
	if err != nil {
		m.s.log.Warn("checkpoint: identify", "turn_id", t.TurnID, "err", err)
		return nil
	}
	anchor, err := m.agent.Anchor(ctx, m.pane, id)
	if err != nil {
		m.s.log.Warn("checkpoint: anchor", "turn_id", t.TurnID, "err", err)
		return nil
	}
	sessionID, bindingID := t.SessionID, t.TerminalBindingID
	return func(ctx context.Context, tx store.TerminalTx) error {
		sess, err := tx.GetTermSession(ctx, sessionID)
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if sess.Binding == nil || sess.Binding.BindingID != bindingID {
			return nil // re-bound since: the checkpoint belongs to another binding
		}
		sess.Binding.Checkpoint, sess.Binding.LastVerifiedAt, sess.UpdatedAt = anchor, now, now
		if err := tx.SaveTermSession(ctx, sess); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		return nil
	}
}

// joinHooks runs the non-nil hooks in order in one transaction; nil when
// there are none.
func joinHooks(hooks ...func(context.Context, store.TerminalTx) error) func(context.Context, store.TerminalTx) error {
	var live []func(context.Context, store.TerminalTx) error
	for _, h := range hooks {
		if h != nil {
			live = append(live, h)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return func(ctx context.Context, tx store.TerminalTx) error {
		for _, h := range live {
			if err := h(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	}
}

// abandonSend fails a Turn whose sender died between prepared and Enter:
// the ledger records uncertain, which blocks the pane until a human closes
// the Turn.
func (m *monitor) abandonSend(ctx context.Context, t *store.Turn) error {
	d, err := m.s.o.Store.GetDispatch(ctx, t.Takeover.TerminalKey)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	reason := "the sending process stopped before Enter; the text may be in the composer and is never resent — look at the pane, then close the Turn"
	w := store.TurnWrite{Turn: t, Events: []store.TurnEvent{event(now, "terminal_message_uncertain", map[string]any{"reason": reason})}}
	if d.TurnID == t.TurnID && d.MessageID == t.Takeover.Submission.MessageID {
		nd := *d
		nd.Status, nd.UncertainAt, nd.Error = termapi.DispatchUncertain, now, reason
		w.Dispatch = &store.DispatchAdvance{TerminalKey: d.TerminalKey, GenerationID: d.GenerationID, Update: &nd}
	}
	failTurn(t, "submission_uncertain", reason)
	t.Takeover.Submission.Status, t.Takeover.Submission.Outcome = termapi.DispatchUncertain, termapi.OutcomeUncertain
	return m.write(ctx, w)
}

// stall marks the Turn stalled with reason.
func (m *monitor) stall(ctx context.Context, t *store.Turn, code, reason string) error {
	return m.write(ctx, stallWrite(t, code, reason, time.Now().UnixMilli()))
}
