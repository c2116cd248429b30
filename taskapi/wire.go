package taskapi

// The wire types below are the JSON shapes of the task tools' results.
// Field names are the contract; do not rename.

// LogEntry is one log row as shown to callers.
type LogEntry struct {
	TS      int64  `json:"ts"`
	Type    string `json:"type"`
	Text    string `json:"text"`
	IsError bool   `json:"isError,omitempty"`
	Seq     int64  `json:"seq"`
}

// NextAction tells the caller which tool to call next.
type NextAction struct {
	Tool string         `json:"tool"`
	Args NextActionArgs `json:"args"`
}

// NextActionArgs are the arguments of NextAction.
type NextActionArgs struct {
	JobID      string `json:"jobId"`
	SessionKey string `json:"sessionKey"`
}

// Artifacts are the facts derived from a task's tool events and summary.
type Artifacts struct {
	FilesChanged       []string `json:"filesChanged"`
	CommandsRun        []string `json:"commandsRun"`
	BranchName         string   `json:"branchName,omitempty"`
	CommitSHA          string   `json:"commitSha,omitempty"`
	PRURL              string   `json:"prUrl,omitempty"`
	NeedsHumanDecision bool     `json:"needsHumanDecision"`
	Provenance         string   `json:"provenance,omitempty"`
}

// ErrorInfo classifies a failed task.
type ErrorInfo struct {
	Category          string `json:"category"`
	Message           string `json:"message"`
	SuggestedRecovery string `json:"suggestedRecovery"`
}

// Recovery describes a running late-recovery watch.
type Recovery struct {
	Reason        string `json:"reason"`
	StartedAt     int64  `json:"startedAt"`
	IdleTimeoutMs int64  `json:"idleTimeoutMs"`
	HardCapMs     int64  `json:"hardCapMs"`
}

// Liveness is the last upstream liveness probe of a running task.
type Liveness struct {
	CheckedAt int64  `json:"checkedAt"`
	Upstream  string `json:"upstream"`
	Producing bool   `json:"producing"`
}

// Prompt is what the caller asked: the task, the context after the handoff
// was stripped, and the optional sender name.
type Prompt struct {
	Task       string `json:"task"`
	Context    string `json:"context,omitempty"`
	SenderName string `json:"senderName,omitempty"`
}

// ContinuationState is what continues a thread: the session's latest job and
// its result.
type ContinuationState struct {
	SessionKey          string    `json:"sessionKey"`
	LastJobID           string    `json:"lastJobId"`
	LastSummary         string    `json:"lastSummary"`
	Artifacts           Artifacts `json:"artifacts"`
	RecommendedNextStep string    `json:"recommendedNextStep,omitempty"`
	Agent               string    `json:"agent,omitempty"`
	// Principal is who submitted the task; never shown to clients, used
	// by the server's owner isolation.
	Principal string `json:"-"`
}

// BlockedDelegation describes the delegated session that blocks a turn.
type BlockedDelegation struct {
	Runtime   string `json:"runtime"`
	Handle    string `json:"handle"`
	State     string `json:"state"`
	RemoteURL string `json:"remoteUrl,omitempty"`
	Active    bool   `json:"active"`
	Notice    string `json:"notice"`
}

