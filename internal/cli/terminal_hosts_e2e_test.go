package cli

import (
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
)

// TestE2ETerminalHostWithoutCallerSockets: a monitor host runs on the
// home but was started without the tmux socket of the agent's private
// server (as run.sh's serve is); a command that knows the socket still
// lists the pane and gets the exact reply through that host.
func TestE2ETerminalHostWithoutCallerSockets(t *testing.T) {
	cliEnv := codexEnv(t)
	hostEnv := maps.Clone(cliEnv)
	delete(hostEnv, "CLAWCONNECT_TMUX_SOCKETS")
	_, logPath := startHelperDaemon(t, hostEnv)
	row := waitSendableRow(t, cliEnv)
	out, stderr, err := runTerminal(t.Context(), cliEnv, "send", "--terminal", row.ID, "--wait", "--timeout", "90s", "--json", "ECHO=through-the-host")
	if err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("send --wait: %v\nstdout:\n%s\nstderr:\n%s\nhost log:\n%s", err, out, stderr, b)
	}
	var v terminal.TurnView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("send --wait --json: %v\n%s", err, out)
	}
	if v.Status != "idle" || v.Result == nil || v.Result.Outcome != "completed" || v.Result.Text != "through-the-host" {
		t.Fatalf("turn = %+v", v)
	}
	if strings.Contains(stderr, "no monitor host runs") {
		t.Fatalf("the command followed the Turn itself although a host runs:\n%s", stderr)
	}
}

// TestE2ETerminalApprovalWithoutHost: with no monitor host at all, the
// commands follow their Turn themselves: status --wait sees the approval
// prompt, approve follows the approved Turn to its end, and status --wait
// reports it idle and completed.
func TestE2ETerminalApprovalWithoutHost(t *testing.T) {
	envm := codexEnv(t)
	ctx := t.Context()
	row := waitSendableRow(t, envm)
	out, stderr, err := runTerminal(ctx, envm, "send", "--terminal", row.ID, "--json", "TOOLCALL: ESCALATE touch approved.txt")
	if err != nil {
		t.Fatalf("send: %v\n%s\n%s", err, out, stderr)
	}
	var sent terminal.SendResult
	if err := json.Unmarshal([]byte(out), &sent); err != nil || sent.SubmissionOutcome != terminal.OutcomeAccepted {
		t.Fatalf("send = %s (%v)", out, err)
	}
	if !strings.Contains(stderr, "no monitor host runs; turn "+sent.TurnID+" is followed once `clawconnect terminal daemon` or `clawconnect serve` starts") {
		t.Fatalf("send without a host did not say its Turn is unfollowed:\n%s", stderr)
	}
	turnView := func(what string, args ...string) terminal.TurnView {
		t.Helper()
		out, stderr, err := runTerminal(ctx, envm, args...)
		if err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", what, err, out, stderr)
		}
		var v terminal.TurnView
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s --json: %v\n%s", what, err, out)
		}
		return v
	}
	v := turnView("status --wait", "status", sent.TurnID, "--wait", "--timeout", "90s", "--json")
	if v.Status != "waiting_for_openclaw" || v.Approval == nil || !strings.Contains(v.Approval.Command, "touch approved.txt") {
		t.Fatalf("before approval: %+v", v)
	}
	v = turnView("approve", "approve", sent.TurnID, "--fingerprint", v.Approval.Fingerprint, "--json")
	if v.Status != "idle" || v.Result == nil || v.Result.Outcome != "completed" ||
		!strings.HasPrefix(v.Result.Text, strings.TrimSpace(fakemodel.ToolResultPrefix)) {
		t.Fatalf("approve without a host returned %+v, want the Turn followed to its end", v)
	}
	if v = turnView("status --wait", "status", sent.TurnID, "--wait", "--json"); v.Status != "idle" || v.Result.Outcome != "completed" {
		t.Fatalf("after approval: %+v", v)
	}
}
