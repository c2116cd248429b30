package termapi

import (
	"errors"
	"time"
)

// TurnRef names a Turn and its status. TurnID is empty when the Turn
// belongs to another MCP caller: the pane is busy, and whose it is stays
// hidden.
type TurnRef struct {
	TurnID string     `json:"turn_id,omitempty"`
	Status TurnStatus `json:"status"`
	// Shown is Status as a person reads it (ShownStatus): a Turn that
	// reports to no OpenClaw session never reads waiting_for_openclaw.
	// Empty from a service that predates it; read Status then.
	Shown string `json:"shown_status,omitempty"`
}

// Action is a send action allowed now, with its arguments prefilled.
type Action struct {
	Action          string            `json:"action"`
	Scope           string            `json:"scope"`
	Arguments       map[string]string `json:"arguments"`
	MissingRequired []string          `json:"missing_required"`
}

// TerminalRow is one live agent pane.
type TerminalRow struct {
	ID              string `json:"id"`
	Agent           string `json:"agent"`
	PID             int    `json:"pid"`
	Cwd             string `json:"cwd"`
	ActivityState   string `json:"activity_state"`
	ManagementState string `json:"management_state"`
	SessionID       string `json:"session_id,omitempty"`
	// UnprovenVersion is the agent's version when the session-file and
	// screen readers were not proven against it: a send is refused
	// unless unproven versions are allowed, and its Turn is marked.
	UnprovenVersion string `json:"unproven_version,omitempty"`
	// BindingGeneration is the generation of the pane's current binding
	// (0 while unmanaged); a thread transition advances it.
	BindingGeneration int64 `json:"binding_generation"`
	// NativeThreadID is the pane's foreground thread.
	NativeThreadID string `json:"native_thread_id,omitempty"`
	// Conflict is set when a human switched the pane's thread away from
	// its bound Session.
	Conflict *ThreadConflict `json:"management_conflict,omitempty"`
	// Transition is the terminal's unfinished thread transition, with
	// its recovery actions.
	Transition  *TransitionView `json:"transition,omitempty"`
	CurrentTurn *TurnRef        `json:"current_turn,omitempty"`
	// Reason says why no send is offered, when none is.
	Reason           string   `json:"reason,omitempty"`
	AvailableActions []Action `json:"available_actions"`
}

// ListResult is what List returns.
type ListResult struct {
	Terminals []TerminalRow `json:"terminals"`
}

// TurnView is a Turn as Status reports it.
type TurnView struct {
	TurnID            string      `json:"turn_id"`
	SessionID         string      `json:"session_id"`
	Agent             string      `json:"agent"`
	TerminalID        string      `json:"terminal_id"`
	Status            TurnStatus  `json:"status"`
	SubmissionOutcome string      `json:"submission_outcome,omitempty"`
	Result            *TurnResult `json:"result,omitempty"`
	Approval          *Approval   `json:"approval,omitempty"`
	// Question is the question the agent asks in its own dialog; respond
	// answers it with an option's number or label (or typed text when
	// FreeText).
	Question      *Question `json:"question,omitempty"`
	StalledReason string    `json:"stalled_reason,omitempty"`
	// DetectorDiagnostic is the last error reading the agent's session
	// file (redacted); the Turn is never completed from a guess.
	DetectorDiagnostic string `json:"detector_diagnostic,omitempty"`
	CloseReason        string `json:"close_reason,omitempty"`
	CreatedAt          string `json:"created_at"`
	UpdatedAt          string `json:"updated_at"`
	IdleSince          string `json:"idle_since,omitempty"`
	StalledAt          string `json:"stalled_at,omitempty"`
	ClosedAt           string `json:"closed_at,omitempty"`
	InactivityDeadline string `json:"inactivity_deadline_at,omitempty"`
	HardDeadline       string `json:"hard_deadline_at,omitempty"`
	// OriginSession is the OpenClaw session the Turn reports back to.
	OriginSession string `json:"origin_session,omitempty"`
	// Principal is the MCP caller that sent the Turn ("user:<name>",
	// "legacy"); empty for the CLI, the plugin and a caller with no
	// credential. Only that caller (or one that sees all) may read and
	// steer the Turn through the terminal tools.
	Principal string `json:"principal,omitempty"`
	// CallbackDelivery is the delivery state of the Turn's latest
	// callback (Status only).
	CallbackDelivery *CallbackView `json:"callback_delivery,omitempty"`
	// UnprovenVersion is the agent's version when the session-file and
	// screen readers were not proven against it (the Turn was sent with
	// unproven versions allowed): its reading may be wrong.
	UnprovenVersion string `json:"unproven_version,omitempty"`
	// AutoApprovals are the approval prompts an auto-approve rule
	// answered for the Turn, oldest first.
	AutoApprovals []AutoApproval `json:"auto_approvals,omitempty"`
	// NextSteps are the operations the Turn's state accepts now
	// (approve, respond, answer_in_terminal, send, renew, cancel, close,
	// status), the same list its callbacks carry.
	NextSteps []string `json:"next_steps,omitempty"`
}

