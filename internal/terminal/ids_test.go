package terminal

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckIDSaysWhereTheIDComesFrom pins that a malformed id's message
// points at the output that prints an id of that kind, not at one that
// never shows it.
func TestCheckIDSaysWhereTheIDComesFrom(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind, prefix, id, want string
	}{
		{"turn id", "turn-", "nope", "a send result"},
		{"session id", "session-", "sess-1", "SESSION column"},
		{"watch id", "watch-", "nope", "`clawconnect terminal watch` printed"},
		{"transition id", "transition-", "t-1", "new-thread, clear-thread or resume-thread"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			t.Parallel()
			err := checkID(tt.kind, tt.prefix, tt.id)
			if !errors.Is(err, ErrBadInput) {
				t.Fatalf("checkID(%q) = %v, want ErrBadInput", tt.id, err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.prefix) {
				t.Errorf("checkID(%q) = %q, want it to name %q and where to copy the id (%q)", tt.id, err, tt.prefix, tt.want)
			}
		})
	}
	if err := checkID("watch id", "watch-", "watch-20260101T120000-1a2b3c4d"); err != nil {
		t.Errorf("a well-formed watch id: %v", err)
	}
}
