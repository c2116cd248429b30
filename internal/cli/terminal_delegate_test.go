package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/termapi"
)

// TestTerminalDelegateRefusesAndValidates: with no agent pane a delegate
// types nothing and says so (exit 1, the refusal as JSON with --json);
// bad timeouts and an unknown agent are usage errors that name the fix.
func TestTerminalDelegateRefusesAndValidates(t *testing.T) {
	t.Parallel()
	envm := map[string]string{"CLAWCONNECT_HOME": t.TempDir(), "CLAWCONNECT_TMUX_DEFAULT_SERVER": "off"}
	out, _, err := runTerminal(t.Context(), envm, "delegate", "--json", "run the tests")
	var res delegateOutput
	if ExitCode(err) != ExitFailure || json.Unmarshal([]byte(out), &res) != nil || !strings.Contains(res.Error, "no agent pane found") || res.TurnID != "" {
		t.Fatalf("delegate with no pane: exit %d (%v), output %q", ExitCode(err), err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"delegate", "--inactivity-timeout", "-5m", "x"}, "inactivity timeout -5m0s is out of range"},
		{[]string{"delegate", "--inactivity-timeout", "2h", "--hard-timeout", "1h", "x"}, "longer than the hard timeout"},
		{[]string{"send", "--terminal", "terminal:v2:tmux:codex:s:0.0:1", "--hard-timeout", "200h", "x"}, "hard timeout 200h0m0s is out of range"},
		{[]string{"delegate", "--agent", "gemini", "x"}, `agent "gemini" is neither codex nor claude`},
		{[]string{"delegate"}, "pass the task as one argument"},
	} {
		_, _, err := runTerminal(t.Context(), envm, tc.args...)
		if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("terminal %q: exit %d (%v), want exit %d saying %q", tc.args, ExitCode(err), err, ExitUsage, tc.want)
		}
	}
}

// TestPrintTurnSaysWhoWaits: a Turn with no OpenClaw origin that stops at
// a prompt prints as waiting for approval, not for OpenClaw.
func TestPrintTurnSaysWhoWaits(t *testing.T) {
	t.Parallel()
	v := termapi.TurnView{TurnID: "turn-1", Status: "waiting_for_openclaw", Approval: &termapi.Approval{Fingerprint: "fp", Kind: "exec"}}
	var b strings.Builder
	printTurn(&b, v)
	if !strings.Contains(b.String(), "status:   waiting_for_approval\n") {
		t.Fatalf("printTurn without an origin:\n%s", b.String())
	}
	v.OriginSession = "agent:main:s"
	b.Reset()
	printTurn(&b, v)
	if !strings.Contains(b.String(), "status:   waiting_for_openclaw\n") {
		t.Fatalf("printTurn with an origin:\n%s", b.String())
	}
}

// TestTerminalListTurnColumnSaysWhoWaits: the TURN column reads a pane's
// current Turn as a person would (the row's shown status), so a Turn with
// no OpenClaw origin that stops at a prompt is not waiting_for_openclaw.
func TestTerminalListTurnColumnSaysWhoWaits(t *testing.T) {
	t.Parallel()
	row := termapi.TerminalRow{ID: "terminal:v2:tmux:codex:w:0.0:7", Agent: "codex", PID: 7, ActivityState: "awaiting_approval",
		ManagementState: "managed", SessionID: "session-1", AvailableActions: []termapi.Action{},
		CurrentTurn: &termapi.TurnRef{TurnID: "turn-1", Status: "waiting_for_openclaw", Shown: "waiting_for_approval"}}
	var b strings.Builder
	printTerminalRows(&b, []termapi.TerminalRow{row})
	if !strings.Contains(b.String(), "turn-1 (waiting_for_approval)") || strings.Contains(b.String(), "waiting_for_openclaw") {
		t.Fatalf("terminal list:\n%s", b.String())
	}
	// A row from a service that does not fill Shown reads its status.
	row.CurrentTurn.Shown = ""
	b.Reset()
	printTerminalRows(&b, []termapi.TerminalRow{row})
	if !strings.Contains(b.String(), "turn-1 (waiting_for_openclaw)") {
		t.Fatalf("terminal list without a shown status:\n%s", b.String())
	}
}
