package agents

import (
	"context"
	"encoding/json"

	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

// Pane is one live coding-agent process tied to exactly one terminal pane.
type Pane struct {
	// TerminalID is the public terminal_id.
	TerminalID string `json:"terminal_id"`
	// Key is the stable endpoint identity (socket + %pane_id): it outlives
	// a renamed session or window.
	Key   string `json:"key"`
	Agent string `json:"agent"`
	PID   int    `json:"pid"`
	// Birth is the process start time: pid + birth is the incarnation.
	Birth string `json:"birth"`
	Cwd   string `json:"cwd"`
	// Control is the provider's own address of the pane (opaque here).
	Control json.RawMessage `json:"control,omitempty"`
	// NotControllable is set when the pane cannot be driven safely now
	// (several agent processes in it, say); Reason says why. Such a pane
	// is listed and followed, never sent to.
	NotControllable bool   `json:"not_controllable,omitempty"`
	Reason          string `json:"reason,omitempty"`
}

// Identity is the native context a pane shows now.
type Identity struct {
	// ThreadID is the native thread (Codex session id, Claude sessionId);
	// "" for an agent that has written no session file yet.
	ThreadID string `json:"thread_id,omitempty"`
	// File is the session file (rollout or transcript), if any.
	File string `json:"file,omitempty"`
	// Locked is, when ThreadID is "", the thread the agent holds locked
	// but has written no session file for yet (Codex after /new once its
	// old rollout is closed, or a fresh Codex TUI). The files alone cannot
	// tell those two apart; the Turn service can, from the Session bound
	// to the process.
	Locked string `json:"locked_thread_id,omitempty"`
}

// Acceptance is native evidence that the agent took the request.
type Acceptance struct {
	// NativeTurnID is the agent's id of the turn (Codex turn_id, Claude
	// prompt uuid).
	NativeTurnID string          `json:"native_turn_id"`
	ThreadID     string          `json:"thread_id,omitempty"`
	Evidence     json.RawMessage `json:"evidence,omitempty"`
	// Resume is, for Completion only, the resume point an earlier pending
	// Completion of the same anchor and turn returned; empty means from
	// the anchor. It is never persisted.
	Resume json.RawMessage `json:"-"`
}

// OutcomeCancelled is a Completion's Outcome when the agent's session files
// record that its turn was interrupted.
const OutcomeCancelled = "cancelled"

// Completion is the end of an accepted native turn.
type Completion struct {
	// Outcome is "completed", "failed" or OutcomeCancelled (the session
	// files record an interrupt).
	Outcome string
	// Text is the reply (redacted and capped by the service).
	Text  string
	Match string
	// ID identifies the completion record (stable across re-reads).
	ID string
}

// ScreenApproval is an approval prompt on the screen.
type ScreenApproval struct {
	// Fingerprint is the hash of the prompt region.
	Fingerprint string
	Kind        string
	// Command is the redacted command (empty for Claude).
	Command string
	// Approvable is false for a prompt that deviates from the known shape:
	// it is reported, never answered.
	Approvable bool
}

// Screen is a classified capture.
type Screen struct {
	// Activity is idle, working, awaiting_approval, awaiting_answer or
	// unknown.
	Activity string
	// Approval is set when an approval prompt is visible.
	Approval *ScreenApproval
	// Question is set when the agent's own question dialog is visible.
	Question *screen.Question
	// Dialog is set when some other dialog or menu covers the composer.
	Dialog bool
	// ComposerEmpty reports an idle composer with no draft.
	ComposerEmpty bool
}

// ScreenOf is the Screen of a reader's parse of a capture.
func ScreenOf(s screen.Screen) Screen {
	out := Screen{Activity: string(s.Activity), ComposerEmpty: s.Activity == screen.Idle && s.Draft == "", Question: s.Question}
	if a := s.Approval; a != nil {
		out.Approval = &ScreenApproval{Fingerprint: a.Fingerprint, Kind: string(a.Kind), Command: a.Command, Approvable: a.Approvable}
	}
	return out
}

// Agent reads one coding agent's native evidence and screens.
type Agent interface {
	// Identify resolves the native context of the pane's process.
	Identify(ctx context.Context, p Pane) (Identity, error)
	// Anchor records where the request's evidence must appear (the end of
	// the session file, or the set of candidate files).
	Anchor(ctx context.Context, p Pane, id Identity) (json.RawMessage, error)
	// Accepted looks for the exact request text after the anchor; nil
	// without error means not yet.
	Accepted(ctx context.Context, p Pane, anchor json.RawMessage, request string) (*Acceptance, error)
	// Completion looks for the end of the accepted turn; nil without error
	// means still running. An error is a malformed or inconsistent record.
	// acc.Evidence is what Accepted returned (it may carry a refined
	// anchor, e.g. a virgin Codex anchor bound to its new rollout).
	//
	// With a nil result, resume is where a later check of the same anchor
	// and turn may go on (passed back as acc.Resume), so that each check
	// reads only what was appended since; its answer is the one a scan
	// from the anchor would give. It is an anchor of the same session file
	// that only the agent reads; nil means the next check starts from the
	// anchor again (an agent whose completion depends on earlier records
	// returns none). A resume point that no longer fits the anchor, turn or
	// file is ignored or reported as the file replaced or truncated, never
	// trusted.
	Completion(ctx context.Context, p Pane, anchor json.RawMessage, acc Acceptance) (c *Completion, resume json.RawMessage, err error)
	// UserInputSince reports a user prompt after the checkpoint anchor (a
	// human typed in the pane).
	UserInputSince(ctx context.Context, p Pane, checkpoint json.RawMessage) (bool, error)
	// WatchPaths are files and directories whose changes may advance the
	// Turn.
	WatchPaths(p Pane, anchor json.RawMessage) []string
	// Screen classifies a capture.
	Screen(text string) Screen
	// DraftVisible reports that the composer shows exactly request as an
	// unsent draft.
	DraftVisible(text, request string) bool
	// Keys returns the approve and cancel key sequences.
	Keys() (approve, cancel []string)
}
