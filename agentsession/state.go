package agentsession

// State is the closed vocabulary a managed session's state is normalized
// into. Any value a runtime reports that is not one of the eleven constants
// below reads as [StateUnknown].
type State string

// The eleven states. See the runtime-boundary document for their meaning.
const (
	StateStarting        State = "starting"         // working: coming up
	StateRunning         State = "running"          // working
	StateIdle            State = "idle"             // the turn finished (completed-turn state)
	StateNeedsInput      State = "needs_input"      // blocked on a human answer
	StateNeedsPermission State = "needs_permission" // blocked on a human approval
	StateCompleted       State = "completed"        // the turn finished (completed-turn state)
	StateStale           State = "stale"            // alive, but silent long enough to be suspicious
	StateDead            State = "dead"             // ran, then went away without finishing a turn
	StateFailed          State = "failed"           // never came up
	StateUnavailable     State = "unavailable"      // could not be reached from here; not evidence of failure
	StateUnknown         State = "unknown"          // reached, but said nothing recognizable
)

// States returns the eleven states of the vocabulary in a fixed order.
func States() []State {
	return []State{
		StateStarting, StateRunning, StateIdle, StateNeedsInput, StateNeedsPermission,
		StateCompleted, StateStale, StateDead, StateFailed, StateUnavailable, StateUnknown,
	}
}

// ParseState returns s as a State when it is one of the vocabulary's values,
// and false otherwise. It never invents a state.
func ParseState(s string) (State, bool) {
	switch st := State(s); st {
	case StateStarting, StateRunning, StateIdle, StateNeedsInput, StateNeedsPermission,
		StateCompleted, StateStale, StateDead, StateFailed, StateUnavailable, StateUnknown:
		return st, true
	}
	return "", false
}

// IsCompletedTurn reports whether s is completed or idle: the only states in
// which a final answer exists.
func (s State) IsCompletedTurn() bool { return s == StateCompleted || s == StateIdle }

// IsTerminal reports whether s is completed, idle, dead or failed: the only
// states that carry a [Termination].
func (s State) IsTerminal() bool {
	return s == StateCompleted || s == StateIdle || s == StateDead || s == StateFailed
}

// IsBlocked reports whether s is needs_input or needs_permission: the session
// waits for a human.
func (s State) IsBlocked() bool { return s == StateNeedsInput || s == StateNeedsPermission }

// AttachmentStatus is the status of an attachment record: a live [State]
// (any state but unavailable and unknown, which describe a read rather than
// the session) or one of the two record-only values [AttachmentSuperseded]
// and [AttachmentDetached].
type AttachmentStatus string

// The record-only statuses. A live status is written as AttachmentStatus(s)
// for a State s; see [LiveStatus].
const (
	AttachmentSuperseded AttachmentStatus = "superseded" // replaced by a newer record
	AttachmentDetached   AttachmentStatus = "detached"   // no longer tracked
)

// LiveStatus returns s as an attachment status when s is a state a record may
// hold (any state but unavailable and unknown), and false otherwise. Use it to
// read a stated status from outside input.
func LiveStatus(s string) (AttachmentStatus, bool) {
	st, ok := ParseState(s)
	if !ok || st == StateUnavailable || st == StateUnknown {
		return "", false
	}
	return AttachmentStatus(st), true
}

// State returns the live state of the record and true, or false when the
// record is superseded or detached (or the status is empty).
func (s AttachmentStatus) State() (State, bool) {
	st, ok := ParseState(string(s))
	if !ok || st == StateUnavailable || st == StateUnknown {
		return "", false
	}
	return st, true
}
