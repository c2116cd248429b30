package server

import (
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/termapi"
)

// TestTurnOutputNamesOpenClawOnlyWithAnOrigin: a waiting Turn sent by an
// MCP caller (no origin session) does not say it waits for OpenClaw.
func TestTurnOutputNamesOpenClawOnlyWithAnOrigin(t *testing.T) {
	t.Parallel()
	v := termapi.TurnView{TurnID: "turn-1", Status: termapi.TurnWaitingForOpenClaw}
	if got := turnOutput(v).NextStep; strings.Contains(got, "OpenClaw") || !strings.Contains(got, "waits for your answer") {
		t.Errorf("without an origin: %q", got)
	}
	v.OriginSession = "agent:main:s"
	if got := turnOutput(v).NextStep; !strings.Contains(got, "waits for OpenClaw session agent:main:s") {
		t.Errorf("with an origin: %q", got)
	}
}
