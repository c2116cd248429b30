package termapi

import "fmt"

// The Turn lifecycle: a Turn's statuses, which of them hold the pane, and
// the steps between them. Every Turn write goes through the store's
// WriteTurn, which refuses a step this file does not draw
// (CheckTurnAdvance), and the store's SQL status sets are built from the
// predicates below, so the two cannot drift apart.
//
//	send ─▶ created ─▶ running ◀─▶ waiting_for_openclaw ◀─▶ waiting_for_agent
//	        (the followed statuses: each moves to any other, never back to
//	        created; cancelling, from an older cancel, is followed like running)
//
//	followed ──done──────────────────▶ idle ──────┐
//	followed ──error, not sent───────▶ failed ────┤
//	followed ──interrupt, cancel─────▶ cancelled  │ close
//	followed ──timeout, agent gone───▶ stalled ───┼──────▶ closed
//	waiting_for_openclaw ─────────────────────────┘
//	stalled ──renew──▶ waiting_for_agent
//	stalled ──cancel─▶ cancelled
//
// created, running, waiting_for_agent, waiting_for_openclaw and
// cancelling are followed by a monitor (Monitored). A Turn in one of them
// moves to any other of them, except back to created, and ends idle,
// failed, cancelled or stalled. A stalled Turn is renewed (back to
// waiting_for_agent), cancelled or closed; idle and failed Turns are only
// closed; cancelled and closed are final. waiting_for_openclaw is also
// closed directly: a question nobody will answer. A write that keeps the
// status is always a step (the Turn's other fields moved).

// TurnStatus is the status of a Turn.
type TurnStatus string

// Turn statuses.
const (
	TurnCreated            TurnStatus = "created"
	TurnRunning            TurnStatus = "running"
	TurnWaitingForAgent    TurnStatus = "waiting_for_agent"
	TurnWaitingForOpenClaw TurnStatus = "waiting_for_openclaw"
	TurnIdle               TurnStatus = "idle"
	TurnStalled            TurnStatus = "stalled"
	TurnFailed             TurnStatus = "failed"
	TurnClosed             TurnStatus = "closed"
	TurnCancelled          TurnStatus = "cancelled"
	// TurnCancelling is no longer written: a cancel ends the Turn
	// cancelled at once. Turns stored in it by earlier versions are
	// followed like running ones.
	TurnCancelling TurnStatus = "cancelling"
)

// TurnStatuses returns every Turn status, in lifecycle order.
func TurnStatuses() []TurnStatus {
	return []TurnStatus{TurnCreated, TurnRunning, TurnWaitingForAgent, TurnWaitingForOpenClaw, TurnCancelling,
		TurnIdle, TurnFailed, TurnStalled, TurnCancelled, TurnClosed}
}

// Valid reports whether s is a Turn status.
func (s TurnStatus) Valid() bool {
	switch s {
	case TurnCreated, TurnRunning, TurnWaitingForAgent, TurnWaitingForOpenClaw, TurnIdle,
		TurnStalled, TurnFailed, TurnClosed, TurnCancelled, TurnCancelling:
		return true
	}
	return false
}

// Running reports whether a Turn in status s is still with the agent (the
// statuses send --wait waits through).
func (s TurnStatus) Running() bool {
	switch s {
	case TurnCreated, TurnRunning, TurnWaitingForAgent, TurnCancelling:
		return true
	}
	return false
}

// Monitored reports whether a Turn in status s needs a monitor: it is
// with the agent or waits for OpenClaw's answer.
func (s TurnStatus) Monitored() bool {
	return s.Running() || s == TurnWaitingForOpenClaw
}

// SendBlocking reports whether a Turn in status s keeps its Session from
// taking a new Turn: a monitored or stalled one (a stalled Turn may be
// renewed).
func (s TurnStatus) SendBlocking() bool {
	return s.Monitored() || s == TurnStalled
}

// Released reports whether a Turn in status s has given the terminal's
// next input back (the input-released statuses).
func (s TurnStatus) Released() bool {
	switch s {
	case TurnIdle, TurnFailed, TurnClosed, TurnCancelled:
		return true
	}
	return false
}

// Final reports whether a Turn in status s never changes status again.
func (s TurnStatus) Final() bool { return s == TurnClosed || s == TurnCancelled }

// CheckTurnAdvance reports whether a stored Turn in status from may be
// written with status to: an error wrapping ErrRefused names the step and
// why it is not one (see the lifecycle above). Keeping the status is
// always allowed.
func CheckTurnAdvance(from, to TurnStatus) error {
	if !to.Valid() {
		return fmt.Errorf("%w: %q is not a Turn status", ErrRefused, to)
	}
	if from == to {
		return nil
	}
	ok := false
	switch {
	case from.Final():
	case from.Monitored():
		// Among the followed statuses (never back to created), or to an
		// end; closed only once the agent has let go (waiting for
		// OpenClaw).
		ok = to != TurnCreated && (to != TurnClosed || from == TurnWaitingForOpenClaw)
	case from == TurnStalled:
		ok = to == TurnWaitingForAgent || to == TurnCancelled || to == TurnClosed
	case from == TurnIdle, from == TurnFailed:
		ok = to == TurnClosed
	}
	if ok {
		return nil
	}
	why := ""
	switch {
	case from.Final():
		why = fmt.Sprintf(": %s is final", from)
	case !from.Valid():
		why = fmt.Sprintf(": %q is not a Turn status", from)
	}
	return fmt.Errorf("%w: a Turn cannot go from %s to %s%s", ErrRefused, from, to, why)
}

// Running reports whether a Turn in status is still with the agent (the
// statuses send --wait waits through); status.Running().
func Running(status TurnStatus) bool { return status.Running() }

// DispatchStatus is how far the input of a terminal's dispatch ledger
// entry got.
type DispatchStatus string

// Dispatch ledger statuses. A Turn's entry goes prepared → text_injected
// → enter_dispatched → agent_accepted, or ends not_accepted, uncertain
// or aborted; a thread transition's entry also passes through
// dispatching and takes the transition's own statuses.
const (
	DispatchPrepared        DispatchStatus = "prepared"
	DispatchTextInjected    DispatchStatus = "text_injected"
	DispatchEnterDispatched DispatchStatus = "enter_dispatched"
	DispatchAgentAccepted   DispatchStatus = "agent_accepted"
	DispatchNotAccepted     DispatchStatus = "not_accepted"
	DispatchUncertain       DispatchStatus = "uncertain"
	DispatchAborted         DispatchStatus = "aborted"
	// DispatchDispatching is a thread transition's entry while its
	// command is typed.
	DispatchDispatching DispatchStatus = "dispatching"
)

// CallbackStatus is the delivery status of a callback in the outbox.
type CallbackStatus string

// Callback delivery statuses: pending → delivered, or failed (retried
// until its budget runs out) → exhausted; a manual retry makes a failed or
// exhausted callback pending again.
const (
	CallbackPending   CallbackStatus = "pending"
	CallbackDelivered CallbackStatus = "delivered"
	CallbackFailed    CallbackStatus = "failed"
	CallbackExhausted CallbackStatus = "exhausted"
)

// CallbackStatuses returns every callback delivery status.
func CallbackStatuses() []CallbackStatus {
	return []CallbackStatus{CallbackPending, CallbackDelivered, CallbackFailed, CallbackExhausted}
}

// Due reports whether a callback in status s is still to be delivered
// (the statuses the outbox attempts).
func (s CallbackStatus) Due() bool { return s == CallbackPending || s == CallbackFailed }
