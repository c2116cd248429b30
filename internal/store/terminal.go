package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/clawconnect/clawconnect/termapi"
)

// Terminal-turn records: the managed Session of a coding agent running in a
// terminal pane, its Turns with their append-only event logs, the
// per-terminal dispatch ledger, the monitor lease of each open Turn and the
// completion claim stored once per Turn. Field names and statuses are the
// ones the callbacks and the plugin carry (docs/GLOSSARY.md).

// Sentinel errors of the terminal records.
var (
	// ErrThreadBound reports that another Session already binds the native
	// thread (one native thread is bound by one Session).
	ErrThreadBound = errors.New("native thread already bound by another session")
	// ErrBindingRule reports a Session write that breaks the binding rules
	// (generation, binding id, immutable fields).
	ErrBindingRule = errors.New("session binding rule violated")
	// ErrTerminalBusy reports that the terminal's dispatch ledger or the
	// Session's open Turn owns the next input.
	ErrTerminalBusy = errors.New("terminal busy")
	// ErrClaimed reports that a different completion was already claimed
	// for the Turn.
	ErrClaimed = errors.New("completion already claimed")
)

// Statuses of a managed Session.
const (
	SessionBound         = "bound"
	SessionDetached      = "detached"
	SessionTransitioning = "transitioning"
	SessionQuarantined   = "quarantined"
)

// NativeProcess fences a binding to one process incarnation.
type NativeProcess struct {
	PID          int    `json:"pid"`
	ProcessUUID  string `json:"process_uuid,omitempty"`
	ProcessBirth string `json:"process_birth,omitempty"`
	// Rollout is the native session file (Codex rollout or Claude
	// transcript) the binding was verified against.
	Rollout string `json:"rollout,omitempty"`
}

// Binding ties a Session to one terminal pane, process and native thread.
// A binding is never removed, only replaced by one with a new BindingID and
// Generation+1; the same binding may only fill identity fields that were
// empty.
type Binding struct {
	BindingID      string          `json:"binding_id"`
	Generation     int64           `json:"generation"`
	TerminalID     string          `json:"terminal_id"`
	TerminalKey    string          `json:"terminal_key"`
	NativeThreadID string          `json:"native_thread_id,omitempty"`
	NativeProcess  NativeProcess   `json:"native_process"`
	Checkpoint     json.RawMessage `json:"checkpoint,omitempty"`
	BoundAt        int64           `json:"bound_at"`
	LastVerifiedAt int64           `json:"last_verified_at"`
}

// Lineage says how a Session came to be; it is immutable.
type Lineage struct {
	CreatedBy                 string `json:"created_by"`
	PreviousSessionID         string `json:"previous_session_id,omitempty"`
	ResumedFromNativeThreadID string `json:"resumed_from_native_thread_id,omitempty"`
}

// TermSession is a managed Session: one native coding-agent context
// bound to a terminal. Writes are compare-and-set on Revision.
type TermSession struct {
	SessionID        string   `json:"session_id"`
	Revision         int64    `json:"revision"`
	Agent            string   `json:"agent"`
	Workspace        string   `json:"workspace"`
	Status           string   `json:"status"`
	Binding          *Binding `json:"binding,omitempty"`
	Lineage          Lineage  `json:"lineage"`
	CreatedAt        int64    `json:"created_at"`
	UpdatedAt        int64    `json:"updated_at"`
	DetachedAt       int64    `json:"detached_at,omitempty"`
	QuarantineReason string   `json:"quarantine_reason,omitempty"`
}

