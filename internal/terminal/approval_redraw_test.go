package terminal

import (
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
)

// TestApprovedPromptStillDrawnIsNotANewQuestion: the prompt just approved
// stays on screen until the TUI redraws; the monitor must not report it
// again (the Turn back in waiting_for_openclaw and a second question), or
// a command following the approved Turn returns before it ends.
func TestApprovedPromptStillDrawnIsNotANewQuestion(t *testing.T) {
	a := newFakeAgent(AgentCodex, 121)
	r := newRig(t, a)
	r.start(r.svc, HostOptions{Recheck: 10 * time.Millisecond})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, SendRequest{TerminalID: a.pane.TerminalID, Request: "run ls"})
	if err != nil {
		t.Fatal(err)
	}
	a.set(func(f *fakeAgent) {
		f.approval = &ScreenApproval{Fingerprint: "fp-1", Kind: "run_command", Command: "ls", Approvable: true}
		f.stickyApproval = true
	})
	r.waitStatus(res.TurnID, store.TurnWaitingForOpenClaw)
	if _, err := r.svc.Approve(ctx, res.TurnID, "fp-1"); err != nil {
		t.Fatal(err)
	}
	var seen int
	a.set(func(f *fakeAgent) { seen = f.captures })
	r.until("the monitor reads the still-drawn prompt a few times", func() bool {
		var n int
		a.set(func(f *fakeAgent) { n = f.captures })
		return n >= seen+5
	})
	a.set(func(f *fakeAgent) { f.approval, f.stickyApproval = nil, false })
	a.finish("approved and done", false)
	r.waitStatus(res.TurnID, store.TurnIdle)
	ev, err := r.st.TurnEvents(ctx, res.TurnID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	var detected []string
	for _, e := range ev {
		if e.Type == "terminal_bridge_approval_detected" || e.Type == "terminal_bridge_approval_resolved" {
			detected = append(detected, e.Type)
		}
	}
	if len(detected) != 2 {
		t.Fatalf("approval events = %v, want one detection and one resolution", detected)
	}
}
