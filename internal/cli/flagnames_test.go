package cli

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/termapi"
)

// TestRenamedFlagsKeepTheirOldSpelling: every renamed flag still parses
// under its old name, sets the same option as the new one, and is left out
// of help.
func TestRenamedFlagsKeepTheirOldSpelling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd      string
		old, new string
		value    string
	}{
		{"watch", "origin", "origin-session", "agent:main:main"},
		{"watch", "timeout", "hard-timeout", "2h0m0s"},
	} {
		t.Run(tc.cmd+" --"+tc.old, func(t *testing.T) {
			t.Parallel()
			cmd := terminalWatchCmd(Env{})
			if err := cmd.Flags().Parse([]string{"--" + tc.old, tc.value}); err != nil {
				t.Fatalf("--%s no longer parses: %v", tc.old, err)
			}
			f := cmd.Flags().Lookup(tc.new)
			if f == nil || f.Value.String() != tc.value || !f.Changed {
				t.Fatalf("--%s %s did not set --%s (%v)", tc.old, tc.value, tc.new, f)
			}
			if usage := cmd.Flags().FlagUsages(); strings.Contains(usage, "--"+tc.old+" ") {
				t.Errorf("help still shows --%s:\n%s", tc.old, usage)
			}
		})
	}
	renew := terminalRenewCmd(Env{})
	if f := renew.Flags().Lookup("minutes"); f == nil || !f.Hidden {
		t.Errorf("renew --minutes = %v, want a hidden flag", f)
	}
	if err := renew.Flags().Parse([]string{"--minutes", "30"}); err != nil {
		t.Fatalf("renew --minutes no longer parses: %v", err)
	}
}

func TestRenewMinutes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		inactivity time.Duration
		minutes    float64
		want       float64
		bad        bool
	}{
		{0, 0, 0, false},
		{30 * time.Minute, 0, 30, false},
		{90 * time.Second, 0, 1.5, false},
		{0, 45, 45, false},
		{time.Hour, 60, 0, true},
	} {
		got, err := renewMinutes(tc.inactivity, tc.minutes)
		if tc.bad {
			if !errors.Is(err, termapi.ErrBadInput) {
				t.Errorf("renewMinutes(%v, %v) = %v, %v; want bad input", tc.inactivity, tc.minutes, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("renewMinutes(%v, %v) = %v, %v; want %v", tc.inactivity, tc.minutes, got, err, tc.want)
		}
	}
}