// SendRequest is a request to start a new Turn. Exactly one of SessionID
// (scope session_exact) and TerminalID (scope terminal_follow_current).
type SendRequest struct {
	SessionID  string `json:"session_id,omitempty"`
	TerminalID string `json:"terminal_id,omitempty"`
	Request    string `json:"request"`
	// InactivityTimeout and HardTimeout override the service defaults.
	InactivityTimeout time.Duration `json:"inactivity_timeout,omitempty"`
	HardTimeout       time.Duration `json:"hard_timeout,omitempty"`
	// OriginSession is the OpenClaw session key the request came from;
	// the Turn's callbacks are delivered there. Empty: no callbacks.
	OriginSession string `json:"origin_session,omitempty"`
	// GatewayURL is the gateway serving OriginSession; "" = the
	// service's CallbackGateway.
	GatewayURL string `json:"gateway_url,omitempty"`
	// Principal is the MCP caller sending the request, recorded on the
	// Turn for good (a respond continues the same Turn, so it keeps it).
	// The MCP server sets it from the caller's credential; the CLI and
	// the plugin leave it empty.
	Principal string `json:"principal,omitempty"`
}

// SendResult is what Send and Respond report.
type SendResult struct {
	SessionID         string `json:"session_id"`
	TurnID            string `json:"turn_id"`
	SubmissionOutcome string `json:"submission_outcome"`
	// DoNotRetry is set when the input may have reached the pane.
	DoNotRetry bool `json:"do_not_retry"`
}

// CallbackView is the visible delivery state of a Turn's latest callback.
type CallbackView struct {
	MessageID     string         `json:"message_id"`
	Type          string         `json:"type,omitempty"`
	Kind          string         `json:"kind"`
	SessionKey    string         `json:"session_key"`
	Status        CallbackStatus `json:"status"`
	Attempts      int            `json:"attempts"`
	LastError     string         `json:"last_error,omitempty"`
	NextAttemptAt string         `json:"next_attempt_at,omitempty"`
	DeliveredAt   string         `json:"delivered_at,omitempty"`
	// The evidence objects as recorded. They are maps rather than raw JSON so
	// that the MCP tools' inferred output schema says "object" (a
	// json.RawMessage infers as an array of bytes, and the delivered result
	// would fail the SDK's output validation).
	Injection      map[string]any `json:"injection,omitempty"`
	Wake           map[string]any `json:"wake,omitempty"`
	RunObservation map[string]any `json:"run_observation,omitempty"`
}

// SessionFile is where a Turn's native record starts: the agent's session
// file (Codex rollout, Claude Code transcript) and the byte offset, just
// after a newline, from which the Turn's records follow.
type SessionFile struct {
	TurnID string `json:"turn_id"`
	Agent  string `json:"agent"`
	// Path is empty while a virgin Codex pane's rollout is not bound yet.
	Path   string `json:"path,omitempty"`
	Offset int64  `json:"offset_bytes"`
}

// TurnResult is what the agent answered.
type TurnResult struct {
	// Outcome is "completed" or "failed".
	Outcome string `json:"outcome"`
	// Text is the reply, redacted, at most 4000 characters.
	Text string `json:"text"`
	// Match names the native evidence (e.g. "codex_task_complete").
	Match string `json:"match,omitempty"`
}

// Approval is an approval prompt the agent shows for the Turn.
type Approval struct {
	Fingerprint string `json:"fingerprint"`
	Kind        string `json:"kind"`
	// Command is the redacted command (Codex only; Claude approvals carry
	// no raw command).
	Command    string `json:"command,omitempty"`
	DetectedAt int64  `json:"detected_at"`
}