// CheckSessionWrite enforces the Session write rules for replacing old
// with next (old nil = create). It returns an error wrapping ErrBindingRule.
func CheckSessionWrite(old, next *TermSession) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("session %s: %s: %w", next.SessionID, fmt.Sprintf(format, a...), ErrBindingRule)
	}
	switch next.Status {
	case SessionBound, SessionDetached, SessionTransitioning, SessionQuarantined:
	default:
		return bad("unknown status %q", next.Status)
	}
	if next.Agent == "" || next.SessionID == "" {
		return bad("session id and agent are required")
	}
	if next.Status == SessionBound && next.Binding == nil {
		return bad("a bound session needs a binding")
	}
	if old == nil {
		if next.Binding != nil && next.Binding.Generation != 1 {
			return bad("the first binding must have generation 1, not %d", next.Binding.Generation)
		}
		return checkBindingShape(next)
	}
	if old.Agent != next.Agent || old.Workspace != next.Workspace || old.CreatedAt != next.CreatedAt || old.Lineage != next.Lineage {
		return bad("agent, workspace, created_at and lineage are immutable")
	}
	ob, nb := old.Binding, next.Binding
	switch {
	case ob == nil && nb == nil:
	case ob != nil && nb == nil:
		return bad("a binding can be replaced but never removed")
	case ob == nil:
		if nb.Generation != 1 {
			return bad("the first binding must have generation 1, not %d", nb.Generation)
		}
	case ob.BindingID == nb.BindingID:
		if ob.Generation != nb.Generation {
			return bad("binding %s changed generation without a new binding id", nb.BindingID)
		}
		if ob.TerminalID != nb.TerminalID || ob.TerminalKey != nb.TerminalKey {
			return bad("binding %s may not change its terminal", nb.BindingID)
		}
		if !refines(ob.NativeThreadID, nb.NativeThreadID) || ob.NativeProcess.PID != nb.NativeProcess.PID ||
			!refines(ob.NativeProcess.ProcessUUID, nb.NativeProcess.ProcessUUID) ||
			!refines(ob.NativeProcess.ProcessBirth, nb.NativeProcess.ProcessBirth) ||
			!refines(ob.NativeProcess.Rollout, nb.NativeProcess.Rollout) {
			return bad("binding %s may only fill missing identity, never change it (a new process or thread needs a new binding)", nb.BindingID)
		}
	default:
		if nb.Generation != ob.Generation+1 {
			return bad("a replacing binding needs generation %d, not %d", ob.Generation+1, nb.Generation)
		}
	}
	return checkBindingShape(next)
}

func refines(old, next string) bool { return old == "" || old == next }

func checkBindingShape(s *TermSession) error {
	b := s.Binding
	if b == nil {
		return nil
	}
	if !strings.HasPrefix(b.BindingID, "binding-") || b.TerminalID == "" || b.TerminalKey == "" {
		return fmt.Errorf("session %s: a binding needs a binding-… id, a terminal id and key: %w", s.SessionID, ErrBindingRule)
	}
	return nil
}

// Submission is the state of the message currently in flight.
type Submission struct {
	MessageID   string `json:"message_id"`
	MessageType string `json:"message_type"`
	RequestHash string `json:"request_hash"`
	// Text is the answer text of a respond (a task's text is the Turn's
	// request text).
	Text string `json:"text,omitempty"`
	// Status is the dispatch status (prepared … agent_accepted).
	Status termapi.DispatchStatus `json:"status"`
	// Outcome is the submission outcome reported to the sender.
	Outcome            string          `json:"outcome,omitempty"`
	Anchor             json.RawMessage `json:"anchor,omitempty"`
	AcceptanceEvidence json.RawMessage `json:"acceptance_evidence,omitempty"`
	// NativeTurnID is the agent's own id of the accepted turn (Codex
	// turn_id, Claude prompt uuid).
	NativeTurnID string `json:"native_turn_id,omitempty"`
	PreparedAt   int64  `json:"prepared_at"`
	AcceptedAt   int64  `json:"accepted_at,omitempty"`
}

