package bridge

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/task"
)

// timings is the part of task.Options the environment sets.
type timings struct {
	Lease, Retention                        time.Duration
	ChatTimeout, RecoveryTimeout            time.Duration
	RecoveryIdleTimeout, RecoveryInterval   time.Duration
	CheckWait, CheckMaxWait                 time.Duration
	PollDebounce                            time.Duration
	ReconcileQuiet, ReconcileSampleInterval time.Duration
	LazyRecheckSpacing, LazyRecheckInterval time.Duration
	LogEntryTextMax                         int
}

func timingsOf(o task.Options) timings {
	return timings{
		Lease: o.Lease, Retention: o.Retention,
		ChatTimeout: o.ChatTimeout, RecoveryTimeout: o.RecoveryTimeout,
		RecoveryIdleTimeout: o.RecoveryIdleTimeout, RecoveryInterval: o.RecoveryInterval,
		CheckWait: o.CheckWait, CheckMaxWait: o.CheckMaxWait, PollDebounce: o.PollDebounce,
		ReconcileQuiet: o.ReconcileQuiet, ReconcileSampleInterval: o.ReconcileSampleInterval,
		LazyRecheckSpacing: o.LazyRecheckSpacing, LazyRecheckInterval: o.LazyRecheckInterval,
		LogEntryTextMax: o.LogEntryTextMax,
	}
}

// Every documented CLAWCONNECT_* timing reaches the options each task
// manager is built with; unset or bad values keep the defaults.
func TestTaskOptionsFromEnv(t *testing.T) {
	d := timingsOf(task.DefaultOptions())
	set := map[string]string{
		"CLAWCONNECT_LEASE_MS":                     "1500",
		"CLAWCONNECT_RETENTION_MS":                 "60000",
		"CLAWCONNECT_TIMEOUT_MS":                   "7000",
		"CLAWCONNECT_RECOVERY_TIMEOUT_MS":          "8000",
		"CLAWCONNECT_RECOVERY_IDLE_MS":             "900",
		"CLAWCONNECT_RECOVERY_INTERVAL_MS":         "50",
		"CLAWCONNECT_CHECK_WAIT_MS":                "2000",
		"CLAWCONNECT_CHECK_MAX_WAIT_MS":            "3000",
		"CLAWCONNECT_COSMETIC_POLL_DEBOUNCE_MS":    "10",
		"CLAWCONNECT_RECONCILE_QUIET_MS":           "400",
		"CLAWCONNECT_RECONCILE_SAMPLE_INTERVAL_MS": "100",
		"CLAWCONNECT_LAZY_RECHECK_SPACING_MS":      "250",
		"CLAWCONNECT_LAZY_RECHECK_INTERVAL_MS":     "20",
		"CLAWCONNECT_LOG_ENTRY_TEXT_MAX":           "120",
	}
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	tests := []struct {
		name string
		env  map[string]string
		want timings
	}{
		{"unset", nil, d},
		{"set", set, timings{
			Lease: ms(1500), Retention: ms(60000), ChatTimeout: ms(7000), RecoveryTimeout: ms(8000),
			RecoveryIdleTimeout: ms(900), RecoveryInterval: ms(50), CheckWait: ms(2000), CheckMaxWait: ms(3000),
			PollDebounce: ms(10), ReconcileQuiet: ms(400), ReconcileSampleInterval: ms(100),
			LazyRecheckSpacing: ms(250), LazyRecheckInterval: ms(20), LogEntryTextMax: 120,
		}},
		{"invalid", map[string]string{"CLAWCONNECT_LEASE_MS": "soon", "CLAWCONNECT_RECOVERY_INTERVAL_MS": "-5", "CLAWCONNECT_RETENTION_MS": "0"}, d},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := timingsOf(taskOptions(func(k string) string { return tt.env[k] }))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("task options (-want +got):\n%s", diff)
			}
		})
	}
}

// AGENT_SESSION_CALL_TIMEOUT_MS reaches the attachment book; a bad value is
// logged at warn and the default used.
func TestBookOptionsCallTimeout(t *testing.T) {
	tests := []struct {
		name, value string
		want        time.Duration
		warn        bool
	}{
		{"unset", "", agentsession.DefaultCallTimeout, false},
		{"set", "2500", 2500 * time.Millisecond, false},
		{"not a number", "fast", agentsession.DefaultCallTimeout, true},
		{"zero", "0", agentsession.DefaultCallTimeout, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
			rt := agentsession.NewRegistry()
			got := bookOptions(func(k string) string {
				if k == agentsession.CallTimeoutEnv {
					return tt.value
				}
				return ""
			}, rt, logger)
			if got.CallTimeout != tt.want || got.Registry != rt {
				t.Errorf("bookOptions = timeout %v registry %p, want %v %p", got.CallTimeout, got.Registry, tt.want, rt)
			}
			if warned := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), agentsession.CallTimeoutEnv); warned != tt.warn {
				t.Errorf("warned = %v, want %v; log %q", warned, tt.warn, buf.String())
			}
		})
	}
}

// TestMapErrHidesStoreDetail: a store failure reaches a tool caller as "the
// task store is unavailable; retry", without the database's user, name,
// host or port (they stay in the server log).
func TestMapErrHidesStoreDetail(t *testing.T) {
	t.Parallel()
	err := mapErr("check task", &task.StoreUnavailableError{Op: "check task"})
	if !errors.Is(err, task.ErrStoreUnavailable) || err.Error() != task.ErrStoreUnavailable.Error() {
		t.Fatalf("mapErr = %q", err)
	}
	for _, secret := range []string{"user=", "127.0.0.1", "35739"} {
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("mapErr shows %q: %q", secret, err)
		}
	}
}
