package task

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clawconnect/clawconnect/internal/settings"
)

// TestApplySettings checks that every task setting lands in its own field.
func TestApplySettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want func(o *Options)
	}{
		{"defaults", nil, func(o *Options) {}},
		{"set", map[string]string{
			"CLAWCONNECT_TIMEOUT_MS": "1500", "CLAWCONNECT_RECOVERY_TIMEOUT_MS": "2500", "CLAWCONNECT_CHECK_WAIT_MS": "3000",
			"CLAWCONNECT_CHECK_MAX_WAIT_MS": "4000", "CLAWCONNECT_RECONCILE_QUIET_MS": "500",
			"CLAWCONNECT_RECONCILE_SAMPLE_INTERVAL_MS": "100", "CLAWCONNECT_COSMETIC_POLL_DEBOUNCE_MS": "10",
			"CLAWCONNECT_LOG_ENTRY_TEXT_MAX": "100", "CLAWCONNECT_LEASE_MS": "2000", "CLAWCONNECT_RETENTION_MS": "60000",
			"CLAWCONNECT_RECOVERY_IDLE_MS": "700", "CLAWCONNECT_RECOVERY_INTERVAL_MS": "50",
			"CLAWCONNECT_LAZY_RECHECK_SPACING_MS": "800", "CLAWCONNECT_LAZY_RECHECK_INTERVAL_MS": "30",
		}, func(o *Options) {
			o.ChatTimeout, o.RecoveryTimeout, o.CheckWait, o.CheckMaxWait = 1500*time.Millisecond, 2500*time.Millisecond, 3*time.Second, 4*time.Second
			o.ReconcileQuiet, o.ReconcileSampleInterval, o.PollDebounce, o.LogEntryTextMax = 500*time.Millisecond, 100*time.Millisecond, 10*time.Millisecond, 100
			o.Lease, o.Retention = 2*time.Second, time.Minute
			o.RecoveryIdleTimeout, o.RecoveryInterval = 700*time.Millisecond, 50*time.Millisecond
			o.LazyRecheckSpacing, o.LazyRecheckInterval = 800*time.Millisecond, 30*time.Millisecond
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := DefaultOptions()
			tc.want(&want)
			got := DefaultOptions()
			v, err := settings.Load(func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			got.ApplySettings(v)
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Options{}, "Now", "NewID", "Logger")); diff != "" {
				t.Fatalf("options (-want +got):\n%s", diff)
			}
		})
	}
}
