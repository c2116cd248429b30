package config

import (
	"time"

	"github.com/clawconnect/clawconnect/internal/settings"
)

// Timeouts holds the tunable windows of the task bridge's MCP tools (the
// settings CLAWCONNECT_TIMEOUT_MS ... CLAWCONNECT_LOG_ENTRY_TEXT_MAX; see
// internal/settings for their defaults and rules).
type Timeouts struct {
	Chat                    time.Duration // CLAWCONNECT_TIMEOUT_MS
	Recovery                time.Duration // CLAWCONNECT_RECOVERY_TIMEOUT_MS
	CheckWait               time.Duration // CLAWCONNECT_CHECK_WAIT_MS
	CheckMaxWait            time.Duration // CLAWCONNECT_CHECK_MAX_WAIT_MS
	CosmeticPollDebounce    time.Duration // CLAWCONNECT_COSMETIC_POLL_DEBOUNCE_MS
	ReconcileQuiet          time.Duration // CLAWCONNECT_RECONCILE_QUIET_MS
	ReconcileSampleInterval time.Duration // CLAWCONNECT_RECONCILE_SAMPLE_INTERVAL_MS
	LogEntryTextMax         int           // CLAWCONNECT_LOG_ENTRY_TEXT_MAX, characters
}

// DefaultTimeouts returns the defaults of the settings registry.
func DefaultTimeouts() Timeouts { return TimeoutsFrom(settings.Defaults()) }

// TimeoutsFrom takes the timeouts from the effective settings.
func TimeoutsFrom(v settings.Values) Timeouts {
	return Timeouts{
		Chat:                    v.ChatTimeout,
		Recovery:                v.RecoveryTimeout,
		CheckWait:               v.CheckWait,
		CheckMaxWait:            v.CheckMaxWait,
		CosmeticPollDebounce:    v.PollDebounce,
		ReconcileQuiet:          v.ReconcileQuiet,
		ReconcileSampleInterval: v.ReconcileSampleInterval,
		LogEntryTextMax:         v.LogEntryTextMax,
	}
}
