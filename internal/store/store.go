// Package store defines the durable state of the task bridge — tasks in every
// state with their logs and prompts, sessions, agent-session attachments with
// their lineage, and the leases that give one replica ownership of a running
// task — behind one interface with two implementations (sqlite, postgres)
// pinned by one conformance suite (storetest).
//
// Every method is a keyed lookup or a bounded, indexed page: nothing on a
// request path scans all tasks or sessions. Times are Unix milliseconds (UTC).
package store

import (
	"context"
	"errors"

	"github.com/clawconnect/clawconnect/taskapi"
	"github.com/clawconnect/clawconnect/termapi"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrNotFound reports that the keyed record does not exist (in the
	// requested agent's scope). It also matches the public APIs' misses,
	// taskapi.ErrNotFound and termapi.ErrNotFound, with errors.Is, so a
	// miss passed on reads as the public API's without a second sentinel.
	ErrNotFound error = notFound{}
	// ErrConflict reports a lost compare-and-set: the record changed since it
	// was read. Re-read and retry, or give up.
	ErrConflict = errors.New("conflict: record changed concurrently")
	// ErrExists reports that a record with that key already exists.
	ErrExists = errors.New("already exists")
	// ErrLeaseLost reports that the caller no longer owns the task's lease:
	// another process took it over (the fencing token moved on).
	ErrLeaseLost = errors.New("lease lost")
	// ErrBusy reports that a write waited its bound for the database's
	// write lock (another process held it) and gave up; nothing was
	// written. Retry later.
	ErrBusy = errors.New("store busy")
	// ErrIncompatible reports that the database holds data this build must
	// not touch (foreign, corrupt, or written by a newer schema). The store
	// refuses to start rather than overwrite evidence.
	ErrIncompatible = errors.New("incompatible database")
)

// notFound is ErrNotFound's type: one value, equal to itself, that is
// also each public API's miss.
type notFound struct{}

func (notFound) Error() string { return "not found" }

// Is matches the public APIs' ErrNotFound.
func (notFound) Is(target error) bool {
	return target == taskapi.ErrNotFound || target == termapi.ErrNotFound
}

// SessionBusyError refuses a second task on a session whose latest task is
// still running: CreateTask returns it, and the task manager passes it on
// to the model. It matches ErrSessionBusy with errors.Is.
type SessionBusyError struct {
	// JobID is the running task that holds the session.
	JobID string
}

// ErrSessionBusy is the sentinel matched by *SessionBusyError.
var ErrSessionBusy = errors.New("session busy")

// Error is the exact text a model is shown: the running task and what to
// do instead.
func (e *SessionBusyError) Error() string {
	return "A task is already running on this session (jobId " + e.JobID + "). Poll check_task until it " +
		"finishes before sending another message to this session, or omit sessionKey to start a fresh thread."
}

// Is reports whether target is ErrSessionBusy.
func (e *SessionBusyError) Is(target error) bool { return target == ErrSessionBusy }

// Status is a task's outcome state.
type Status string

// The task statuses of the reference's JobStatus.
const (
	StatusRunning            Status = "running"
	StatusCompleted          Status = "completed"
	StatusCompletedNoSummary Status = "completed_no_summary"
	StatusError              Status = "error"
	StatusCancelled          Status = "cancelled"
)

// Statuses returns every task status, running first.
func Statuses() []Status {
	return []Status{StatusRunning, StatusCompleted, StatusCompletedNoSummary, StatusError, StatusCancelled}
}

// Valid reports whether s is one of the five statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusRunning, StatusCompleted, StatusCompletedNoSummary, StatusError, StatusCancelled:
		return true
	}
	return false
}

// Terminal reports whether s is not running.
func (s Status) Terminal() bool { return s != StatusRunning }

