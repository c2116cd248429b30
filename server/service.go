package server

import (
	"context"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
)

// ErrNotFound is returned by a Tasks implementation when the job, task or
// session does not exist. The tools turn it into their not-found results.
var ErrNotFound = taskapi.ErrNotFound

// Tasks is what the MCP tools need from the task manager. Implementations
// must be safe for concurrent use; every method honours ctx.
type Tasks interface {
	// Run submits a task and returns at once; it never waits for the run.
	Run(ctx context.Context, req RunRequest) (taskapi.RunResult, error)
	// Check resolves the job (by JobID, else by the session's latest job),
	// counts a poll and, unless the job is already finished, blocks until it
	// finishes, the wait elapses, ctx ends or (in poll mode) new log entries
	// beyond KnownLogCount appear. onUpdate, when non-nil, is called with
	// each intermediate snapshot while waiting; it must not block for long.
	Check(ctx context.Context, req CheckRequest, onUpdate func(taskapi.Snapshot)) (taskapi.Snapshot, error)
	// GetTask returns a task at the given detail preset (never "prompt")
	// without waiting and without counting a poll.
	GetTask(ctx context.Context, taskID string, detail taskapi.Detail, knownLogCount int64) (taskapi.TaskDetail, error)
	// GetPrompt returns what the caller asked for a task.
	GetPrompt(ctx context.Context, taskID string) (taskapi.PromptResult, error)
	// ListTasks returns one row per known session: its latest job. only,
	// when set, keeps the sessions that principal started.
	ListTasks(ctx context.Context, view taskapi.ListView, only *string) ([]taskapi.TaskSummary, error)
	// GetSession inspects a session. A missing session is ErrNotFound.
	GetSession(ctx context.Context, req SessionRequest) (taskapi.SessionResult, error)
	// ListSessions returns the continuation state of every known session
	// (with only set, of those that principal started).
	ListSessions(ctx context.Context, only *string) ([]taskapi.ContinuationState, error)
	// Cancel asks the gateway to stop a job; it is idempotent.
	Cancel(ctx context.Context, jobID string) (taskapi.CancelResult, error)
}

// StatusCounter is optionally implemented by a Tasks value to feed the
// clawconnect_tasks gauge of /metrics. It is called once per scrape.
type StatusCounter interface {
	CountByStatus(ctx context.Context) (map[string]int, error)
}

// Starter is optionally implemented by a Tasks value whose backend opens
// lazily. ServeStdio calls Start once the tools are registered, which is
// after its first message (for a client, initialize) has been handled, so
// opening the backend competes neither with that answer nor with the
// registration that tools/list waits for. Start must not block and must be
// safe to call more than once; a Tasks that also starts on first use works
// when Start is never called.
type Starter interface {
	Start()
}

// GatewayStater is optionally implemented by a Tasks value to feed the
// clawconnect_gateway_connected gauge of /metrics: agent id → state
// ("connected", "reconnecting", "unavailable", or "not_connected_yet" for
// a gateway not dialled yet).
type GatewayStater interface {
	GatewayStates() map[string]string
}

// RunRequest is a validated run_task call. Agent is always a configured,
// in-scope agent id.
type RunRequest struct {
	Agent      string
	Task       string
	Context    string
	SessionKey string
	SenderName string
	Payload    string
	// Principal is who submits ("" for a single-user caller); it is
	// recorded on the task and on a new session.
	Principal string
	// AnySession lets a caller with a Principal continue a session another
	// principal started (a team view); otherwise such a sessionKey reads as
	// not found. A caller with no Principal may continue any session.
	AnySession bool
}

// Check modes.
const (
	ModeWait = "wait"
	ModePoll = "poll"
)

// CheckRequest is a validated check_task call.
type CheckRequest struct {
	JobID         string
	SessionKey    string
	Agent         string // may be empty: any agent
	KnownLogCount int64
	Mode          string        // ModeWait or ModePoll
	Wait          time.Duration // already clamped
}

// SessionRequest is a validated get_session call.
type SessionRequest struct {
	SessionID string
	Agent     string // may be empty: any agent
	Mode      taskapi.SessionMode
	Limit     int // 1..200
	After     int // >= 0
}
