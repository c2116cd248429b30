package agentsession

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStateVocabularyIsClosed(t *testing.T) {
	if got := len(States()); got != 11 {
		t.Fatalf("len(States()) = %d, want 11", got)
	}
	for _, s := range States() {
		got, ok := ParseState(string(s))
		if !ok || got != s {
			t.Errorf("ParseState(%q) = %q, %v; want itself", s, got, ok)
		}
	}
	for _, bad := range []string{"", "RUNNING", "done", "superseded", "detached", " running"} {
		if got, ok := ParseState(bad); ok {
			t.Errorf("ParseState(%q) = %q, true; want false", bad, got)
		}
	}
}

func TestStateSets(t *testing.T) {
	var completed, terminal, blocked []State
	for _, s := range States() {
		if s.IsCompletedTurn() {
			completed = append(completed, s)
		}
		if s.IsTerminal() {
			terminal = append(terminal, s)
		}
		if s.IsBlocked() {
			blocked = append(blocked, s)
		}
	}
	for _, tc := range []struct {
		name      string
		got, want []State
	}{
		{"completed-turn", completed, []State{StateIdle, StateCompleted}},
		{"terminal", terminal, []State{StateIdle, StateCompleted, StateDead, StateFailed}},
		{"blocked", blocked, []State{StateNeedsInput, StateNeedsPermission}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("set mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLiveStatus(t *testing.T) {
	tests := []struct {
		in   string
		want AttachmentStatus
		ok   bool
	}{
		{"running", "running", true},
		{"completed", "completed", true},
		{"needs_permission", "needs_permission", true},
		{"unavailable", "", false},
		{"unknown", "", false},
		{"superseded", "", false},
		{"bogus", "", false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := LiveStatus(tc.in)
			if got != tc.want || ok != tc.ok {
				t.Errorf("LiveStatus(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
	for _, s := range []AttachmentStatus{AttachmentSuperseded, AttachmentDetached, "", "unknown"} {
		if st, ok := s.State(); ok {
			t.Errorf("AttachmentStatus(%q).State() = %q, true; want false", s, st)
		}
	}
	if st, ok := AttachmentStatus("idle").State(); !ok || st != StateIdle {
		t.Errorf("AttachmentStatus(idle).State() = %q, %v", st, ok)
	}
}