// Task is one execution (jobId == taskId). Fields other than the keys are
// written by the task manager's single outcome writer through UpdateTask;
// PollCount/LastPollAt by TouchPoll; LogCount by AppendLogs; Owner,
// LeaseUntil and Fence by the lease methods.
type Task struct {
	ID         string         `json:"id"`
	Agent      string         `json:"agent"`
	SessionKey string         `json:"sessionKey"`
	Status     Status         `json:"status"`
	Prompt     taskapi.Prompt `json:"prompt"`
	// Message is the exact text sent to the agent; a restart re-sends it
	// under the same idempotency key when the run id was never recorded.
	Message     string `json:"message"`
	StartedAt   int64  `json:"startedAt"`
	LastEventAt int64  `json:"lastEventAt"`
	EndedAt     int64  `json:"endedAt,omitempty"`

	Summary        string             `json:"summary,omitempty"`
	Error          string             `json:"error,omitempty"`
	ErrorInfo      *taskapi.ErrorInfo `json:"errorInfo,omitempty"`
	TerminalReason string             `json:"terminalReason,omitempty"`
	ResultSource   string             `json:"resultSource,omitempty"`
	// Provisional marks an outcome (reconciled or tier-3) that a later real
	// final or parent transcript read may replace.
	Provisional    bool  `json:"provisional,omitempty"`
	OutcomeVersion int64 `json:"outcomeVersion"`

	ParentRunID      string `json:"parentRunId,omitempty"`
	LastSeenSequence int64  `json:"lastSeenSequence,omitempty"`
	PayloadPath      string `json:"payloadPath,omitempty"`
	Upstream         string `json:"upstream"`
	Transcript       string `json:"transcript"`
	Cancellation     string `json:"cancellation"`
	// NewThread records that the submit minted the session key.
	NewThread bool `json:"newThread,omitempty"`

	Artifacts taskapi.Artifacts `json:"artifacts"`
	Recovery  *taskapi.Recovery `json:"recovery,omitempty"`
	Liveness  *taskapi.Liveness `json:"liveness,omitempty"`

	// Principal is who submitted the task: the HTTP credential's name
	// ("user:<name>" or "legacy"), or "" for a single-user caller.
	Principal string `json:"principal,omitempty"`

	LogCount   int64  `json:"logCount"`
	PollCount  int64  `json:"pollCount"`
	LastPollAt int64  `json:"lastPollAt"`
	Owner      string `json:"owner,omitempty"`
	LeaseUntil int64  `json:"leaseUntil,omitempty"`
	// Fence is the fencing token of the task's lease: CreateTask sets it
	// to 1 and every ClaimTasks that takes the task raises it. UpdateTask
	// and AppendLogs refuse (ErrLeaseLost) a write whose Fence is not the
	// stored one, so a process that lost the task can never change it.
	Fence int64 `json:"fence,omitempty"`
	// Version is the row version for compare-and-set; UpdateTask bumps it.
	Version int64 `json:"version"`
}

// LogEntry is one line of a task's log. Seq is 1-based and dense per task.
type LogEntry struct {
	Seq     int64  `json:"seq"`
	TS      int64  `json:"ts"`
	Type    string `json:"type"`
	Text    string `json:"text"`
	IsError bool   `json:"isError,omitempty"`
}

// Session is one conversation (agent, session key) and its latest task.
type Session struct {
	Agent      string
	SessionKey string
	LastJobID  string
	CreatedAt  int64
	UpdatedAt  int64
	// Principal is who started the session (Task.Principal of its first
	// task); it never changes.
	Principal string
}

// SessionTask is a session joined with its latest task, for list pages.
type SessionTask struct {
	Session Session
	// Task is the latest task; nil if it was swept by retention.
	Task *Task
}

// Page bounds a list read. Limit is clamped by the store to [1, MaxPage];
// Before is an opaque cursor from a previous page ("" = newest).
type Page struct {
	Limit  int
	Before string
	// Principal, when set, keeps only the sessions that principal started
	// (ListSessions), so a credential's page is full of its own sessions
	// however many others there are; nil keeps every principal's.
	Principal *string
}

// MaxPage is the largest page any list method returns.
const MaxPage = 500

// AttachmentRecord is one agent-session attachment record, stored opaquely
// (Data is the JSON the agentsession package owns). Records are never
// deleted: the lineage is every record of the session, in Seq order.
type AttachmentRecord struct {
	ID string
	// Seq orders the lineage (1 = first saved for the session). The store
	// assigns it on a record's first save; it is ignored on writes.
	Seq              int64
	ObservationToken int64
	Data             []byte
}

// AttachmentState is a session's attachment book: the current record (if
// any) and every record ever attached.
type AttachmentState struct {
	Agent      string
	SessionKey string
	// CurrentID is "" when nothing is attached.
	CurrentID string
	Records   []AttachmentRecord
	// Version is the compare-and-set version of the state; 0 = never saved.
	Version int64
}

