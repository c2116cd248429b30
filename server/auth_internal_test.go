package server

import (
	"math"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
)

// The check_task wait rule: a missing or non-finite waitMs takes the
// default; the result is clamped to [1 s, CheckMaxWait].
func TestWaitsClamp(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name         string
		def, maxWait time.Duration
		in           *float64
		want         time.Duration
	}{
		{"missing takes the default", 0, 0, nil, 45 * time.Second},
		{"NaN takes the default", 0, 0, f(math.NaN()), 45 * time.Second},
		{"infinity takes the default", 0, 0, f(math.Inf(1)), 45 * time.Second},
		{"negative is the floor", 0, 0, f(-5), time.Second},
		{"zero is the floor", 0, 0, f(0), time.Second},
		{"below the floor", 0, 0, f(10), time.Second},
		{"in range", 0, 0, f(2500), 2500 * time.Millisecond},
		{"huge is the cap", 0, 0, f(1e300), 120 * time.Second},
		{"own default", 5 * time.Second, 0, nil, 5 * time.Second},
		{"own cap", 0, 30 * time.Second, f(60_000), 30 * time.Second},
		{"a default above the cap is capped", 90 * time.Second, 30 * time.Second, nil, 30 * time.Second},
		{"a cap below the floor still waits the floor", 0, time.Millisecond, f(60_000), time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newWaits(tt.def, tt.maxWait).clamp(tt.in); got != tt.want {
				t.Errorf("clamp = %v, want %v", got, tt.want)
			}
		})
	}
}

// With no Authenticator the HTTP server is open: nothing is required and
// every request acts anonymously.
func TestNilAuthIsOpen(t *testing.T) {
	t.Parallel()
	s, err := New(Options{Tasks: nopTasks{}, Registry: &taskapi.Registry{Default: "a", Agents: []taskapi.Agent{{ID: "a"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if s.AuthRequired() {
		t.Error("AuthRequired = true with no Authenticator")
	}
	if id, ok := s.Authenticate("anything"); !ok || id != (taskapi.Identity{}) {
		t.Errorf("Authenticate = %+v, %v; want the anonymous identity, accepted", id, ok)
	}
}

// nopTasks is a Tasks for tests that never call a tool.
type nopTasks struct{ Tasks }
