package store

import (
	"context"
	"fmt"
	"strings"
)

// Native thread transitions: a new, cleared or resumed native thread in a
// terminal pane (or the adoption of a thread a human switched to). A
// transition is recorded before the pane is touched, holds the terminal's
// next input while it runs, and commits the Session changes it verified in
// one write. Field names and statuses are the ones transitions report
// (docs/GLOSSARY.md).

// Transition kinds.
const (
	TransitionNewThread    = "new_thread"
	TransitionClearThread  = "clear_thread"
	TransitionResumeThread = "resume_thread"
	// TransitionAdopt adopts the thread a human switched the pane to; it
	// sends nothing (prepared → verified → committed).
	TransitionAdopt = "adopt_external_thread"
)

// Transition statuses: prepared → dispatching → submitted → verified →
// committed, with the side exits uncertain and aborted.
const (
	TransitionPrepared    = "prepared"
	TransitionDispatching = "dispatching"
	TransitionSubmitted   = "submitted"
	TransitionVerified    = "verified"
	TransitionCommitted   = "committed"
	TransitionUncertain   = "uncertain"
	TransitionAborted     = "aborted"
)

// DispatchTransition is the MessageType of the dispatch-ledger entry a
// transition holds while it runs.
const DispatchTransition = "transition"

// TransitionStatuses returns every transition status, in lifecycle order.
func TransitionStatuses() []string {
	return []string{TransitionPrepared, TransitionDispatching, TransitionSubmitted, TransitionVerified,
		TransitionCommitted, TransitionUncertain, TransitionAborted}
}

// TransitionFinal reports whether status ends a transition.
func TransitionFinal(status string) bool {
	return status == TransitionCommitted || status == TransitionAborted
}

// transitionEdges lists the status changes AdvanceTransition allows
// (committed is reached only through CommitTransition).
var transitionEdges = map[string][]string{
	TransitionPrepared:    {TransitionDispatching, TransitionVerified, TransitionUncertain, TransitionAborted},
	TransitionDispatching: {TransitionSubmitted, TransitionUncertain, TransitionAborted},
	TransitionSubmitted:   {TransitionVerified, TransitionUncertain},
	TransitionVerified:    {TransitionUncertain, TransitionAborted},
	TransitionUncertain:   {TransitionVerified, TransitionAborted},
}

// Transition is one native thread transition of one terminal. The fields
// above Status are fixed when it is prepared and never change.
type Transition struct {
	TransitionID string `json:"transition_id"`
	Kind         string `json:"kind"`
	Agent        string `json:"agent"`
	AgentVersion string `json:"agent_version,omitempty"`
	TerminalID   string `json:"terminal_id"`
	TerminalKey  string `json:"terminal_key"`
	PID          int    `json:"pid"`
	ProcessBirth string `json:"process_birth"`
	Workspace    string `json:"workspace"`
	// FromSessionID, FromBindingID, FromGeneration and FromThreadID name
	// the binding the transition replaces ("" / 0 for an unmanaged pane).
	FromSessionID  string `json:"from_session_id,omitempty"`
	FromBindingID  string `json:"from_binding_id,omitempty"`
	FromGeneration int64  `json:"from_generation,omitempty"`
	FromThreadID   string `json:"from_thread_id,omitempty"`
	// TargetThreadID is the thread asked for (resume) or seen (adopt).
	TargetThreadID string `json:"target_thread_id,omitempty"`
	// TargetSessionID is the Session the transition binds: a detached
	// Session of the resumed thread (reactivated) or a new id.
	TargetSessionID string `json:"target_session_id"`
	// ToGeneration is the binding generation after the transition.
	ToGeneration int64 `json:"to_generation"`
	// Plan is the native input the transition sends, in order.
	Plan []string `json:"plan,omitempty"`
	// Owner is the process running the transition, an owner.Identity as
	// Encode writes it (earlier versions wrote "pid:<n>:start:<ticks>", a
	// process of the reading host); a transition whose owner is provably
	// gone is settled by recovery.
	Owner      string `json:"owner"`
	PreparedAt int64  `json:"prepared_at"`

	Status string `json:"status"`
	// ObservedThreadID and ObservedFile are the native evidence after
	// the step.
	ObservedThreadID string `json:"observed_thread_id,omitempty"`
	ObservedFile     string `json:"observed_file,omitempty"`
	// Reason says why a transition is uncertain or aborted.
	Reason       string `json:"reason,omitempty"`
	DispatchedAt int64  `json:"dispatched_at,omitempty"`
	SubmittedAt  int64  `json:"submitted_at,omitempty"`
	VerifiedAt   int64  `json:"verified_at,omitempty"`
	EndedAt      int64  `json:"ended_at,omitempty"`
	UpdatedAt    int64  `json:"updated_at"`
	// Version is the compare-and-set version; the store bumps it.
	Version int64 `json:"-"`
}

// SameFixed reports whether the fields fixed at prepare are equal.
func (t *Transition) SameFixed(o *Transition) bool {
	return t.TransitionID == o.TransitionID && t.Kind == o.Kind && t.Agent == o.Agent && t.AgentVersion == o.AgentVersion &&
		t.TerminalID == o.TerminalID && t.TerminalKey == o.TerminalKey && t.PID == o.PID && t.ProcessBirth == o.ProcessBirth &&
		t.Workspace == o.Workspace && t.FromSessionID == o.FromSessionID && t.FromBindingID == o.FromBindingID &&
		t.FromGeneration == o.FromGeneration && t.FromThreadID == o.FromThreadID && t.TargetThreadID == o.TargetThreadID &&
		t.TargetSessionID == o.TargetSessionID && t.ToGeneration == o.ToGeneration && t.Owner == o.Owner &&
		t.PreparedAt == o.PreparedAt && strings.Join(t.Plan, "\x00") == strings.Join(o.Plan, "\x00")
}

