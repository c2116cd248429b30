package task

import (
	"log/slog"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/internal/store"
)

// Input limits (documented; a violation is a clear error and writes
// nothing).
const (
	MaxTaskBytes       = 256 << 10 // run_task.task
	MaxContextBytes    = 1 << 20   // run_task.context
	MaxPayloadBytes    = 8 << 20   // run_task.payload
	MaxSessionKeyBytes = 512       // the gateway's own limit
	MaxSenderNameBytes = 256
	MaxIDBytes         = 128 // task ids
)

// Options configures a Manager. Zero durations mean the defaults (see
// DefaultOptions); internal/cli fills the ones an operator may set from the
// settings registry (ApplySettings).
type Options struct {
	// Agent is the configured agent id this manager serves (its scope);
	// required.
	Agent string
	// OpenClawAgentID names the agent in new thread keys; "" means "main".
	OpenClawAgentID string
	// Store is the durable state; required.
	Store store.Store
	// Gateway runs tasks; required.
	Gateway Gateway
	// Book is the attachment book (open it over AttachmentStore(Store,
	// Agent)); nil means no agent-session seam: directives are stripped and
	// ignored, and tier 3 never answers.
	Book *agentsession.Book
	// PayloadDir receives run_task payloads (<dir>/<jobId>.payload, 0600);
	// "" rejects any payload ("payload could not be stored").
	PayloadDir string
	// Owner identifies this process for leases; "" means a new unique
	// host/pid/random id (owner.Self). Managers of one process should share
	// it. The manager registers it in the store's process registry, with
	// what proves the process dead to another one on the same host.
	Owner string
	// Role names the command in the process registry ("serve", "mcp",
	// "run"); "" means "task".
	Role string
	// Lease is the ownership lease of a running task (CLAWCONNECT_LEASE_MS).
	Lease time.Duration
	// NoClaim makes the manager follow only the tasks it submits itself:
	// it claims no other task, at Start or later. One-shot commands (run)
	// set it, since they must not take leases they will not keep.
	NoClaim bool
	// RetryMin and RetryMax bound the backoff (with jitter) between
	// attempts to write an outcome or a log entry the store refused for a
	// transient reason (default 100 ms and 5 s). A follower keeps trying
	// until the write lands or its lease is lost.
	RetryMin, RetryMax time.Duration

	// ChatTimeout is the live wait window (CLAWCONNECT_TIMEOUT_MS).
	ChatTimeout time.Duration
	// RecoveryTimeout is the hard cap of late recovery
	// (CLAWCONNECT_RECOVERY_TIMEOUT_MS).
	RecoveryTimeout time.Duration
	// RecoveryIdleTimeout ends late recovery when the transcript does not
	// change (CLAWCONNECT_RECOVERY_IDLE_MS).
	RecoveryIdleTimeout time.Duration
	// RecoveryInterval is the late-recovery transcript poll spacing
	// (CLAWCONNECT_RECOVERY_INTERVAL_MS).
	RecoveryInterval time.Duration
	// CheckWait is the default check_task wait (CLAWCONNECT_CHECK_WAIT_MS);
	// CheckMaxWait its ceiling (CLAWCONNECT_CHECK_MAX_WAIT_MS); the floor
	// is 1 s.
	CheckWait, CheckMaxWait time.Duration
	// PollDebounce is how long tool-only chatter must persist before a poll
	// returns (CLAWCONNECT_COSMETIC_POLL_DEBOUNCE_MS).
	PollDebounce time.Duration
	// ReconcileQuiet is the silence before the quiet watchdog reads the
	// transcript (CLAWCONNECT_RECONCILE_QUIET_MS).
	ReconcileQuiet time.Duration
	// ReconcileSampleInterval separates the watchdog's two samples
	// (CLAWCONNECT_RECONCILE_SAMPLE_INTERVAL_MS).
	ReconcileSampleInterval time.Duration
	// LazyRecheckSpacing is the minimum gap between two lazy re-checks of
	// one task (CLAWCONNECT_LAZY_RECHECK_SPACING_MS); LazyRecheckInterval
	// the gap between its reads (CLAWCONNECT_LAZY_RECHECK_INTERVAL_MS).
	LazyRecheckSpacing, LazyRecheckInterval time.Duration
	// ForeignPollInterval is how often a check_task waiting on a task owned
	// by another replica re-reads the store even without a change
	// announcement (store.ChangeFeed), in case one was lost (2 s).
	ForeignPollInterval time.Duration
	// LogEntryTextMax caps each log entry's text
	// (CLAWCONNECT_LOG_ENTRY_TEXT_MAX).
	LogEntryTextMax int
	// Retention keeps terminal tasks this long (CLAWCONNECT_RETENTION_MS);
	// negative disables the sweep. SweepInterval is the sweep period (1 h).
	Retention, SweepInterval time.Duration
	// PayloadTTL is how long payload files are kept (24 h).
	PayloadTTL time.Duration
	// RunSaveDelay is how long the run id of an accepted task may wait in
	// memory for the task's next write to carry it before it is written on
	// its own (1 s); see Manager.holdRunLocked.
	RunSaveDelay time.Duration

	// Logger receives operational logs; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NewID mints task ids; nil means random UUIDv4 strings.
	NewID func() string
}

