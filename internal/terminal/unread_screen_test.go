package terminal

import (
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestAScreenNotReadAnswersNothing: a screen the reader cannot make out (a
// frame half drawn) proves no prompt or question gone, so the Turn still
// waits for its answer; a readable screen without it then resolves it as
// answered in the terminal.
func TestAScreenNotReadAnswersNothing(t *testing.T) {
	for _, tc := range []struct {
		name, resolved string
		ask            func(*fakeAgent)
	}{
		{"approval", "terminal_bridge_approval_resolved", func(f *fakeAgent) {
			f.approval = &agents.ScreenApproval{Fingerprint: "fp-unread", Kind: "run_command", Command: "ls", Approvable: true}
		}},
		{"question", "terminal_bridge_question_resolved", func(f *fakeAgent) {
			f.question = &screen.Question{Profile: "fake-question", Fingerprint: "q-unread", Text: "Which colour?",
				Options: []screen.Option{{Number: 1, Label: "Red"}, {Number: 2, Label: "Blue"}}, Selected: 1, Answerable: true}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newFakeAgent(termapi.AgentCodex, 741)
			r := newRig(t, a)
			r.start(r.svc, hostpkg.Options{Recheck: 10 * time.Millisecond})
			res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "go"})
			if err != nil {
				t.Fatal(err)
			}
			a.set(tc.ask)
			r.waitStatus(res.TurnID, termapi.TurnWaitingForOpenClaw)
			var seen int
			a.set(func(f *fakeAgent) {
				f.approval, f.question, f.activity = nil, nil, string(screen.Unknown)
				seen = f.captures
			})
			r.until("the monitor reads the unreadable screen a few times", func() bool {
				var n int
				a.set(func(f *fakeAgent) { n = f.captures })
				return n >= seen+5
			})
			if v, _ := r.svc.Status(t.Context(), res.TurnID); v.Status != termapi.TurnWaitingForOpenClaw {
				t.Fatalf("after screens not read: %s, want still %s", v.Status, termapi.TurnWaitingForOpenClaw)
			}
			if evs := eventsNamed(t, r, res.TurnID, tc.resolved); len(evs) != 0 {
				t.Fatalf("resolved by a screen not read: %v", evs)
			}
			a.set(func(f *fakeAgent) { f.activity = "working" })
			r.waitStatus(res.TurnID, termapi.TurnWaitingForAgent)
			if evs := eventsNamed(t, r, res.TurnID, tc.resolved); len(evs) != 1 || evs[0]["decision"] != "answered_in_terminal" {
				t.Fatalf("resolved events = %v, want one answered_in_terminal", evs)
			}
		})
	}
}