// Takeover holds the Turn's takeover record: the fields any monitor needs
// to resume the Turn.
type Takeover struct {
	TerminalID               string          `json:"terminal_id"`
	TerminalKey              string          `json:"terminal_key"`
	TerminalControl          json.RawMessage `json:"terminal_control,omitempty"`
	AgentPID                 int             `json:"terminal_agent_pid"`
	ProcessBirth             string          `json:"process_birth,omitempty"`
	RequestText              string          `json:"terminal_bridge_request_text"`
	StartedAt                int64           `json:"terminal_bridge_started_at"`
	InactivityTimeoutMinutes float64         `json:"terminal_bridge_inactivity_timeout_minutes"`
	HardTimeoutMinutes       float64         `json:"terminal_bridge_hard_timeout_minutes"`
	InactivityDeadlineAt     int64           `json:"terminal_bridge_inactivity_deadline_at,omitempty"`
	HardDeadlineAt           int64           `json:"terminal_bridge_hard_deadline_at,omitempty"`
	LastActivityAt           int64           `json:"terminal_bridge_last_activity_at,omitempty"`
	LastActivityReason       string          `json:"terminal_bridge_last_activity_reason,omitempty"`
	Submission               Submission      `json:"terminal_bridge_submission"`
	DetectorDiagnostic       string          `json:"terminal_bridge_detector_diagnostic,omitempty"`
	ApprovalResolvedAt       int64           `json:"terminal_bridge_approval_resolved_at,omitempty"`
	LastApprovalFingerprint  string          `json:"terminal_bridge_last_approval_fingerprint,omitempty"`
	// ApprovingFingerprint is the prompt an approve claimed before pressing
	// its key (ApprovingAt when): the approver records that prompt's
	// resolution, so the monitor does not mistake the closing prompt for
	// a human's answer.
	ApprovingFingerprint string `json:"terminal_bridge_approving_fingerprint,omitempty"`
	ApprovingAt          int64  `json:"terminal_bridge_approving_at,omitempty"`
	// ApprovalBlocked says the approval prompt the Turn waits for does not
	// have a shape the bridge can answer safely: only a human answers it.
	ApprovalBlocked          bool   `json:"terminal_bridge_approval_blocked,omitempty"`
	PreSendScreenFingerprint string `json:"terminal_bridge_pre_send_screen_fingerprint,omitempty"`
	// The question dialog's counterparts of the approval fields above:
	// the last question reported and when it was answered, the question a
	// respond claimed before pressing its keys, and whether only a human
	// can answer the question shown.
	LastQuestionFingerprint string `json:"terminal_bridge_last_question_fingerprint,omitempty"`
	QuestionResolvedAt      int64  `json:"terminal_bridge_question_resolved_at,omitempty"`
	AnsweringFingerprint    string `json:"terminal_bridge_answering_fingerprint,omitempty"`
	AnsweringAt             int64  `json:"terminal_bridge_answering_at,omitempty"`
	QuestionBlocked         bool   `json:"terminal_bridge_question_blocked,omitempty"`
}

// Turn is one request sent to a terminal agent and followed to its end.
// Writes go through WriteTurn, compare-and-set on Version.
type Turn struct {
	TurnID                    string              `json:"turn_id"`
	SessionID                 string              `json:"session_id"`
	Agent                     string              `json:"agent"`
	Workspace                 string              `json:"workspace"`
	TerminalBindingID         string              `json:"terminal_binding_id"`
	TerminalBindingGeneration int64               `json:"terminal_binding_generation"`
	NativeThreadID            string              `json:"native_thread_id,omitempty"`
	UserRequest               string              `json:"user_request"`
	Status                    termapi.TurnStatus  `json:"status"`
	ResponseRoundsUsed        int                 `json:"response_rounds_used"`
	Result                    *termapi.TurnResult `json:"result,omitempty"`
	Approval                  *termapi.Approval   `json:"approval,omitempty"`
	Question                  *termapi.Question   `json:"question,omitempty"`
	CreatedAt                 int64               `json:"created_at"`
	UpdatedAt                 int64               `json:"updated_at"`
	IdleSince                 int64               `json:"idle_since,omitempty"`
	ClosedAt                  int64               `json:"closed_at,omitempty"`
	CloseReason               string              `json:"close_reason,omitempty"`
	CancelRequestedAt         int64               `json:"cancel_requested_at,omitempty"`
	StalledAt                 int64               `json:"stalled_at,omitempty"`
	StalledReason             string              `json:"stalled_reason,omitempty"`
	Takeover                  Takeover            `json:"native_session_takeover"`
	// OriginSessionKey is the OpenClaw session the Turn was sent from;
	// its callbacks go there. Empty: no callback is prepared.
	OriginSessionKey string `json:"origin_session_key,omitempty"`
	// GatewayURL is the gateway that serves OriginSessionKey (recorded at
	// send from the configured agent).
	GatewayURL string `json:"gateway_url,omitempty"`
	// Principal is the caller that sent the Turn through MCP
	// ("user:<name>" for a personal token, "legacy" for the shared
	// password); "" for the CLI, the OpenClaw plugin and a caller with no
	// credential. It is fixed when the Turn is created: WriteTurn refuses
	// to change it.
	Principal string `json:"principal,omitempty"`
	// UnprovenVersion is the agent's version when it is one the readers
	// were not proven against (sent with unproven versions allowed); ""
	// for a proven one.
	UnprovenVersion string `json:"unproven_version,omitempty"`
	// AutoApprovals are the approval prompts an auto-approve rule
	// answered for the Turn.
	AutoApprovals []termapi.AutoApproval `json:"auto_approvals,omitempty"`
	// HostSeal is the seal of the terminal host that created the Turn
	// (an HMAC with a key that never leaves it), when its terminal id
	// names a host: that host follows only Turns it sealed.
	HostSeal string `json:"terminal_host_seal,omitempty"`
	// Version is the compare-and-set version; WriteTurn bumps it.
	Version int64 `json:"-"`
}

