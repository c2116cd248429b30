package task

import (
	"context"
	"encoding/json"
)

// Gateway is what the manager needs from an OpenClaw Gateway connection for
// one agent. GatewayClient adapts *gateway.Client; tests use fakes.
type Gateway interface {
	// StartRun subscribes to the session's events, then submits the
	// message, and returns once the gateway acknowledged it. Resubmitting
	// the same IdempotencyKey joins the existing run instead of starting a
	// second one (that is how a restart observes a run again).
	StartRun(ctx context.Context, req RunRequest) (Run, error)
	// History reads the session transcript (chat.history).
	History(ctx context.Context, sessionKey string) (*History, error)
	// Abort asks the gateway to stop runID (or the session's active run)
	// and reports whether it aborted something.
	Abort(ctx context.Context, sessionKey, runID string) (bool, error)
}

// connReporter is implemented by a Gateway that knows whether its
// connection is up (GatewayClient does): a new task's upstream state comes
// from it.
type connReporter interface {
	// Connected reports whether the gateway connection is up now.
	Connected() bool
}

// sessionPreparer is implemented by a Gateway that can start subscribing
// to a session's events before a run is submitted there (GatewayClient
// does): Submit asks for it before it records the task, so the
// subscription's round trip overlaps the store write instead of delaying
// the submit after it.
type sessionPreparer interface {
	// PrepareSession starts the subscription and returns at once; release
	// ends the interest and does not block.
	PrepareSession(sessionKey string) (release func())
}

// Run follows one submitted run.
type Run interface {
	// ID is the run id.
	ID() string
	// Wait blocks until the run ends (an Outcome) or ctx ends (an error).
	Wait(ctx context.Context) (Outcome, error)
	// Close stops following the run without aborting it upstream.
	Close()
}

// RunRequest is a message to run on a session.
type RunRequest struct {
	SessionKey     string
	Message        string
	IdempotencyKey string
	// OnEvent receives the run's events in order, from the run's goroutine.
	OnEvent func(Event)
}

// EventKind classifies an Event.
type EventKind string

// Event kinds.
const (
	EventLifecycle  EventKind = "lifecycle"
	EventAssistant  EventKind = "assistant"
	EventToolStart  EventKind = "tool_start"
	EventToolResult EventKind = "tool_result"
	EventRecovering EventKind = "recovering"
)

// Event is one live event of a run.
type Event struct {
	Kind    EventKind
	Seq     int64
	Phase   string
	Text    string
	Tool    string
	Args    json.RawMessage
	IsError bool
}

// OutcomeStatus is how a run ended.
type OutcomeStatus string

// Run outcomes.
const (
	OutcomeOK      OutcomeStatus = "ok"
	OutcomeError   OutcomeStatus = "error"
	OutcomeAborted OutcomeStatus = "aborted"
	// OutcomeNoText is a run that ended (or was folded into another) with no
	// answer text.
	OutcomeNoText OutcomeStatus = "no_text"
)

// Outcome is the end of a run.
type Outcome struct {
	RunID  string
	Status OutcomeStatus
	Text   string
	Error  string
}

// History is a transcript read.
type History struct {
	Messages     []HistoryMessage
	HasActiveRun bool
	ActiveRunIDs []string
}

// HistoryMessage is one transcript row.
type HistoryMessage struct {
	Role  string
	Text  string
	RunID string
}