// AttachmentWrite is one atomic change of a session's attachment state.
type AttachmentWrite struct {
	Agent      string
	SessionKey string
	// ExpectVersion is the version the change was computed from; a
	// mismatch fails with ErrConflict.
	ExpectVersion int64
	// CurrentID is the new current record id ("" for none). An id naming
	// no record reads back as "no current attachment".
	CurrentID string
	// Records are upserted by id (new ones get the next Seq).
	Records []AttachmentRecord
}

// Claim asks for running tasks whose lease is free or expired.
type Claim struct {
	Agent string
	Owner string
	Now   int64
	// Until is the new lease expiry of claimed tasks.
	Until int64
	Limit int
	// IncludeOwn also claims tasks c.Owner already holds whose lease ends
	// before Until (a restarted process taking back its own tasks). A
	// repeated claim with the same Until returns each task once.
	IncludeOwn bool
}

// SweepResult counts what a retention sweep deleted.
type SweepResult struct {
	Tasks    int
	Logs     int
	Sessions int
}

// ChangeFeed is the part of a Store that wakes a reader in one process
// when another process has changed a task, so a check_task waiting on a task that another process follows returns when
// the task ends rather than at its next poll.
type ChangeFeed interface {
	// WatchTask returns a channel that receives a value after each change
	// of task id that a waiter acts on (an outcome written by UpdateTask,
	// log entries appended) by any process, and whenever changes may have
	// been missed (changes not yet received coalesce into one), and a func
	// that ends the watch. A nil channel means the store cannot tell.
	WatchTask(id string) (changed <-chan struct{}, stop func())
}

// NewTaskFeed is the part of a Store whose change feed also announces new
// tasks, so a list of tasks (the dashboard's) learns of one at once
// instead of at its next re-read.
type NewTaskFeed interface {
	// WatchNewTasks returns a channel that receives a value after each
	// task created by any process (CreateTask; creations not yet received
	// coalesce into one), and whenever creations may have been missed, and
	// a func that ends the watch. A nil channel means the store cannot
	// tell.
	WatchNewTasks() (created <-chan struct{}, stop func())
}

// TerminalWorkFeed is the part of a Store whose change feed also tells the
// monitor hosts of every process that terminal work needs following (a
// Turn sent, renewed or answered, a watch set by a command that follows
// nothing itself), so one of them takes it at once instead of at its next
// rescan of the store.
type TerminalWorkFeed interface {
	// AnnounceTerminalWork tells the watchers of terminal work, in this
	// process and others, to look for work no host follows. A lost
	// announcement only delays the work to a host's next rescan.
	AnnounceTerminalWork(ctx context.Context)
	// WatchTerminalWork returns a channel that receives a value after each
	// announcement by any process (announcements not yet received coalesce
	// into one), and whenever some may have been missed, and a func that
	// ends the watch. A nil channel means the store cannot tell.
	WatchTerminalWork() (announced <-chan struct{}, stop func())
}

// LogUpdater is the part of a Store that writes a task's log entries and
// its record in one transaction, so an outcome and the entries that
// precede it cost one write, and a reader never sees one without the other.
type LogUpdater interface {
	// UpdateTaskWithLogs is AppendLogs(t.ID, t.Fence, entries) followed by
	// UpdateTask(t), atomically: on any error neither is written (the
	// errors are theirs: ErrLeaseLost, ErrConflict, ErrNotFound).
	UpdateTaskWithLogs(ctx context.Context, t *Task, entries []LogEntry) error
}

