package cli

import (
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/termapi"
)

// TestPrintTurnSuggestsRenewOnlyWhenAccepted: a stall past its hard
// deadline (no renew in the Turn's next steps) is not told to renew.
func TestPrintTurnSuggestsRenewOnlyWhenAccepted(t *testing.T) {
	for _, tc := range []struct {
		steps []string
		renew bool
	}{
		{[]string{"renew", "cancel", "close", "status"}, true},
		{[]string{"cancel", "close", "status"}, false},
	} {
		var b strings.Builder
		printTurn(&b, termapi.TurnView{TurnID: "turn-1", Status: termapi.TurnStalled, StalledReason: "hard deadline passed", NextSteps: tc.steps})
		if got := strings.Contains(b.String(), "terminal renew"); got != tc.renew {
			t.Errorf("steps %v: output suggests renew = %v:\n%s", tc.steps, got, b.String())
		}
		if !strings.Contains(b.String(), "next:     "+strings.Join(tc.steps, ", ")) {
			t.Errorf("steps %v: output does not list them:\n%s", tc.steps, b.String())
		}
	}
}
