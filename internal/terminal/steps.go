package terminal

import (
	"fmt"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// The operations a callback's next steps may name (its metadata.next_steps).
// StepAnswerInTerminal is a human's answer in the pane, not a tool.
const (
	StepStatus           = "status"
	StepRespond          = "respond"
	StepApprove          = "approve"
	StepAnswerInTerminal = "answer_in_terminal"
	StepCancel           = "cancel"
	StepRenew            = "renew"
	StepClose            = "close"
	StepSend             = "send"
)

// KindCancellation is the callback kind of a cancelled Turn; its metadata
// cancelled_by says who cancelled it.
const KindCancellation = "cancellation"

// Who cancelled a Turn (a cancellation callback's metadata.cancelled_by).
const (
	// CancelledByCaller: the cancel operation (CLI, MCP, plugin tool).
	CancelledByCaller = "caller"
	// CancelledInTerminal: an interrupt the agent's session files record,
	// pressed in the terminal (by a human, or by the agent's own UI).
	CancelledInTerminal = "terminal"
)

// stepOrder is the order next steps are suggested in.
var stepOrder = []string{StepApprove, StepRespond, StepAnswerInTerminal, StepSend, StepRenew, StepCancel, StepClose, StepStatus}

// accepts is the one rule of which operation a Turn's state takes: the
// operations check it before they touch the pane, and a callback suggests
// exactly the operations it accepts, so the two cannot drift apart. nil
// means accepted; the error says why not (without the operation's name).
// What the pane shows at the time (a prompt that changed, a dialog) is
// checked by the operation itself.
func accepts(step string, t *store.Turn, now time.Time) error {
	switch step {
	case StepStatus:
		return nil
	case StepRespond:
		if t.Status != termapi.TurnWaitingForOpenClaw || t.Approval != nil {
			return fmt.Errorf("%w: turn %s is %s; respond only answers a Turn waiting for OpenClaw without an approval prompt", termapi.ErrRefused, t.TurnID, describe(t))
		}
		if t.Question != nil && t.Takeover.QuestionBlocked {
			return fmt.Errorf("%w: the agent's question dialog does not have a shape that can be answered from here; answer it in the terminal", termapi.ErrRefused)
		}
	case StepApprove:
		if t.Status != termapi.TurnWaitingForOpenClaw || t.Approval == nil {
			return fmt.Errorf("%w: turn %s is %s with no approval prompt to answer", termapi.ErrRefused, t.TurnID, t.Status)
		}
		if t.Takeover.ApprovalBlocked {
			return fmt.Errorf("%w: the prompt does not have the exact shape that can be answered safely; answer it in the terminal", termapi.ErrRefused)
		}
	case StepAnswerInTerminal:
		blockedApproval := t.Approval != nil && t.Takeover.ApprovalBlocked
		blockedQuestion := t.Question != nil && t.Takeover.QuestionBlocked
		if t.Status != termapi.TurnWaitingForOpenClaw || !blockedApproval && !blockedQuestion {
			return fmt.Errorf("%w: turn %s waits for no prompt that only a human can answer", termapi.ErrRefused, t.TurnID)
		}
	case StepCancel:
		if !t.Status.Monitored() && t.Status != termapi.TurnStalled {
			return fmt.Errorf("%w: turn %s is already %s", termapi.ErrRefused, t.TurnID, t.Status)
		}
	case StepRenew:
		if t.Status != termapi.TurnStalled {
			return fmt.Errorf("%w: turn %s is %s; only a stalled Turn can be renewed", termapi.ErrRefused, t.TurnID, t.Status)
		}
		if t.Takeover.HardDeadlineAt > 0 && now.UnixMilli() >= t.Takeover.HardDeadlineAt {
			return fmt.Errorf("%w: turn %s passed its hard deadline; close it and send again", termapi.ErrRefused, t.TurnID)
		}
	case StepClose:
		switch {
		case t.Status == termapi.TurnClosed || t.Status == termapi.TurnCancelled:
			return fmt.Errorf("%w: turn %s is already %s", termapi.ErrRefused, t.TurnID, t.Status)
		case Running(t.Status):
			return fmt.Errorf("%w: turn %s is still with the agent (%s); cancel it instead", termapi.ErrRefused, t.TurnID, t.Status)
		}
	case StepSend:
		// A follow-up in the same Session once the Turn has let go of the
		// pane: a failed or closed Turn may still hold its input (an
		// uncertain submission) until a human looks.
		if t.Status != termapi.TurnIdle && t.Status != termapi.TurnCancelled {
			return fmt.Errorf("%w: turn %s is %s; a follow-up goes to the Session of a finished or cancelled Turn", termapi.ErrRefused, t.TurnID, t.Status)
		}
	default:
		return fmt.Errorf("%w: no operation %q", termapi.ErrBadInput, step)
	}
	return nil
}

// describe is t's status, with the approval prompt or question it waits
// for.
func describe(t *store.Turn) string {
	if t.Approval != nil {
		return string(t.Status) + " at an approval prompt"
	}
	if t.Question != nil {
		return string(t.Status) + " at the agent's question"
	}
	return string(t.Status)
}

// nextSteps lists the operations t's state accepts, in suggestion order.
func nextSteps(t *store.Turn, now time.Time) []string {
	var out []string
	for _, s := range stepOrder {
		if accepts(s, t, now) == nil {
			out = append(out, s)
		}
	}
	return out
}
