package store

import (
	"context"
	"encoding/json"
	"errors"
)

// Terminal watch records: a task a human started in an agent pane, followed
// by a monitor host until it completes, fails, times out or is given up,
// with its notifications going through the callback outbox.

// ErrWatched reports that the terminal already has an active watch.
var ErrWatched = errors.New("terminal already watched")

// Watch statuses. Active is the only status a monitor follows; the others
// are final.
const (
	WatchActive      = "active"
	WatchCompleted   = "completed"
	WatchFailed      = "failed"
	WatchTimedOut    = "timed_out"
	WatchInvalidated = "invalidated"
	WatchCancelled   = "cancelled"
)

// WatchStatuses returns every watch status, active first.
func WatchStatuses() []string {
	return []string{WatchActive, WatchCompleted, WatchFailed, WatchTimedOut, WatchInvalidated, WatchCancelled}
}

// ValidWatchStatus reports whether s is a watch status.
func ValidWatchStatus(s string) bool {
	switch s {
	case WatchActive, WatchCompleted, WatchFailed, WatchTimedOut, WatchInvalidated, WatchCancelled:
		return true
	}
	return false
}

// WatchSettlement is how a watch ended.
type WatchSettlement struct {
	// Kind is the notification kind (completed, failed, timed_out,
	// invalidated) or cancelled.
	Kind string `json:"kind"`
	// Text is the agent's reply or the reason, redacted, at most 4000
	// characters.
	Text string `json:"text,omitempty"`
	// Match names the evidence ("codex_task_complete", "codex_turn_aborted").
	Match string `json:"match,omitempty"`
	// MessageID is the outbox message of the notification, if one was
	// prepared.
	MessageID string `json:"message_id,omitempty"`
	SettledAt int64  `json:"settled_at"`
}

// Watch follows one human-started task in one pane incarnation. Writes are
// compare-and-set on Revision and fenced by the monitor lease keyed by
// WatchID.
type Watch struct {
	WatchID     string `json:"watch_id"`
	Revision    int64  `json:"revision"`
	Agent       string `json:"agent"`
	TerminalID  string `json:"terminal_id"`
	TerminalKey string `json:"terminal_key"`
	// PID and ProcessBirth are the agent incarnation the watch follows.
	PID          int    `json:"pid"`
	ProcessBirth string `json:"process_birth,omitempty"`
	// Control is the pane record (the terminal package's Pane as JSON).
	Control json.RawMessage `json:"terminal_control,omitempty"`
	// SessionID, BindingID and Generation fence the notifications to the
	// Session context the watch was started in.
	SessionID         string `json:"session_id"`
	BindingID         string `json:"binding_id"`
	BindingGeneration int64  `json:"binding_generation"`
	NativeThreadID    string `json:"native_thread_id,omitempty"`
	// OriginSessionKey is the OpenClaw session notified; GatewayURL serves
	// it. Empty key: nothing is queued (the watch is visible in status).
	OriginSessionKey string `json:"origin_session_key,omitempty"`
	GatewayURL       string `json:"gateway_url,omitempty"`
	// Anchor is where the human's task must appear in the session file;
	// Acceptance the native evidence of the task once seen.
	Anchor       json.RawMessage `json:"anchor,omitempty"`
	NativeTurnID string          `json:"native_turn_id,omitempty"`
	Acceptance   json.RawMessage `json:"acceptance,omitempty"`
	Status       string          `json:"status"`
	CreatedAt    int64           `json:"created_at"`
	UpdatedAt    int64           `json:"updated_at"`
	// DeadlineAt is the hard deadline; the watch times out there.
	DeadlineAt              int64            `json:"deadline_at"`
	StartedAt               int64            `json:"task_started_at,omitempty"`
	LastApprovalFingerprint string           `json:"last_approval_fingerprint,omitempty"`
	LastQuestionFingerprint string           `json:"last_question_fingerprint,omitempty"`
	Notifications           []string         `json:"notifications,omitempty"`
	Settlement              *WatchSettlement `json:"settlement,omitempty"`
	Diagnostic              string           `json:"diagnostic,omitempty"`
}

// WatchWrite is one atomic change of a watch: compare-and-set on
// Watch.Revision, optionally fenced by the watch's monitor lease, with the
// Also hook (the callback outbox) in the same transaction.
type WatchWrite struct {
	Watch *Watch
	Fence *Fence
	Also  func(ctx context.Context, tx TerminalTx) error
}

// WatchStore holds terminal watches. Implementations are safe for
// concurrent use; records are returned as fresh copies.
type WatchStore interface {
	// CreateWatch inserts w (Revision must be 0; it becomes 1, Status
	// active). A second active watch of the same terminal key fails with
	// ErrWatched.
	CreateWatch(ctx context.Context, w *Watch) error
	// GetWatch returns the watch or ErrNotFound.
	GetWatch(ctx context.Context, id string) (*Watch, error)
	// SaveWatch applies ww atomically and bumps ww.Watch.Revision; a stale
	// revision is ErrConflict, a lost fence ErrLeaseLost. A final status
	// is never left.
	SaveWatch(ctx context.Context, ww WatchWrite) error
	// ActiveWatches returns up to limit active watches, oldest first.
	ActiveWatches(ctx context.Context, limit int) ([]*Watch, error)
	// ActiveWatchIDs returns the ids of ActiveWatches, in its order,
	// without reading the watches.
	ActiveWatchIDs(ctx context.Context, limit int) ([]string, error)
	// TerminalWatches returns the latest watches of a terminal key,
	// newest first.
	TerminalWatches(ctx context.Context, terminalKey string, limit int) ([]*Watch, error)
}
