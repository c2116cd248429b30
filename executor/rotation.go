package executor

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// Rotation defaults.
const (
	// DefaultRotationThreshold is the context-window watermark (used tokens
	// over window) at which a session rotates.
	DefaultRotationThreshold = 0.85
	// DefaultMaxRotations bounds the successor chain per task.
	DefaultMaxRotations = 3
)

// RotationPolicy configures rotation. Zero fields mean the defaults.
type RotationPolicy struct {
	ThresholdPct float64 // 0 means DefaultRotationThreshold
	MaxRotations int     // 0 means DefaultMaxRotations
}

func (p RotationPolicy) withDefaults() RotationPolicy {
	if p.ThresholdPct == 0 {
		p.ThresholdPct = DefaultRotationThreshold
	}
	if p.MaxRotations == 0 {
		p.MaxRotations = DefaultMaxRotations
	}
	return p
}

// RotationTrigger is the input of ShouldRotate.
type RotationTrigger struct {
	TokensUsed    int64
	ContextWindow int64
	ThresholdPct  float64
}

// ShouldRotate reports whether the session has crossed the watermark. It is
// inert (false) when the runtime reports no context window or the threshold
// is not positive.
func ShouldRotate(t RotationTrigger) bool {
	if t.ContextWindow <= 0 || t.ThresholdPct <= 0 {
		return false
	}
	return float64(t.TokensUsed)/float64(t.ContextWindow) >= t.ThresholdPct
}

// RotationReason says why a session rotated.
type RotationReason string

// Rotation reasons.
const (
	RotateMaxTurns         RotationReason = "max_turns"
	RotateContextWatermark RotationReason = "context_watermark"
)

// RotationFor decides whether a finished run should rotate into a successor:
// it returns the reason and true when the run hit max_turns, or did not
// succeed while over the watermark, and fewer than the policy's maximum
// rotations happened so far. A runtime that reports no context window only
// rotates on max_turns.
func RotationFor(done Done, tokensUsed int64, caps Capabilities, rotations int, policy RotationPolicy) (RotationReason, bool) {
	policy = policy.withDefaults()
	if rotations >= policy.MaxRotations {
		return "", false
	}
	if done.Reason == DoneMaxTurns {
		return RotateMaxTurns, true
	}
	if done.Reason != DoneSuccess && ShouldRotate(RotationTrigger{TokensUsed: tokensUsed, ContextWindow: caps.ContextWindowTokens, ThresholdPct: policy.ThresholdPct}) {
		return RotateContextWatermark, true
	}
	return "", false
}

// RotationHandoff describes the predecessor a successor session takes over
// from.
type RotationHandoff struct {
	TaskID                string
	PredecessorSessionKey string
	PredecessorSessionID  string // empty when unknown
	Reason                RotationReason
	LastSummary           string
	TokensUsed            int64
	RotationIndex         int // 1-based
}

// BuildRotationHandoffNote renders the short structured note a successor
// session starts with. An empty LastSummary drops its line.
func BuildRotationHandoffNote(h RotationHandoff) string {
	lines := []string{
		"Session handoff (rotation): the previous session reached its context limit.",
		"- Reason: " + string(h.Reason),
		fmt.Sprintf("- Rotation: #%d", h.RotationIndex),
	}
	if h.LastSummary != "" {
		lines = append(lines, "- Last progress: "+h.LastSummary)
	}
	lines = append(lines, "Pick the task up from its current state; pull in only the context you actually need instead of replaying the full history.")
	return strings.Join(lines, "\n")
}

// RotationRecord is what RotateSession hands to RecordRotation.
type RotationRecord struct {
	// Serialized is the predecessor's serialized session, empty when the
	// adapter has no SessionCodec or serializing failed.
	Serialized string
	Handoff    RotationHandoff
	Successor  *RunHandle
}

// RotateOptions configure RotateSession.
type RotateOptions struct {
	Adapter RuntimeAdapter
	Current *RunHandle
	Handoff RotationHandoff
	// Restart starts the successor run with the handoff note (the host
	// re-assembles the prompt around it). Required; its error is returned.
	Restart func(ctx context.Context, handoffNote string) (*RunHandle, error)
	// RecordRotation, when set, records lineage. Its error is logged and
	// otherwise ignored: a failed record never undoes a rotation.
	RecordRotation func(ctx context.Context, rec RotationRecord) error
	// Logger receives the RecordRotation failure; nil discards.
	Logger *slog.Logger
}

// RotateSession rotates a session at a run boundary: it serializes the
// current session when the adapter is a SessionCodec, renders the handoff
// note, starts the successor through Restart and records the rotation.
func RotateSession(ctx context.Context, o RotateOptions) (*RunHandle, error) {
	if o.Restart == nil {
		return nil, fmt.Errorf("rotate session: no restart function")
	}
	var serialized string
	if codec, ok := o.Adapter.(SessionCodec); ok && o.Current != nil {
		if s, err := codec.SerializeSession(ctx, o.Current); err == nil {
			serialized = s
		}
	}
	successor, err := o.Restart(ctx, BuildRotationHandoffNote(o.Handoff))
	if err != nil {
		return nil, fmt.Errorf("rotate session: restart: %w", err)
	}
	if o.RecordRotation != nil {
		if err := o.RecordRotation(ctx, RotationRecord{Serialized: serialized, Handoff: o.Handoff, Successor: successor}); err != nil && o.Logger != nil {
			o.Logger.Warn("record rotation failed", "session_key", successor.SessionKey, "err", err)
		}
	}
	return successor, nil
}