// DefaultOptions returns the defaults of every timing: those an operator
// may set come from the settings registry (internal/settings), the others
// are fixed here.
func DefaultOptions() Options {
	o := Options{
		OpenClawAgentID:     "main",
		ForeignPollInterval: 2 * time.Second,
		SweepInterval:       time.Hour,
		PayloadTTL:          24 * time.Hour,
		RunSaveDelay:        time.Second,
		RetryMin:            100 * time.Millisecond,
		RetryMax:            5 * time.Second,
	}
	o.ApplySettings(settings.Defaults())
	return o
}

// ApplySettings copies into o every timing and limit of the task service
// an operator may set (the CLAWCONNECT_*_MS settings and
// CLAWCONNECT_LOG_ENTRY_TEXT_MAX).
func (o *Options) ApplySettings(v settings.Values) {
	o.ChatTimeout = v.ChatTimeout
	o.RecoveryTimeout = v.RecoveryTimeout
	o.RecoveryIdleTimeout = v.RecoveryIdleTimeout
	o.RecoveryInterval = v.RecoveryInterval
	o.CheckWait = v.CheckWait
	o.CheckMaxWait = v.CheckMaxWait
	o.PollDebounce = v.PollDebounce
	o.ReconcileQuiet = v.ReconcileQuiet
	o.ReconcileSampleInterval = v.ReconcileSampleInterval
	o.LazyRecheckSpacing = v.LazyRecheckSpacing
	o.LazyRecheckInterval = v.LazyRecheckInterval
	o.Lease = v.Lease
	o.Retention = v.Retention
	o.LogEntryTextMax = v.LogEntryTextMax
}

// withDefaults fills zero fields.
func (o Options) withDefaults() Options {
	d := DefaultOptions()
	str := func(v *string, def string) {
		if *v == "" {
			*v = def
		}
	}
	dur := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	str(&o.OpenClawAgentID, d.OpenClawAgentID)
	str(&o.Role, "task")
	dur(&o.Lease, d.Lease)
	dur(&o.RetryMin, d.RetryMin)
	dur(&o.RetryMax, d.RetryMax)
	dur(&o.ChatTimeout, d.ChatTimeout)
	dur(&o.RecoveryTimeout, d.RecoveryTimeout)
	dur(&o.RecoveryIdleTimeout, d.RecoveryIdleTimeout)
	dur(&o.RecoveryInterval, d.RecoveryInterval)
	dur(&o.CheckWait, d.CheckWait)
	dur(&o.CheckMaxWait, d.CheckMaxWait)
	dur(&o.PollDebounce, d.PollDebounce)
	dur(&o.ReconcileQuiet, d.ReconcileQuiet)
	dur(&o.ReconcileSampleInterval, d.ReconcileSampleInterval)
	dur(&o.LazyRecheckSpacing, d.LazyRecheckSpacing)
	dur(&o.LazyRecheckInterval, d.LazyRecheckInterval)
	dur(&o.ForeignPollInterval, d.ForeignPollInterval)
	dur(&o.SweepInterval, d.SweepInterval)
	dur(&o.PayloadTTL, d.PayloadTTL)
	dur(&o.RunSaveDelay, d.RunSaveDelay)
	if o.Retention == 0 {
		o.Retention = d.Retention
	}
	if o.LogEntryTextMax <= 0 {
		o.LogEntryTextMax = d.LogEntryTextMax
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewID == nil {
		o.NewID = newUUID
	}
	return o
}