// CheckTransitionPrepare validates a transition about to be prepared.
func CheckTransitionPrepare(t *Transition) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("transition %s: %s: %w", t.TransitionID, fmt.Sprintf(format, a...), ErrBindingRule)
	}
	switch t.Kind {
	case TransitionNewThread, TransitionClearThread, TransitionResumeThread, TransitionAdopt:
	default:
		return bad("unknown kind %q", t.Kind)
	}
	switch {
	case !strings.HasPrefix(t.TransitionID, "transition-"):
		return bad("ids start with transition-")
	case t.Status != TransitionPrepared:
		return bad("a new transition must be prepared, not %q", t.Status)
	case t.TerminalKey == "" || t.TerminalID == "" || t.Agent == "" || t.PID <= 0:
		return bad("terminal id, key, agent and pid are required")
	case !strings.HasPrefix(t.TargetSessionID, "session-"):
		return bad("a target session-… id is required")
	case (t.Kind == TransitionResumeThread || t.Kind == TransitionAdopt) && t.TargetThreadID == "":
		return bad("%s needs the target thread id", t.Kind)
	case t.ToGeneration <= t.FromGeneration:
		return bad("the generation must advance (from %d to %d)", t.FromGeneration, t.ToGeneration)
	case t.FromSessionID != "" && (t.FromBindingID == "" || t.FromGeneration < 1):
		return bad("a managed pane needs its binding id and generation")
	}
	return nil
}

// CheckTransitionAdvance validates replacing old with next through
// AdvanceTransition: an allowed status edge and unchanged fixed fields.
func CheckTransitionAdvance(old, next *Transition) error {
	if !old.SameFixed(next) {
		return fmt.Errorf("transition %s: the fields fixed at prepare may not change: %w", old.TransitionID, ErrBindingRule)
	}
	if old.Status == next.Status {
		return nil
	}
	for _, s := range transitionEdges[old.Status] {
		if s == next.Status {
			return nil
		}
	}
	return fmt.Errorf("transition %s: %s → %s is not a transition step: %w", old.TransitionID, old.Status, next.Status, ErrBindingRule)
}

// CheckTransitionSessionWrite enforces the Session write rules for a
// Session write committed by transition t: the new binding must be a new
// binding id at t.ToGeneration, which may skip generations (the terminal's
// generation advanced while the Session was detached).
func CheckTransitionSessionWrite(t *Transition, old, next *TermSession) error {
	nb := next.Binding
	if nb == nil || nb.Generation != t.ToGeneration || nb.TerminalKey != t.TerminalKey {
		return fmt.Errorf("session %s: a transition binds generation %d on its terminal: %w", next.SessionID, t.ToGeneration, ErrBindingRule)
	}
	want := int64(1)
	if old != nil && old.Binding != nil {
		if old.Binding.BindingID == nb.BindingID || nb.Generation <= old.Binding.Generation {
			return fmt.Errorf("session %s: a transition needs a new binding id and a higher generation: %w", next.SessionID, ErrBindingRule)
		}
		want = old.Binding.Generation + 1
	} else if old == nil && next.Lineage.PreviousSessionID == "" && nb.Generation != 1 && t.FromSessionID == "" {
		return fmt.Errorf("session %s: the first binding of an unmanaged pane has generation 1: %w", next.SessionID, ErrBindingRule)
	}
	// The ordinary rules, with the generation step the transition allows.
	c := *next
	cb := *nb
	cb.Generation = want
	c.Binding = &cb
	return CheckSessionWrite(old, &c)
}

// TransitionCommit is the end of a verified (or re-verified uncertain)
// transition: the Session writes and the transition, in one write.
type TransitionCommit struct {
	Transition *Transition
	// Sessions are created (Revision 0) or saved (compare-and-set on
	// Revision) under CheckTransitionSessionWrite or, for the Session the
	// transition leaves, CheckSessionWrite's ordinary rules.
	Sessions []*TermSession
}

// TransitionStore holds the transition records. Implementations are safe
// for concurrent use.
type TransitionStore interface {
	// PrepareTransition inserts t (Version becomes 1) and makes it the
	// terminal's dispatch-ledger entry, after checking under the store's
	// serialization that the from-binding is still the current one (else
	// ErrConflict) and that nothing unresolved is on the terminal: a
	// send-blocking Turn, an undelivered callback, a blocking ledger entry
	// or another open transition (ErrTerminalBusy, with the reason).
	PrepareTransition(ctx context.Context, t *Transition) error
	// GetTransition returns the transition or ErrNotFound.
	GetTransition(ctx context.Context, id string) (*Transition, error)
	// AdvanceTransition writes t if its stored version is t.Version (else
	// ErrConflict) and the step is allowed (CheckTransitionAdvance); the
	// ledger entry follows (aborted frees the terminal, uncertain keeps
	// it blocked).
	AdvanceTransition(ctx context.Context, t *Transition) error
	// CommitTransition marks a verified or uncertain transition committed,
	// applies c.Sessions and frees the ledger, atomically.
	CommitTransition(ctx context.Context, c TransitionCommit) error
	// TerminalTransitions returns the terminal's latest transitions,
	// newest first.
	TerminalTransitions(ctx context.Context, terminalKey string, limit int) ([]*Transition, error)
	// OpenTransitions returns up to limit transitions not yet committed
	// or aborted.
	OpenTransitions(ctx context.Context, limit int) ([]*Transition, error)
}
