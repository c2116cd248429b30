package config

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Timeouts holds the tunable windows of the task bridge. Every field comes
// from an environment variable in milliseconds; a value that is not a finite
// number greater than zero falls back to the default.
type Timeouts struct {
	Chat                    time.Duration // CLAWCONNECT_TIMEOUT_MS, default 30m
	Recovery                time.Duration // CLAWCONNECT_RECOVERY_TIMEOUT_MS, default 90m
	CheckWait               time.Duration // CLAWCONNECT_CHECK_WAIT_MS, default 45s
	CheckMaxWait            time.Duration // CLAWCONNECT_CHECK_MAX_WAIT_MS, default 120s
	CosmeticPollDebounce    time.Duration // CLAWCONNECT_COSMETIC_POLL_DEBOUNCE_MS, default 400ms
	ReconcileQuiet          time.Duration // CLAWCONNECT_RECONCILE_QUIET_MS, default 120s
	ReconcileSampleInterval time.Duration // CLAWCONNECT_RECONCILE_SAMPLE_INTERVAL_MS, default 15s
	StreamCloseGrace        time.Duration // CLAWCONNECT_STREAM_CLOSE_GRACE_MS, default 15s
	LogEntryTextMax         int           // CLAWCONNECT_LOG_ENTRY_TEXT_MAX, default 8000 characters
}

// MinCheckWait is the fixed floor of a check_task wait.
const MinCheckWait = time.Second

// DefaultTimeouts returns the reference defaults.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		Chat:                    30 * time.Minute,
		Recovery:                90 * time.Minute,
		CheckWait:               45 * time.Second,
		CheckMaxWait:            120 * time.Second,
		CosmeticPollDebounce:    400 * time.Millisecond,
		ReconcileQuiet:          120 * time.Second,
		ReconcileSampleInterval: 15 * time.Second,
		StreamCloseGrace:        15 * time.Second,
		LogEntryTextMax:         8000,
	}
}

// Millis reads the variable name as a positive number of milliseconds; a
// missing, non-numeric, non-positive or overflowing value gives def.
func Millis(getenv func(string) string, name string, def time.Duration) time.Duration {
	v, ok := PositiveNumber(orEmpty(getenv)(name))
	if !ok || v*float64(time.Millisecond) > math.MaxInt64 {
		return def
	}
	return time.Duration(v * float64(time.Millisecond))
}

// LoadTimeouts reads the CLAWCONNECT_*_MS variables; see Timeouts.
func LoadTimeouts(getenv func(string) string) Timeouts {
	getenv = orEmpty(getenv)
	t := DefaultTimeouts()
	ms := func(name string, def time.Duration) time.Duration { return Millis(getenv, name, def) }
	t.Chat = ms("CLAWCONNECT_TIMEOUT_MS", t.Chat)
	t.Recovery = ms("CLAWCONNECT_RECOVERY_TIMEOUT_MS", t.Recovery)
	t.CheckWait = ms("CLAWCONNECT_CHECK_WAIT_MS", t.CheckWait)
	t.CheckMaxWait = ms("CLAWCONNECT_CHECK_MAX_WAIT_MS", t.CheckMaxWait)
	t.CosmeticPollDebounce = ms("CLAWCONNECT_COSMETIC_POLL_DEBOUNCE_MS", t.CosmeticPollDebounce)
	t.ReconcileQuiet = ms("CLAWCONNECT_RECONCILE_QUIET_MS", t.ReconcileQuiet)
	t.ReconcileSampleInterval = ms("CLAWCONNECT_RECONCILE_SAMPLE_INTERVAL_MS", t.ReconcileSampleInterval)
	t.StreamCloseGrace = ms("CLAWCONNECT_STREAM_CLOSE_GRACE_MS", t.StreamCloseGrace)
	if v, ok := PositiveNumber(getenv("CLAWCONNECT_LOG_ENTRY_TEXT_MAX")); ok && v < math.MaxInt32 {
		t.LogEntryTextMax = int(v)
	}
	return t
}

// ClampCheckWait applies the check_task wait rule: a missing (nil) or
// non-finite value gives CheckWait, then the result is clamped to
// [MinCheckWait, CheckMaxWait].
func (t Timeouts) ClampCheckWait(waitMs *float64) time.Duration {
	d := t.CheckWait
	if waitMs != nil && !math.IsNaN(*waitMs) && !math.IsInf(*waitMs, 0) {
		switch {
		case *waitMs <= 0:
			d = 0
		case *waitMs*float64(time.Millisecond) >= float64(t.CheckMaxWait):
			d = t.CheckMaxWait
		default:
			d = time.Duration(*waitMs * float64(time.Millisecond))
		}
	}
	return max(MinCheckWait, min(d, max(t.CheckMaxWait, MinCheckWait)))
}

// PositiveNumber parses s as a finite number greater than zero, the rule of
// every numeric environment variable.
func PositiveNumber(s string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, false
	}
	return v, true
}

// BuildSHA returns CLAWCONNECT_BUILD_SHA, or "unknown".
func BuildSHA(getenv func(string) string) string {
	if v := strings.TrimSpace(orEmpty(getenv)("CLAWCONNECT_BUILD_SHA")); v != "" {
		return v
	}
	return "unknown"
}
