package terminal

import (
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agentproc"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestAgentReplacedInItsPane: the agent a Turn was sent to is replaced by
// a new process in the same pane (same pane key, new pid, a new terminal
// id). A send to the new terminal is taken, and the old Turn ends stalled
// with its agent gone: at the send when no monitor saw the death first,
// or by the monitor that saw it, which releases the pane's input too.
func TestAgentReplacedInItsPane(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		monitor bool
		reason  string
	}{
		{"no monitor saw it: the send retires the old turn", false, "another process now runs in its pane"},
		{"the monitor saw it first", true, "the agent process exited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := newFakeAgent(termapi.AgentCodex, 180)
			r := newRig(t, a)
			if tc.monitor {
				r.start(r.svc, hostpkg.Options{Recheck: 20 * time.Millisecond})
			}
			old, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
			if err != nil {
				t.Fatal(err)
			}
			r.waitStatus(old.TurnID, termapi.TurnWaitingForAgent)
			a.set(func(f *fakeAgent) {
				f.pane.PID, f.pane.Birth = 181, "birth-2"
				f.pane.TerminalID = agentproc.FormatTerminalID(agentproc.Agent(termapi.AgentCodex), "work:0.0", 181)
				f.thread, f.activity, f.records = "", "idle", nil
			})
			if tc.monitor {
				r.waitStatus(old.TurnID, termapi.TurnStalled)
			}
			res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "y"})
			if err != nil {
				t.Fatalf("send to the new process in the pane: %v", err)
			}
			if res.SessionID == old.SessionID {
				t.Errorf("the new process got the old Turn's session %s", res.SessionID)
			}
			v, err := r.svc.Status(t.Context(), old.TurnID)
			if err != nil {
				t.Fatal(err)
			}
			if v.Status != termapi.TurnStalled || !strings.Contains(v.StalledReason, tc.reason) {
				t.Fatalf("old turn = %s %q, want stalled: %s", v.Status, v.StalledReason, tc.reason)
			}
		})
	}
}