// Dispatch is the per-terminal ledger entry: who owns the next input.
type Dispatch struct {
	TerminalKey          string                 `json:"terminal_key"`
	GenerationID         string                 `json:"generation_id"`
	PreviousGenerationID string                 `json:"previous_generation_id,omitempty"`
	SessionID            string                 `json:"session_id"`
	TurnID               string                 `json:"turn_id"`
	MessageID            string                 `json:"message_id"`
	MessageType          string                 `json:"message_type"`
	RequestHash          string                 `json:"request_hash"`
	Status               termapi.DispatchStatus `json:"status"`
	BindingID            string                 `json:"binding_id"`
	BindingGeneration    int64                  `json:"binding_generation"`
	PreparedAt           int64                  `json:"prepared_at"`
	TextInjectedAt       int64                  `json:"text_injected_at,omitempty"`
	EnterDispatchedAt    int64                  `json:"enter_dispatched_at,omitempty"`
	AgentAcceptedAt      int64                  `json:"agent_accepted_at,omitempty"`
	NotAcceptedAt        int64                  `json:"not_accepted_at,omitempty"`
	UncertainAt          int64                  `json:"uncertain_at,omitempty"`
	// SafeToRetry is set only for an abort before any input reached the
	// pane.
	SafeToRetry bool   `json:"safe_to_retry,omitempty"`
	Error       string `json:"error,omitempty"`
	// ReleasedAt is set when an explicit close resolved a blocking entry.
	ReleasedAt int64 `json:"released_at,omitempty"`
	// Version is the entry's stored version, set by a read: every write
	// of the terminal's entry bumps it (a write's own Version is
	// ignored), so a follower that keeps the entry it read re-reads it
	// only when Versions says it moved.
	Version int64 `json:"-"`
}

// Blocks reports whether d keeps the terminal from taking new input, given
// the status of its owning Turn ("" if the Turn is gone).
func (d *Dispatch) Blocks(ownerStatus termapi.TurnStatus) bool {
	if d == nil || d.ReleasedAt != 0 {
		return false
	}
	switch d.Status {
	case termapi.DispatchPrepared, termapi.DispatchTextInjected, termapi.DispatchDispatching, termapi.DispatchUncertain, termapi.DispatchNotAccepted:
		return true
	case termapi.DispatchAborted:
		return false
	}
	return ownerStatus != "" && !ownerStatus.Released()
}

