package terminal

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
)

// TestApproveRecordedWhenTheMonitorSeesThePromptCloseFirst interleaves the
// monitor between Approve's key press and its write: the monitor captures
// the pane (the prompt is gone) twice before Approve records. The approval
// the bridge typed must still be recorded as the bridge's, never as a
// human's answer in the terminal.
func TestApproveRecordedWhenTheMonitorSeesThePromptCloseFirst(t *testing.T) {
	a := newFakeAgent(AgentCodex, 125)
	r := newRig(t, a)
	r.start(r.svc, HostOptions{Recheck: 10 * time.Millisecond})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, SendRequest{TerminalID: a.pane.TerminalID, Request: "run ls"})
	if err != nil {
		t.Fatal(err)
	}
	a.set(func(f *fakeAgent) {
		f.approval = &ScreenApproval{Fingerprint: "fp-1", Kind: "run_command", Approvable: true}
	})
	r.waitStatus(res.TurnID, store.TurnWaitingForOpenClaw)
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
	if v, _ := r.svc.Status(ctx, res.TurnID); v.Status != store.TurnWaitingForAgent || v.Approval != nil {
		t.Fatalf("turn after approve = %+v", v)
	}
	a.finish("done after approval", false)
	r.waitStatus(res.TurnID, store.TurnIdle)
}
