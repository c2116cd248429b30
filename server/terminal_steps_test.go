package server

import (
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/termapi"
)

// TestTurnOutputNamesOnlyAcceptedSteps: the MCP next step words the
// Turn's NextSteps and nothing else (a stalled or finished Turn is never
// told to respond, a prompt only a human can answer never to approve).
func TestTurnOutputNamesOnlyAcceptedSteps(t *testing.T) {
	for _, tc := range []struct {
		v             termapi.TurnView
		want, refused []string
	}{
		{termapi.TurnView{Status: termapi.TurnStalled, StalledReason: "no activity", NextSteps: []string{"renew", "cancel", "close", "status"}},
			[]string{"terminal renew", "terminal_cancel", "terminal close"}, []string{"terminal_respond", "terminal_approve"}},
		{termapi.TurnView{Status: termapi.TurnIdle, NextSteps: []string{"send", "close", "status"}},
			[]string{"terminal_send with session_id"}, []string{"terminal_respond", "terminal_cancel"}},
		{termapi.TurnView{Status: termapi.TurnWaitingForOpenClaw, Approval: &termapi.Approval{Fingerprint: "fp"},
			NextSteps: []string{"answer_in_terminal", "cancel", "close", "status"}},
			[]string{"in the terminal", "terminal_cancel"}, []string{"terminal_approve", "terminal_respond"}},
	} {
		got := turnOutput(tc.v).NextStep
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q does not name %q", tc.v.Status, got, w)
			}
		}
		for _, r := range tc.refused {
			if strings.Contains(got, r) {
				t.Errorf("%s: %q names %q, which the Turn refuses", tc.v.Status, got, r)
			}
		}
	}
}
