package terminal

import (
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// The Turn lifecycle as the Turn service walks it. Every change of a
// Turn's status is made by one of the functions of this file; the store's
// WriteTurn then refuses any step termapi.CheckTurnAdvance does not draw.
//
//	Send ─▶ created ─(message)─▶ running ◀─▶ waiting_for_openclaw ◀─▶ waiting_for_agent
//	                 ApplyMessage: the followed statuses move among themselves;
//	                 approvalAnswered, questionAnswered: waiting_for_openclaw ─▶ waiting_for_agent
//	(followed: created, running, waiting_for_agent, waiting_for_openclaw and
//	the cancelling of older versions; termapi.TurnStatus.Monitored)
//
//	followed ──done (ApplyMessage)──────────────────────────▶ idle ─────┐
//	followed ──error (ApplyMessage), not sent (failTurn)────▶ failed ───┤
//	followed ──interrupt (ApplyMessage), cancelTurn─────────▶ cancelled │ closeTurn
//	followed ──timeout, agent gone (stallTurn)──────────────▶ stalled ──┼──────────▶ closed
//	waiting_for_openclaw ───────────────────────────────────────────────┘
//	stalled ──renewTurn──▶ waiting_for_agent
//	stalled ──cancelTurn─▶ cancelled
//
// A Turn is created (status created) by Send alone; cancelled and closed
// are final. Each function changes the fields that go with the status
// (the stall's reason, the close's time) and nothing else: the caller
// writes the Turn with its events through the store.

// ApplyMessage applies the message → status rules to t: done → idle (with
// idle_since), error → failed, cancelled → cancelled, blocked → waiting_for_openclaw, a message to
// OpenClaw that requires a response → waiting_for_openclaw, one from
// OpenClaw that requires a response → waiting_for_agent, otherwise a created
// Turn becomes running. Requires-response messages use a response round.
func ApplyMessage(t *store.Turn, m Message) {
	switch {
	case m.Type == MsgDone:
		t.Status, t.IdleSince = termapi.TurnIdle, m.TS
	case m.Type == MsgError:
		t.Status = termapi.TurnFailed
	case m.Type == MsgCancelled:
		t.Status = termapi.TurnCancelled
	case m.Type == MsgBlocked:
		t.Status = termapi.TurnWaitingForOpenClaw
	case m.To == ActorOpenClaw && m.RequiresResponse:
		t.Status = termapi.TurnWaitingForOpenClaw
	case m.From == ActorOpenClaw && m.RequiresResponse:
		t.Status = termapi.TurnWaitingForAgent
	case t.Status == termapi.TurnCreated:
		t.Status = termapi.TurnRunning
	}
	if m.RequiresResponse {
		t.ResponseRoundsUsed++
	}
	t.UpdatedAt = m.TS
}

// approvalAnswered: the approval prompt the Turn waited at was answered
// (in the terminal, or by an approve): the Turn is with the agent again.
func approvalAnswered(t *store.Turn) {
	t.Approval, t.Status = nil, termapi.TurnWaitingForAgent
}

// questionAnswered: the question dialog the Turn waited at was answered
// (in the terminal, or by a respond): a Turn that waited for OpenClaw is
// with the agent again.
func questionAnswered(t *store.Turn) {
	t.Question, t.Takeover.QuestionBlocked = nil, false
	if t.Status == termapi.TurnWaitingForOpenClaw {
		t.Status = termapi.TurnWaitingForAgent
	}
}

// failTurn ends the Turn failed for reason, with match naming what failed
// (submission_<outcome>, forged_turn).
func failTurn(t *store.Turn, match, reason string) {
	t.Status = termapi.TurnFailed
	t.Takeover.DetectorDiagnostic = reason
	t.Result = &termapi.TurnResult{Outcome: "failed", Text: reason, Match: match}
}

// stallTurn ends the Turn stalled at now (ms) for reason; renewTurn,
// cancelTurn or closeTurn take it on.
func stallTurn(t *store.Turn, now int64, reason string) {
	t.Status, t.StalledAt, t.StalledReason = termapi.TurnStalled, now, reason
}

// renewTurn follows a stalled Turn again from now, as activity of kind
// why (renewed, host_returned): its inactivity deadline starts over.
func renewTurn(t *store.Turn, now time.Time, why string) {
	inact := time.Duration(t.Takeover.InactivityTimeoutMinutes * float64(time.Minute))
	t.Status, t.StalledAt, t.StalledReason = termapi.TurnWaitingForAgent, 0, ""
	t.Takeover.LastActivityAt, t.Takeover.LastActivityReason = now.UnixMilli(), why
	t.Takeover.InactivityDeadlineAt = now.Add(inact).UnixMilli()
}

// cancelTurn ends the Turn cancelled at now (ms); a prompt or question it
// waited at is no longer its to answer.
func cancelTurn(t *store.Turn, now int64) {
	t.Status, t.CancelRequestedAt, t.Approval, t.Question = termapi.TurnCancelled, now, nil, nil
}

// closeTurn closes the Turn at now (ms) for reason: final.
func closeTurn(t *store.Turn, now int64, reason string) {
	t.Status, t.ClosedAt, t.CloseReason, t.Approval, t.UpdatedAt = termapi.TurnClosed, now, reason, nil, now
}
