package terminal

import (
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestE2EAgentRestartedInItsPane: a Turn runs in a real Codex or Claude
// Code TUI when the pane is respawned (the agent killed and started again
// in the same tmux pane). The new process is a new terminal: a send to it
// is taken at once, and the old Turn ends stalled, its agent gone,
// instead of holding the pane's next input.
func TestE2EAgentRestartedInItsPane(t *testing.T) {
	for _, kind := range []realcli.Kind{realcli.Codex, realcli.ClaudeCode} {
		t.Run(string(kind), func(t *testing.T) { agentRestartedInItsPane(t, kind) })
	}
}

func agentRestartedInItsPane(t *testing.T, kind realcli.Kind) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, kind, model)
	svc, _ := newRealService(t, rp)
	runHost(t, svc)
	ctx := t.Context()

	old, key := rp.pane.TerminalID, rp.pane.Key
	res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: old, Request: "HANG"})
	if err != nil || res.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("send: %+v %v; screen:\n%s", res, err, rp.debug())
	}
	waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnRunning, termapi.TurnWaitingForAgent)

	if err := rp.tui.Respawn(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := rp.tui.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	rp.awaitIdle(t, old)
	if rp.pane.TerminalID == old || rp.pane.Key != key {
		t.Fatalf("after the respawn the pane is %s (key %s), want a new terminal id in the same pane", rp.pane.TerminalID, rp.pane.Key)
	}

	res2, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "Reply with ECHO=after-restart"})
	if err != nil || res2.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("send to the new agent: %+v %v; screen:\n%s", res2, err, rp.debug())
	}
	if v := waitTurnStatus(t, svc, res2.TurnID, 90*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled); v.Status != termapi.TurnIdle || v.Result.Text != "after-restart" {
		t.Fatalf("the new agent's turn = %+v; screen:\n%s", v, rp.debug())
	}
	v, err := svc.Status(ctx, res.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != termapi.TurnStalled || !strings.Contains(v.StalledReason, "agent process") {
		t.Fatalf("the old turn = %s (%q), want stalled with its agent gone", v.Status, v.StalledReason)
	}
}