// Snapshot is the JobSnapshot returned by check_task, plus
// taskId, isTerminal and isError.
type Snapshot struct {
	JobID             string             `json:"jobId"`
	TaskID            string             `json:"taskId"`
	SessionKey        string             `json:"sessionKey"`
	Status            string             `json:"status"`
	Execution         string             `json:"execution"`
	Upstream          string             `json:"upstream"`
	Transcript        string             `json:"transcript"`
	Cancellation      string             `json:"cancellation"`
	LastSeenSequence  int64              `json:"lastSeenSequence,omitempty"`
	StartedAt         int64              `json:"startedAt"`
	LastEventAt       int64              `json:"lastEventAt"`
	LastPollAt        int64              `json:"lastPollAt"`
	Summary           string             `json:"summary,omitempty"`
	Error             string             `json:"error,omitempty"`
	ErrorInfo         *ErrorInfo         `json:"errorInfo,omitempty"`
	Logs              []LogEntry         `json:"logs"`
	LogCursor         int64              `json:"logCursor"`
	LogEventCount     int64              `json:"logEventCount"`
	Artifacts         Artifacts          `json:"artifacts"`
	Recovery          *Recovery          `json:"recovery,omitempty"`
	Liveness          *Liveness          `json:"liveness,omitempty"`
	ContinuationState *ContinuationState `json:"continuationState,omitempty"`
	ResultSource      string             `json:"resultSource,omitempty"`
	TerminalReason    string             `json:"terminalReason,omitempty"`
	PayloadPath       string             `json:"payloadPath,omitempty"`
	ParentRunID       string             `json:"parentRunId,omitempty"`
	// AgentSession is the CURRENT attachment record of the session (never
	// the lineage), in the agentsession package's JSON shape; absent when
	// nothing is attached.
	AgentSession      any                `json:"agentSession,omitempty"`
	BlockedDelegation *BlockedDelegation `json:"blockedDelegation,omitempty"`
	Agent             string             `json:"agent,omitempty"`
	PollCount         int64              `json:"pollCount"`
	ContinuePolling   bool               `json:"continuePolling"`
	RetryAfterMs      int64              `json:"retryAfterMs"`
	NextAction        *NextAction        `json:"nextAction"`
	IsTerminal        bool               `json:"isTerminal"`
	IsError           bool               `json:"isError"`
	// Principal is who submitted the task; never shown to clients, used
	// by the server's owner isolation.
	Principal string `json:"-"`
}

// Diagnostics is get_task's diagnostics block.
type Diagnostics struct {
	Error             string             `json:"error,omitempty"`
	ErrorInfo         *ErrorInfo         `json:"errorInfo,omitempty"`
	Recovery          *Recovery          `json:"recovery,omitempty"`
	ContinuationState *ContinuationState `json:"continuationState,omitempty"`
}

// Detail is a get_task detail preset.
type Detail string

// The get_task presets; the default is DetailSummary.
const (
	DetailCore                Detail = "core"
	DetailSummary             Detail = "summary"
	DetailUpdates             Detail = "updates"
	DetailArtifacts           Detail = "artifacts"
	DetailDiagnostics         Detail = "diagnostics"
	DetailPrompt              Detail = "prompt"
	DetailFull                Detail = "full"
	DetailFullWithDiagnostics Detail = "fullWithDiagnostics"
)

// TaskDetail is get_task's result for every preset but "prompt".
type TaskDetail struct {
	TaskID           string             `json:"taskId"`
	JobID            string             `json:"jobId"`
	SessionKey       string             `json:"sessionKey"`
	Agent            string             `json:"agent,omitempty"`
	Status           string             `json:"status"`
	Execution        string             `json:"execution"`
	Upstream         string             `json:"upstream"`
	Transcript       string             `json:"transcript"`
	Cancellation     string             `json:"cancellation"`
	LastSeenSequence int64              `json:"lastSeenSequence,omitempty"`
	StartedAt        int64              `json:"startedAt"`
	LastEventAt      int64              `json:"lastEventAt"`
	EndedAt          int64              `json:"endedAt,omitempty"` // when it reached its final status (ms); absent while it runs
	Recovery         *Recovery          `json:"recovery,omitempty"`
	PollCount        int64              `json:"pollCount"`
	ContinuePolling  bool               `json:"continuePolling"`
	RetryAfterMs     int64              `json:"retryAfterMs"`
	NextAction       *NextAction        `json:"nextAction"`
	IsTerminal       bool               `json:"isTerminal"`
	IsError          bool               `json:"isError"`
	Error            string             `json:"error,omitempty"` // why a failed task failed, in every preset
	ResultSource     string             `json:"resultSource,omitempty"`
	TerminalReason   string             `json:"terminalReason,omitempty"`
	AgentSession     any                `json:"agentSession,omitempty"`
	Liveness         *Liveness          `json:"liveness,omitempty"`
	ParentRunID      string             `json:"parentRunId,omitempty"`
	PayloadPath      string             `json:"payloadPath,omitempty"`
	Summary          string             `json:"summary,omitempty"`
	Updates          []LogEntry         `json:"updates,omitempty"`
	LogCursor        *int64             `json:"logCursor,omitempty"`
	LogEventCount    *int64             `json:"logEventCount,omitempty"`
	Artifacts        *Artifacts         `json:"artifacts,omitempty"`
	Diagnostics      *Diagnostics       `json:"diagnostics,omitempty"`
	Blocked          *BlockedDelegation `json:"blockedDelegation,omitempty"`
	// Principal is who submitted the task; never shown to clients, used
	// by the server's owner isolation.
	Principal string `json:"-"`
}