// Question is a question the agent asks for the Turn in its own dialog
// (Claude Code's AskUserQuestion, Codex's request_user_input).
type Question struct {
	Fingerprint string `json:"fingerprint"`
	// Header is the dialog's short header, if any.
	Header string `json:"header,omitempty"`
	// Text is the question (redacted).
	Text string `json:"text"`
	// Options are the agent's choices, in the dialog's order.
	Options []QuestionOption `json:"options"`
	// FreeText reports that the dialog also takes a typed answer.
	FreeText bool `json:"free_text,omitempty"`
	// Position and Count place the question in a dialog that asks
	// several in turn ("Question 1/2"); Unanswered counts those still
	// without an answer, this one included. Zero for a single question.
	Position   int `json:"position,omitempty"`
	Count      int `json:"count,omitempty"`
	Unanswered int `json:"unanswered,omitempty"`
	// Answerable is false for a dialog of a shape the bridge does not
	// answer (several choices): a human answers it in the terminal.
	Answerable bool  `json:"answerable"`
	DetectedAt int64 `json:"detected_at"`
}

// AutoApproval is one approval prompt an auto-approve rule answered.
type AutoApproval struct {
	// Rule is the rule's position in the rules file (from 1) and its
	// name, if it has one.
	Rule string `json:"rule"`
	// Argv is the approved command, word by word (redacted).
	Argv        []string `json:"argv"`
	Fingerprint string   `json:"fingerprint"`
	At          int64    `json:"at"`
}

// QuestionOption is one choice of a Question.
type QuestionOption struct {
	// Number picks it (respond with "2").
	Number      int    `json:"number"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// Errors callers branch on with errors.Is. Each is wrapped with a message
// that says what was wrong and what to do.
var (
	// ErrBadInput reports a malformed id, flag or request.
	ErrBadInput = errors.New("bad input")
	// ErrNotFound reports an unknown Session, Turn or terminal.
	ErrNotFound = errors.New("not found")
	// ErrRefused reports a target that cannot take the operation now (pane
	// gone, busy, showing a dialog, process changed, ambiguous, Turn in the
	// wrong status, context changed since it was bound).
	ErrRefused = errors.New("refused")
	// ErrInputNotSent reports that the terminal ran and refused the input:
	// nothing reached the pane.
	ErrInputNotSent = errors.New("input not sent")
	// ErrOutcomeUncertain reports that the terminal command was killed or
	// timed out: the input may or may not have reached the pane, and it is
	// never sent again.
	ErrOutcomeUncertain = errors.New("input outcome uncertain")
	// ErrOtherHost reports a Turn or pane that another terminal host's
	// machine runs: its local paths (session file, working directory)
	// are that machine's and are never opened here. Its record in the
	// store, and the operations its host runs (send, approve, cancel),
	// still work from any machine.
	ErrOtherHost = errors.New("on another terminal host")
)

// Agent kinds.
const (
	AgentCodex  = "codex"
	AgentClaude = "claude"
)

// Submission outcomes reported by Send and Respond.
const (
	OutcomeAccepted          = "agent_accepted"
	OutcomePendingAcceptance = "pending_acceptance"
	OutcomeNotAccepted       = "not_accepted"
	OutcomeUncertain         = "uncertain"
	OutcomeNotSent           = "not_sent"
)

// TransitionView is a transition as the API reports it.
type TransitionView struct {
	TransitionID   string `json:"transition_id"`
	Kind           string `json:"kind"`
	Status         string `json:"status"`
	TerminalID     string `json:"terminal_id"`
	Agent          string `json:"agent"`
	AgentVersion   string `json:"agent_version,omitempty"`
	FromSessionID  string `json:"from_session_id,omitempty"`
	FromGeneration int64  `json:"from_generation"`
	FromThreadID   string `json:"from_thread_id,omitempty"`
	// SessionID is the Session the transition binds; Generation the
	// binding generation after it.
	SessionID  string `json:"session_id"`
	Generation int64  `json:"binding_generation"`
	// ThreadID is the thread asked for (resume, adopt) or observed.
	ThreadID string `json:"native_thread_id,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// RecoveryActions are the commands that settle an uncertain
	// transition.
	RecoveryActions []string `json:"recovery_actions,omitempty"`
	PreparedAt      int64    `json:"prepared_at"`
	UpdatedAt       int64    `json:"updated_at"`
}

// ThreadConflict is a pane whose native thread a human switched away from
// its bound Session, with the two ways out.
type ThreadConflict struct {
	SessionID     string   `json:"session_id"`
	BoundThreadID string   `json:"bound_native_thread_id"`
	PaneThreadID  string   `json:"pane_native_thread_id"`
	Reason        string   `json:"reason"`
	Choices       []string `json:"choices"`
}