// Store is the durable state of the product: the task bridge's records
// and, through the interfaces it embeds, the terminal turns'. One
// implementation (sqlstore, over SQLite or PostgreSQL) has every part, so
// callers never ask whether a store can do something. Implementations are
// safe for concurrent use. Records are returned as fresh copies.
type Store interface {
	// CreateTask inserts a new running task and makes it the latest of its
	// session, atomically refusing with *SessionBusyError when the session's
	// latest task is still running, and ErrExists for a duplicate id.
	CreateTask(ctx context.Context, t *Task) error
	// GetTask returns the task with id in agent's scope, or ErrNotFound.
	GetTask(ctx context.Context, agent, id string) (*Task, error)
	// UpdateTask writes the manager-owned fields of t if t.Version and
	// t.Fence match the stored ones, and increments t.Version. A changed
	// fence (the task was claimed since t was read) is ErrLeaseLost, any
	// other change ErrConflict.
	UpdateTask(ctx context.Context, t *Task) error
	// TouchPoll increments the task's poll count, sets LastPollAt, and
	// returns the new count.
	TouchPoll(ctx context.Context, agent, id string, at int64) (int64, error)

	// AppendLogs stores entries (their Seq must continue the task's log
	// densely, else ErrConflict) and advances the task's LogCount, if fence
	// is the task's fencing token (else ErrLeaseLost).
	AppendLogs(ctx context.Context, taskID string, fence int64, entries []LogEntry) error
	// Logs returns up to limit entries with Seq > after, oldest first.
	Logs(ctx context.Context, taskID string, after int64, limit int) ([]LogEntry, error)
	// TailLogs returns the last n entries, oldest first.
	TailLogs(ctx context.Context, taskID string, n int) ([]LogEntry, error)

	// GetSession returns the session or ErrNotFound.
	GetSession(ctx context.Context, agent, sessionKey string) (*Session, error)
	// ListSessions returns the most recently updated sessions of agent, each
	// with its latest task, and the cursor of the next page ("" at the end).
	ListSessions(ctx context.Context, agent string, p Page) ([]SessionTask, string, error)
	// SessionTasks returns the session's tasks, newest first, and the next
	// page's cursor.
	SessionTasks(ctx context.Context, agent, sessionKey string, p Page) ([]*Task, string, error)

	// ClaimTasks leases to c.Owner (until c.Until) up to c.Limit running
	// tasks of c.Agent whose lease expired before c.Now (unowned tasks have
	// expired leases), plus, with c.IncludeOwn, those c.Owner holds with a
	// lease ending before c.Until; it raises each one's Fence and returns
	// them.
	ClaimTasks(ctx context.Context, c Claim) ([]*Task, error)
	// RenewLeases extends to until the leases owner holds on the running
	// tasks ids names (the tasks the caller follows, nothing else), and
	// returns the ids whose lease owner no longer holds: taken over,
	// finished or gone.
	RenewLeases(ctx context.Context, owner string, until int64, ids []string) (lost []string, err error)
	// ReleaseLeases ends now the leases owner holds on the running tasks
	// ids names (all of owner's when ids is nil, Turn monitor leases and
	// callback delivery attempt leases included), so that any process may
	// claim them at once; it returns how
	// many it released. A process calls
	// it for the tasks it stops following, and for every task of an owner
	// it has proven dead.
	ReleaseLeases(ctx context.Context, owner string, ids []string) (int, error)
	// CheckLease returns nil if owner holds task id's lease at now, else
	// ErrLeaseLost (or ErrNotFound).
	CheckLease(ctx context.Context, id, owner string, now int64) error

	// LoadAttachments returns the session's attachment state; a session that
	// never attached yields an empty state with Version 0.
	LoadAttachments(ctx context.Context, agent, sessionKey string) (*AttachmentState, error)
	// SaveAttachments applies w atomically if w.ExpectVersion matches the
	// stored version (else ErrConflict) and returns the new version.
	// Records are upserted by id; none is ever deleted.
	SaveAttachments(ctx context.Context, w AttachmentWrite) (int64, error)
	// MaxObservationToken returns the highest observation token of any
	// stored attachment record (0 if none).
	MaxObservationToken(ctx context.Context) (int64, error)

	// Sweep deletes up to limit terminal tasks that ended before cutoff,
	// their logs, and sessions whose latest task was deleted.
	Sweep(ctx context.Context, cutoff int64, limit int) (SweepResult, error)

	// The store's parts: the change feeds, the one-transaction outcome
	// write, the terminal-turn records with their callback outbox,
	// transitions, watches and host directory, and the process table.
	ChangeFeed
	NewTaskFeed
	TerminalWorkFeed
	LogUpdater
	TerminalStore
	CallbackStore
	TransitionStore
	WatchStore
	TerminalHosts
	ProcessRegistry

	// Close releases the database. It is idempotent.
	Close() error
}

// ClampPage returns p's limit clamped to [1, MaxPage], defaulting to def.
func ClampPage(limit, def int) int {
	if limit <= 0 {
		limit = def
	}
	return min(max(limit, 1), MaxPage)
}
