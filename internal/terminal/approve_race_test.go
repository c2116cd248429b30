package terminal

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestApproveRecordedWhenTheMonitorSeesThePromptCloseFirst interleaves the
// monitor between Approve's key press and its write: the monitor captures
// the pane (the prompt is gone) twice before Approve records. The approval
// the bridge typed must still be recorded as the bridge's, never as a
// human's answer in the terminal.
func TestApproveRecordedWhenTheMonitorSeesThePromptCloseFirst(t *testing.T) {
	r, a, res := pendingApproval(t, 125, agents.ScreenApproval{Fingerprint: "fp-1", Kind: "run_command", Approvable: true})
	ctx := t.Context()
	captures := func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.captures
	}
	a.set(func(f *fakeAgent) {
		f.afterKeys = func(keys []string) {
			if len(keys) != 1 || keys[0] != "y" {
				return
			}
			// Two more captures: the first check after the key press has
			// finished (and written whatever it writes) before Approve's own
			// write.
			n := captures()
			r.until("the monitor looked at the pane twice", func() bool {
				a.poke()
				return captures() >= n+2
			})
		}
	})
	if _, err := r.svc.Approve(ctx, res.TurnID, "fp-1"); err != nil {
		t.Fatal(err)
	}
	evs, err := r.st.TurnEvents(ctx, res.TurnID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var decisions []string
	for _, e := range evs {
		if e.Type != "terminal_bridge_approval_resolved" {
			continue
		}
		var d struct{ Decision string }
		_ = json.Unmarshal(e.Data, &d)
		decisions = append(decisions, d.Decision)
	}
	if len(decisions) != 1 || decisions[0] != "approve" {
		t.Fatalf("approval resolutions = %v, want exactly [approve]", decisions)
	}
	if v, _ := r.svc.Status(ctx, res.TurnID); v.Status != termapi.TurnWaitingForAgent || v.Approval != nil {
		t.Fatalf("turn after approve = %+v", v)
	}
	a.finish("done after approval", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
}

// TestApprovalClaimOfADeadApprover: an approve that claimed the prompt and
// pressed the key but never recorded it (its process stopped) is recorded
// by the monitor once the claim is stale — as the bridge's approval, not a
// human's answer.
func TestApprovalClaimOfADeadApprover(t *testing.T) {
	r, a, res := pendingApproval(t, 126, agents.ScreenApproval{Fingerprint: "fp-1", Kind: "run_command", Approvable: true})
	ctx := t.Context()
	r.until("the claim is written", func() bool {
		turn, err := r.st.GetTurn(ctx, res.TurnID)
		if err != nil {
			t.Fatal(err)
		}
		turn.Takeover.ApprovingFingerprint = "fp-1"
		turn.Takeover.ApprovingAt = time.Now().Add(-approvalClaimStale - time.Second).UnixMilli()
		return r.st.WriteTurn(ctx, store.TurnWrite{Turn: turn}) == nil
	})
	a.set(func(f *fakeAgent) { f.approval = nil })
	r.waitStatus(res.TurnID, termapi.TurnWaitingForAgent)
	evs, _ := r.st.TurnEvents(ctx, res.TurnID, 0, 100)
	var got []map[string]any
	for _, e := range evs {
		if e.Type == "terminal_bridge_approval_resolved" {
			var d map[string]any
			_ = json.Unmarshal(e.Data, &d)
			got = append(got, d)
		}
	}
	if len(got) != 1 || got[0]["decision"] != "approve" || got[0]["recorded_by"] != "monitor" {
		t.Fatalf("approval resolutions = %v", got)
	}
	if turn, _ := r.st.GetTurn(ctx, res.TurnID); turn.Takeover.ApprovingFingerprint != "" {
		t.Fatalf("the stale claim is still on the Turn: %+v", turn.Takeover)
	}
}

// pendingApproval sends a Turn to a fake Codex pane (pid) and shows the
// approval prompt p; it returns once the Turn waits for OpenClaw.
func pendingApproval(t *testing.T, pid int, p agents.ScreenApproval) (*rig, *fakeAgent, termapi.SendResult) {
	t.Helper()
	a := newFakeAgent(termapi.AgentCodex, pid)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{Recheck: 20 * time.Millisecond})
	res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "run ls"})
	if err != nil {
		t.Fatal(err)
	}
	a.set(func(f *fakeAgent) { f.approval = &p })
	r.waitStatus(res.TurnID, termapi.TurnWaitingForOpenClaw)
	return r, a, res
}
