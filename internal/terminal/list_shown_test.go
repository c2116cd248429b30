package terminal

import (
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestListShowsWhoTheTurnWaitsFor: a pane's current Turn that stops at a
// prompt or a question reads waiting_for_openclaw in the list only when it
// reports to an OpenClaw session; one sent from the command line or an MCP
// client reads waiting_for_approval or waiting_for_answer, as its status
// does. Status itself stays the stored one.
func TestListShowsWhoTheTurnWaitsFor(t *testing.T) {
	for i, tt := range []struct {
		name, origin string
		stop         func(f *fakeAgent)
		want         string
	}{
		{"prompt without origin", "", func(f *fakeAgent) {
			f.approval = &agents.ScreenApproval{Fingerprint: "fp-1", Kind: "run_command", Approvable: true}
		}, "waiting_for_approval"},
		{"question without origin", "", func(f *fakeAgent) { f.question = colorQuestion(true) }, "waiting_for_answer"},
		{"prompt with origin", origin, func(f *fakeAgent) {
			f.approval = &agents.ScreenApproval{Fingerprint: "fp-1", Kind: "run_command", Approvable: true}
		}, string(termapi.TurnWaitingForOpenClaw)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := newFakeAgent(termapi.AgentCodex, 760+i)
			r := newRig(t, a)
			r.start(r.svc, hostpkg.Options{})
			res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "do it", OriginSession: tt.origin})
			if err != nil {
				t.Fatal(err)
			}
			a.set(tt.stop)
			v := r.waitStatus(res.TurnID, termapi.TurnWaitingForOpenClaw)
			list, err := r.svc.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Terminals) != 1 || list.Terminals[0].CurrentTurn == nil {
				t.Fatalf("list = %+v", list)
			}
			ref := *list.Terminals[0].CurrentTurn
			want := termapi.TurnRef{TurnID: res.TurnID, Status: termapi.TurnWaitingForOpenClaw, Shown: tt.want}
			if ref != want || ShownStatus(v) != tt.want {
				t.Fatalf("current turn = %+v, want %+v (status shows %q)", ref, want, ShownStatus(v))
			}
		})
	}
}
