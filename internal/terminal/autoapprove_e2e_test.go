package terminal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/termapi"
)

// autoApproveE2E drives a real TUI asking for approval twice in one pane
// whose Service has one rule for its workspace: the command of the rule
// runs without anyone approving and its Turn ends with the command's
// result; any other command waits for a person, who approves it.
func autoApproveE2E(t *testing.T, kind realcli.Kind, toolcall string, args ...string) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, kind, model, args...)
	rules := []AutoApproveRule{{Name: "touch", Agent: rp.pane.Agent, Workspace: rp.pane.Cwd, Argv: []string{"touch", "auto-approved.txt"}}}
	svc, st := newRealService(t, rp)
	svc.o.AutoApprove = rules
	runHost(t, svc)
	ctx := t.Context()

	res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: toolcall + "touch auto-approved.txt"})
	if err != nil {
		t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
	}
	v := waitTurnStatus(t, svc, res.TurnID, 90*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled, termapi.TurnWaitingForOpenClaw)
	if v.Status != termapi.TurnIdle || !strings.HasPrefix(v.Result.Text, strings.TrimSpace(fakemodel.ToolResultPrefix)) {
		evs, _ := st.TurnEvents(ctx, res.TurnID, 0, 200)
		var log strings.Builder
		for _, e := range evs {
			fmt.Fprintf(&log, "%s %s\n", e.Type, e.Data)
		}
		t.Fatalf("auto-approved turn = %+v; events:\n%s\nscreen:\n%s", v, log.String(), rp.debug())
	}
	if len(v.AutoApprovals) != 1 || v.AutoApprovals[0].Rule != "1 (touch)" || strings.Join(v.AutoApprovals[0].Argv, " ") != "touch auto-approved.txt" {
		t.Fatalf("auto_approvals = %+v", v.AutoApprovals)
	}
	if _, err := os.Stat(filepath.Join(rp.pane.Cwd, "auto-approved.txt")); err != nil {
		t.Fatalf("the approved command did not run: %v", err)
	}
	evs, err := st.TurnEvents(ctx, res.TurnID, 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	var auto, detected int
	for _, e := range evs {
		switch e.Type {
		case "terminal_bridge_auto_approved":
			auto++
			if kind == realcli.ClaudeCode && (!strings.Contains(string(e.Data), `"tool":"Bash"`) || !strings.Contains(string(e.Data), `"request_id":"toolu_`)) {
				t.Errorf("auto-approval event %s lacks the transcript's call", e.Data)
			}
		case "terminal_bridge_approval_detected":
			detected++
		}
	}
	if auto != 1 || detected != 0 {
		t.Fatalf("%d auto-approvals and %d approvals for a person, want 1 and 0", auto, detected)
	}

	// Another command waits for a person, saying why no rule answered it.
	waitSendable(t, svc, rp)
	res, err = svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: toolcall + "touch for-a-person.txt"})
	if err != nil {
		t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
	}
	v = waitTurnStatus(t, svc, res.TurnID, 90*time.Second, termapi.TurnWaitingForOpenClaw, termapi.TurnIdle, termapi.TurnFailed)
	if v.Status != termapi.TurnWaitingForOpenClaw || v.Approval == nil || len(v.AutoApprovals) != 0 {
		t.Fatalf("turn = %+v, want it waiting for approval; screen:\n%s", v, rp.debug())
	}
	if _, err := os.Stat(filepath.Join(rp.pane.Cwd, "for-a-person.txt")); err == nil {
		t.Fatal("the command ran before anyone approved it")
	}
	evs, _ = st.TurnEvents(ctx, res.TurnID, 0, 200)
	declined := ""
	for _, e := range evs {
		if e.Type == "terminal_bridge_approval_detected" {
			declined = string(e.Data)
		}
	}
	if !strings.Contains(declined, declinedNoRule) {
		t.Fatalf("approval event %s does not say why no rule answered", declined)
	}
	if _, err := svc.Approve(ctx, res.TurnID, v.Approval.Fingerprint); err != nil {
		t.Fatalf("approve: %v; screen:\n%s", err, rp.debug())
	}
	if v := waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled); v.Status != termapi.TurnIdle || len(v.AutoApprovals) != 0 {
		t.Fatalf("approved turn = %+v; screen:\n%s", v, rp.debug())
	}
}

func TestE2EClaudeAutoApprove(t *testing.T) {
	autoApproveE2E(t, realcli.ClaudeCode, "TOOLCALL: ", "--permission-mode", "default")
}

func TestE2ECodexAutoApprove(t *testing.T) {
	autoApproveE2E(t, realcli.Codex, "TOOLCALL: ESCALATE ")
}