// TurnEvent is one line of a Turn's append-only event log. Seq is 1-based
// and dense per Turn; the store assigns it.
type TurnEvent struct {
	Seq  int64           `json:"seq"`
	TS   int64           `json:"ts"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// CompletionClaim is stored once per Turn: the one completion a monitor may
// report. A second claim with the same fingerprint is a no-op; a different
// one fails with ErrClaimed.
type CompletionClaim struct {
	TurnID                string `json:"turn_id"`
	MessageID             string `json:"terminal_bridge_message_id"`
	CompletionFingerprint string `json:"completion_fingerprint"`
	CompletionID          string `json:"completion_id"`
	CallbackMessageID     string `json:"callback_message_id"`
	Outcome               string `json:"outcome"`
	ClaimedAt             int64  `json:"claimed_at"`
}

// Kinds of terminal work followed under a lease (WorkLease.Kind). Each
// piece of work is one row of one lease table, claimed, renewed and
// released the way a running task's lease is.
const (
	// LeaseMonitor is a Turn's monitor (or its sender while it types),
	// keyed by turn id.
	LeaseMonitor = "monitor"
	// LeaseWatch is a watch's follower, keyed by watch id.
	LeaseWatch = "watch"
	// LeaseCallback is a callback's delivery attempt, keyed by message id.
	LeaseCallback = "callback"
	// LeaseTransition is a running thread transition, keyed by transition id.
	LeaseTransition = "transition"
)

// LeaseKinds returns every kind of terminal work lease.
func LeaseKinds() []string { return []string{LeaseMonitor, LeaseWatch, LeaseCallback, LeaseTransition} }

// Record kinds Versions reads: a Turn's Version, a Session's Revision, a
// watch's Revision, a terminal's dispatch ledger entry's Version (by
// terminal key).
const (
	VersionTurn     = "turn"
	VersionSession  = "session"
	VersionWatch    = "watch"
	VersionDispatch = "dispatch"
)

// WorkLease is the lease on one piece of terminal work: Owner (a process
// registry id, owner.Identity.ID) follows it until Until (Unix ms; 0 =
// released). Fence grows on every claim, so a write fenced by an older
// claim fails with ErrLeaseLost.
type WorkLease struct {
	Kind  string
	ID    string
	Owner string
	Fence int64
	Until int64
}

// MonitorLease is the lease of a Turn's monitor or a watch's follower.
type MonitorLease = WorkLease

// WorkLeases claims, renews and releases terminal work leases. A claim is
// one conditional write (taken only if the lease is free, expired or the
// claimer's own), so a caller reads the candidates first (WorkLeases)
// instead of trying every piece of work.
type WorkLeases interface {
	// ClaimWork leases kind's id to owner until `until` if no lease was
	// ever taken, the stored one expired before now or is owner's, and
	// raises its fence. Another owner's live lease is ErrLeaseLost.
	ClaimWork(ctx context.Context, kind, id, owner string, now, until int64) (WorkLease, error)
	// RenewWork extends to until the leases of kind that owner still
	// holds on ids and returns the ids it no longer holds (released, or
	// claimed by another after they expired).
	RenewWork(ctx context.Context, kind, owner string, until int64, ids []string) (lost []string, err error)
	// ReleaseWork ends l now if l.Owner still holds it with l.Fence; a
	// lease claimed since is left alone.
	ReleaseWork(ctx context.Context, l WorkLease) error
	// WorkLeases returns the stored leases of kind on ids (held, expired
	// or released: compare Until with now), in ids' order; an id no one
	// ever claimed is missing. It only reads.
	WorkLeases(ctx context.Context, kind string, ids []string) ([]WorkLease, error)
}

// Fence is the work lease a write must still hold: its owner and its
// fence (WorkLease.Fence) at Now.
type Fence struct {
	Owner string
	Token int64
	Now   int64
}

// TurnCreate creates a Turn and takes the terminal's next input atomically.
type TurnCreate struct {
	Turn     *Turn
	Dispatch *Dispatch
	Events   []TurnEvent
}

// DispatchAdvance moves the ledger entry of one generation to a new state.
type DispatchAdvance struct {
	TerminalKey  string
	GenerationID string
	// Update replaces the stored entry when its generation still matches.
	Update *Dispatch
}

// TerminalTx is the transaction a completion claim runs in; the callback
// outbox writes its message and the monitor its Session checkpoint through
// it in the same commit.
type TerminalTx interface {
	// AppendTurnEvents appends events to the Turn's log.
	AppendTurnEvents(ctx context.Context, turnID string, events []TurnEvent) error
	// GetTermSession reads the Session inside the transaction (locked
	// where the database can).
	GetTermSession(ctx context.Context, id string) (*TermSession, error)
	// SaveTermSession replaces the Session as TerminalStore.SaveTermSession
	// does (compare-and-set on Revision, the write rules), but inside the
	// transaction: it commits or rolls back with the rest of the write.
	// s.Revision is bumped when the call succeeds, even if the transaction
	// later rolls back.
	SaveTermSession(ctx context.Context, s *TermSession) error
	// PutCallback inserts a pending callback. The same message id with the
	// same Message is a no-op (an exact duplicate); with a different
	// Message it fails with ErrConflict: an outbox payload is immutable.
	PutCallback(ctx context.Context, cb *Callback) error
}

// Callback is one outbox entry: the canonical message for an OpenClaw
// session and its delivery state. Message is immutable once stored; the
// rest is written only under the attempt lease (the LeaseCallback work
// lease: LeaseOwner, LeaseToken is its fence, LeaseUntil).
type Callback struct {
	MessageID  string                 `json:"message_id"`
	TurnID     string                 `json:"turn_id"`
	SessionID  string                 `json:"session_id"`
	Kind       string                 `json:"kind"`
	SessionKey string                 `json:"session_key"`
	GatewayURL string                 `json:"gateway_url,omitempty"`
	BindingID  string                 `json:"binding_id"`
	Generation int64                  `json:"binding_generation"`
	Message    json.RawMessage        `json:"message"`
	Status     termapi.CallbackStatus `json:"status"`
	Attempts   int                    `json:"attempts"`
	// ManualRetries counts retry-callback requests (each restores the
	// retry budget; ids stay the same).
	ManualRetries  int             `json:"manual_retries,omitempty"`
	LastError      string          `json:"last_error,omitempty"`
	NextAttemptAt  int64           `json:"next_attempt_at,omitempty"`
	CreatedAt      int64           `json:"created_at"`
	UpdatedAt      int64           `json:"updated_at"`
	LastAttemptAt  int64           `json:"last_attempt_at,omitempty"`
	DeliveredAt    int64           `json:"delivered_at,omitempty"`
	Injection      json.RawMessage `json:"injection,omitempty"`
	Wake           json.RawMessage `json:"wake,omitempty"`
	RunObservation json.RawMessage `json:"run_observation,omitempty"`
	LeaseOwner     string          `json:"-"`
	LeaseToken     int64           `json:"-"`
	LeaseUntil     int64           `json:"-"`
}

// CallbackStore holds the callback outbox.
type CallbackStore interface {
	// GetCallback returns the callback or ErrNotFound.
	GetCallback(ctx context.Context, messageID string) (*Callback, error)
	// TurnCallbacks returns the Turn's callbacks, newest first.
	TurnCallbacks(ctx context.Context, turnID string, limit int) ([]*Callback, error)
	// DueCallbacks returns up to limit pending or failed callbacks whose
	// next attempt is due at now and whose attempt lease is free.
	DueCallbacks(ctx context.Context, now int64, limit int) ([]*Callback, error)
	// ClaimCallback takes the attempt lease (the LeaseCallback work
	// lease) of a due callback for owner until `until`; its fence grows
	// on every claim. A live lease of another owner, or a callback no
	// longer pending/failed, fails with ErrLeaseLost.
	ClaimCallback(ctx context.Context, messageID, owner string, now, until int64) (*Callback, error)
	// SaveCallback writes cb's delivery state if its lease (LeaseOwner,
	// LeaseToken) is still the stored one, else ErrLeaseLost. The stored
	// Message is never changed. LeaseUntil is written as given (0 frees
	// the lease).
	SaveCallback(ctx context.Context, cb *Callback) error
	// RearmCallback makes a failed or exhausted callback pending again,
	// due now, with a fresh retry budget (a manual retry); a delivered or
	// in-flight one is returned unchanged.
	RearmCallback(ctx context.Context, messageID string, now int64) (*Callback, error)
}

// TurnWrite is one atomic change of a Turn: compare-and-set on
// Turn.Version, optionally fenced by a monitor lease, with the ledger
// advance, events, completion claim and Also hook in the same transaction.
type TurnWrite struct {
	Turn     *Turn
	Fence    *Fence
	Dispatch *DispatchAdvance
	// NewDispatch starts a new ledger generation for the terminal (a
	// respond within the Turn); refused with ErrTerminalBusy while the
	// current entry blocks.
	NewDispatch *Dispatch
	Events      []TurnEvent
	Claim       *CompletionClaim
	// Also runs last inside the transaction (e.g. the callback outbox).
	Also func(ctx context.Context, tx TerminalTx) error
}

// TerminalStore holds the terminal-turn records. Implementations are safe for
// concurrent use; records are returned as fresh copies.
type TerminalStore interface {
	// CreateTermSession inserts s (Revision must be 0; it becomes 1),
	// enforcing the write rules and one Session per native thread
	// (ErrThreadBound).
	CreateTermSession(ctx context.Context, s *TermSession) error
	// GetTermSession returns the Session or ErrNotFound.
	GetTermSession(ctx context.Context, id string) (*TermSession, error)
	// SaveTermSession replaces the Session if its stored revision is
	// s.Revision (else ErrConflict), enforcing the write rules, and bumps
	// s.Revision.
	SaveTermSession(ctx context.Context, s *TermSession) error
	// SessionByThread returns the Session binding agent's native thread.
	SessionByThread(ctx context.Context, agent, thread string) (*TermSession, error)
	// SessionsByTerminal returns the Sessions whose binding names the
	// terminal key (bounded, newest first).
	SessionsByTerminal(ctx context.Context, terminalKey string) ([]*TermSession, error)

	// CreateTurn inserts tc.Turn and makes tc.Dispatch the terminal's
	// ledger entry, refusing with ErrTerminalBusy while the Session has a
	// send-blocking Turn or the current ledger entry blocks.
	CreateTurn(ctx context.Context, tc TurnCreate) error
	// GetTurn returns the Turn or ErrNotFound.
	GetTurn(ctx context.Context, id string) (*Turn, error)
	// WriteTurn applies w atomically (see TurnWrite) and bumps
	// w.Turn.Version. A write whose Turn names another Principal than the
	// stored one fails and changes nothing.
	WriteTurn(ctx context.Context, w TurnWrite) error
	// OpenTurns returns up to limit Turns that need a monitor.
	OpenTurns(ctx context.Context, limit int) ([]*Turn, error)
	// OpenTurnIDs returns the ids of up to limit Turns that need a
	// monitor, in OpenTurns's order, without reading the Turns: a rescan
	// that follows most of them already needs no more.
	OpenTurnIDs(ctx context.Context, limit int) ([]string, error)
	// Versions returns the stored version of each record of kind (a
	// Version* constant) among ids that exists, by id: a follower that
	// kept a record it read re-reads it only when its version moved.
	Versions(ctx context.Context, kind string, ids []string) (map[string]int64, error)
	// SessionTurns returns the Session's latest Turns, newest first.
	SessionTurns(ctx context.Context, sessionID string, limit int) ([]*Turn, error)
	// TurnEvents returns up to limit events with Seq > after.
	TurnEvents(ctx context.Context, turnID string, after int64, limit int) ([]TurnEvent, error)
	// GetCompletionClaim returns the Turn's claim or ErrNotFound.
	GetCompletionClaim(ctx context.Context, turnID string) (*CompletionClaim, error)

	// GetDispatch returns the terminal's ledger entry or ErrNotFound.
	GetDispatch(ctx context.Context, terminalKey string) (*Dispatch, error)

	// WorkLeases: a Turn's monitor holds its LeaseMonitor lease, and a
	// WriteTurn fenced by it is checked against that row.
	WorkLeases
}
