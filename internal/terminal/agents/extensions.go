package agents

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// The optional extensions of an Agent: the service uses each one only for
// the agents that implement it.

// ThreadControl is implemented by Agents whose native thread controls are
// proven on some versions of the agent.
type ThreadControl interface {
	// ThreadPlan returns the agent version and the lines to submit for a
	// transition of kind (resume: to thread), or an error wrapping
	// termapi.ErrRefused that names the version when the plan is not
	// proven on it.
	ThreadPlan(ctx context.Context, p Pane, kind, thread string) (version string, plan []string, err error)
	// Threads lists the native threads of the pane's workspace, newest
	// first (SortThreads), each complete and verified from the agent's
	// files.
	Threads(ctx context.Context, p Pane) ([]NativeThread, error)
}

// NativeThread is one native thread a pane could resume.
type NativeThread struct {
	ID string `json:"native_thread_id"`
	// Title is the agent's title, else the first prompt (redacted, at most
	// 200 characters: ThreadTitle).
	Title     string `json:"title"`
	CreatedAt int64  `json:"created_at"`
	UpdatedAt int64  `json:"updated_at"`
	// Current marks the pane's foreground thread.
	Current bool `json:"current,omitempty"`
	// SessionID and SessionStatus name the managed Session of the thread.
	SessionID     string `json:"session_id,omitempty"`
	SessionStatus string `json:"session_status,omitempty"`
}

// TaskFinder is implemented by Agents that can follow a task a human
// started: the service watches only agents that implement it.
type TaskFinder interface {
	// StartedTask returns the first native turn started after anchor,
	// whoever typed it; nil without error means none yet. Completion
	// then follows it with the same anchor.
	StartedTask(ctx context.Context, p Pane, anchor json.RawMessage) (*Acceptance, error)
	// ActiveTaskAnchor returns an anchor just before the task that runs
	// now (the watch was asked for after the human pressed Enter).
	ActiveTaskAnchor(ctx context.Context, p Pane, id Identity) (json.RawMessage, error)
}

// InputResumer is implemented by the Agents whose human-input check
// (UserInputSince) can resume from where an earlier one stopped.
type InputResumer interface {
	// UserInputFrom is UserInputSince resumed from cur (the zero Cursor
	// means from the checkpoint); the returned Cursor resumes it again.
	UserInputFrom(ctx context.Context, p Pane, checkpoint json.RawMessage, cur native.Cursor) (native.Cursor, error)
}

// PendingCommand is the exact command an approval prompt asks to run, as
// the agent's own session file records it.
type PendingCommand struct {
	// Tool is the agent's tool ("Bash").
	Tool string
	// Command is the exact command; Cwd the directory the agent recorded
	// with the call.
	Command, Cwd string
	// RequestID is the tool call's id; CommandSHA256 the command's hash;
	// Evidence the fingerprint of session, prompt, call and hash.
	RequestID, CommandSHA256, Evidence string
}

// CommandReader is implemented by an Agent whose approval prompt does not
// show its command exactly but whose session file holds it (Claude Code):
// auto-approve rules match what it returns instead of the screen.
type CommandReader interface {
	// PendingCommand returns the command of the approval prompt that
	// screen (a capture) shows for the accepted turn acc of anchor. An
	// error says why it cannot be told exactly (no single pending call,
	// input beyond the command, a dialog showing another command) or
	// that the session file could not be read; it wraps
	// ErrEvidenceNotYet while the session file does not hold the call.
	PendingCommand(ctx context.Context, p Pane, anchor json.RawMessage, acc Acceptance, screen string) (PendingCommand, error)
}

// ErrEvidenceNotYet is a CommandReader's error while the session file
// does not hold the prompt's call (yet): the agent may draw its dialog
// before it writes the call, more so on a loaded machine.
var ErrEvidenceNotYet = errors.New("waited for the session file")

// Inspector is implemented by Agents whose /status card has been proven on
// a version: the service inspects only those.
type Inspector interface {
	// Version returns the x.y.z version of the pane's agent process.
	Version(p Pane) (string, error)
	// ProvenVersions lists the versions whose card format ParseStatus
	// was proven against.
	ProvenVersions() []string
	// ParseStatus finds the newest status card on a screen; ok is false
	// when none shows.
	ParseStatus(screen string) (card StatusCard, ok bool)
	// DismissKeys are the keys that close the card after it was read
	// (none for a card printed into the history).
	DismissKeys() []string
}