// PromptResult is get_task's result for the "prompt" preset: the only read
// path of a task's prompt.
type PromptResult struct {
	TaskID string `json:"taskId"`
	Prompt Prompt `json:"prompt"`
}

// TaskStatus is the derived status of a list row.
type TaskStatus string

// The list_tasks statuses.
const (
	TaskQueued     TaskStatus = "queued"
	TaskRunning    TaskStatus = "running"
	TaskDone       TaskStatus = "done"
	TaskFailed     TaskStatus = "failed"
	TaskBlocked    TaskStatus = "blocked"
	TaskNeedsHuman TaskStatus = "needs-human"
	TaskCancelled  TaskStatus = "cancelled"
)

// TaskSummary is one list_tasks row: a session's latest job.
type TaskSummary struct {
	TaskID            string             `json:"taskId"`
	JobID             string             `json:"jobId"`
	SessionKey        string             `json:"sessionKey"`
	Agent             string             `json:"agent,omitempty"`
	Status            TaskStatus         `json:"status"`
	StartedAt         int64              `json:"startedAt"`
	LastEventAt       int64              `json:"lastEventAt"`
	EndedAt           int64              `json:"endedAt,omitempty"` // when it reached its final status (ms); absent while it runs
	Liveness          *Liveness          `json:"liveness,omitempty"`
	Summary           string             `json:"summary,omitempty"`
	SummaryTruncated  bool               `json:"summaryTruncated,omitempty"`
	Error             string             `json:"error,omitempty"`
	BlockedDelegation *BlockedDelegation `json:"blockedDelegation,omitempty"`
	// Principal is who submitted the task; never shown to clients, used
	// by the server's owner isolation.
	Principal string `json:"-"`
	// Request is the start of what was asked (the task text, at most 500
	// characters), so a list a person scans tells tasks apart. The
	// dashboard shows it; list_tasks clients already know what they asked.
	Request string `json:"-"`
}

// ListView selects list_tasks rows.
type ListView string

// The list_tasks views.
const (
	ViewActive ListView = "active"
	ViewAll    ListView = "all"
)

// SessionMode is a get_session mode.
type SessionMode string

// The get_session modes.
const (
	ModeSnapshot SessionMode = "snapshot"
	ModeEvents   SessionMode = "events"
	ModeTail     SessionMode = "tail"
	ModeTasks    SessionMode = "tasks"
)

// SessionResult is get_session's result.
type SessionResult struct {
	Found        bool          `json:"found"`
	SessionID    string        `json:"sessionId,omitempty"`
	SessionKey   string        `json:"sessionKey,omitempty"`
	Agent        string        `json:"agent,omitempty"`
	JobID        string        `json:"jobId,omitempty"`
	Status       string        `json:"status,omitempty"`
	StartedAt    int64         `json:"startedAt,omitempty"`
	LastEventAt  int64         `json:"lastEventAt,omitempty"`
	Summary      string        `json:"summary,omitempty"`
	Error        string        `json:"error,omitempty"`
	Events       []LogEntry    `json:"events,omitempty"`
	NextAfter    *int64        `json:"nextAfter,omitempty"`
	Tasks        []TaskSummary `json:"tasks,omitempty"`
	AgentSession any           `json:"agentSession,omitempty"`
	// Principal is who started the session; never shown to clients, used
	// by the server's owner isolation.
	Principal string `json:"-"`
}

// SessionList is list_sessions' result.
type SessionList struct {
	Sessions         []ContinuationState `json:"sessions"`
	ConfiguredAgents []string            `json:"configuredAgents"`
}

// RunResult is run_task's structured result.
type RunResult struct {
	JobID        string      `json:"jobId"`
	TaskID       string      `json:"taskId"`
	SessionKey   string      `json:"sessionKey"`
	Status       string      `json:"status"`
	Execution    string      `json:"execution"`
	Upstream     string      `json:"upstream"`
	Transcript   string      `json:"transcript"`
	Cancellation string      `json:"cancellation"`
	Agent        string      `json:"agent"`
	NextAction   *NextAction `json:"nextAction"`
}

// CancelResult is cancel_task's structured result.
type CancelResult struct {
	Found           bool   `json:"found"`
	Requested       bool   `json:"requested"`
	AlreadyTerminal bool   `json:"alreadyTerminal"`
	Status          string `json:"status,omitempty"`
	JobID           string `json:"jobId,omitempty"`
	Note            string `json:"note,omitempty"`
}
