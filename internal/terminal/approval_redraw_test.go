package terminal

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestApprovedPromptStillDrawnIsNotANewQuestion: the prompt just approved
// stays on screen until the TUI redraws; the monitor must not report it
// again (the Turn back in waiting_for_openclaw and a second question), or
// a command following the approved Turn returns before it ends.
func TestApprovedPromptStillDrawnIsNotANewQuestion(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 121)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{Recheck: 10 * time.Millisecond})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "run ls"})
	if err != nil {
		t.Fatal(err)
	}
	a.set(func(f *fakeAgent) {
		f.approval = &agents.ScreenApproval{Fingerprint: "fp-1", Kind: "run_command", Command: "ls", Approvable: true}
		f.stickyApproval = true
	})
	r.waitStatus(res.TurnID, termapi.TurnWaitingForOpenClaw)
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
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	if detected := approvalEvents(t, r, res.TurnID); len(detected) != 2 {
		t.Fatalf("approval events = %v, want one detection and one resolution", detected)
	}
}

// TestApprovedPromptRedrawnLateIsNotANewQuestion: a loaded TUI may take
// any time to redraw after the approve key. However long the answered
// prompt stays drawn, it is being answered, not asked again; once the
// screen has shown it gone, the very same prompt drawn again is a new
// question (the agent asks for the same command twice).
func TestApprovedPromptRedrawnLateIsNotANewQuestion(t *testing.T) {
	// The store is opened outside the bubble (see outsideBubble).
	st := newRig(t).st
	synctest.Test(t, func(t *testing.T) {
		a := newFakeAgent(termapi.AgentCodex, 127)
		r := &rig{t: t, st: outsideBubble{st.(*sqlstore.DB)}, ft: &fakeTerminals{agents: []*fakeAgent{a}}}
		r.svc = r.service()
		r.start(r.svc, hostpkg.Options{Recheck: time.Second})
		ctx := t.Context()
		res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "run ls", OriginSession: "agent:main:s1"})
		if err != nil {
			t.Fatal(err)
		}
		prompt := agents.ScreenApproval{Fingerprint: "fp-1", Kind: "run_command", Command: "ls", Approvable: true}
		a.set(func(f *fakeAgent) { f.approval, f.stickyApproval = &prompt, true })
		r.waitStatus(res.TurnID, termapi.TurnWaitingForOpenClaw)
		if _, err := r.svc.Approve(ctx, res.TurnID, "fp-1"); err != nil {
			t.Fatal(err)
		}
		// The TUI redraws a minute later; the pane keeps writing meanwhile.
		for range 60 {
			a.poke()
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if got := approvalEvents(t, r, res.TurnID); len(got) != 2 {
			t.Fatalf("approval events while the answered prompt is still drawn = %v, want one detection and one resolution", got)
		}
		if v, _ := r.svc.Status(ctx, res.TurnID); v.Status != termapi.TurnWaitingForAgent {
			t.Fatalf("turn while the answered prompt is still drawn = %s, want %s", v.Status, termapi.TurnWaitingForAgent)
		}
		// A frame caught half drawn (no prompt, nothing readable) does not
		// prove the prompt gone.
		var activity string
		a.set(func(f *fakeAgent) { activity, f.approval, f.activity = f.activity, nil, "unknown" })
		time.Sleep(2 * time.Second)
		a.set(func(f *fakeAgent) { f.approval, f.activity = &prompt, activity })
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := approvalEvents(t, r, res.TurnID); len(got) != 2 {
			t.Fatalf("approval events after a half-drawn frame = %v, want one detection and one resolution", got)
		}
		a.set(func(f *fakeAgent) { f.approval, f.stickyApproval = nil, false })
		time.Sleep(2 * time.Second)
		synctest.Wait()
		a.set(func(f *fakeAgent) { f.approval = &prompt })
		r.waitStatus(res.TurnID, termapi.TurnWaitingForOpenClaw)
		if got := approvalEvents(t, r, res.TurnID); len(got) != 3 {
			t.Fatalf("approval events once the same prompt is drawn again = %v, want a second detection", got)
		}
		askedTwice(t, r, res.TurnID, KindApproval)
	})
}

// approvalEvents lists the Turn's approval detections and resolutions.
func approvalEvents(t *testing.T, r *rig, turnID string) []string {
	t.Helper()
	ev, err := r.st.TurnEvents(t.Context(), turnID, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ev {
		if e.Type == "terminal_bridge_approval_detected" || e.Type == "terminal_bridge_approval_resolved" {
			got = append(got, e.Type)
		}
	}
	return got
}

// TestAnsweredQuestionRedrawnLateIsNotANewQuestion is the question
// dialog's counterpart: the dialog just answered, still drawn a minute
// later, is not asked again; drawn again after the screen showed it gone,
// it is.
func TestAnsweredQuestionRedrawnLateIsNotANewQuestion(t *testing.T) {
	st := newRig(t).st // outside the bubble (see outsideBubble)
	synctest.Test(t, func(t *testing.T) {
		a := newFakeAgent(termapi.AgentClaude, 128)
		r := &rig{t: t, st: outsideBubble{st.(*sqlstore.DB)}, ft: &fakeTerminals{agents: []*fakeAgent{a}}}
		r.svc = r.service()
		r.start(r.svc, hostpkg.Options{Recheck: time.Second})
		ctx := t.Context()
		id := questionScenario(true)(t, r, a)
		// The TUI takes the answer but keeps the dialog drawn.
		a.set(func(f *fakeAgent) {
			f.afterKeys = func([]string) { a.set(func(f *fakeAgent) { f.question = colorQuestion(true) }) }
		})
		if _, err := r.svc.Respond(ctx, id, "2"); err != nil {
			t.Fatal(err)
		}
		a.set(func(f *fakeAgent) { f.afterKeys = nil })
		for range 60 {
			a.poke()
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if got := eventsNamed(t, r, id, "terminal_bridge_question_detected"); len(got) != 1 {
			t.Fatalf("question detections while the answered dialog is still drawn = %d, want 1", len(got))
		}
		if v, _ := r.svc.Status(ctx, id); v.Status != termapi.TurnWaitingForAgent {
			t.Fatalf("turn while the answered dialog is still drawn = %s, want %s", v.Status, termapi.TurnWaitingForAgent)
		}
		a.set(func(f *fakeAgent) { f.question = nil })
		time.Sleep(2 * time.Second)
		synctest.Wait()
		a.set(func(f *fakeAgent) { f.question = colorQuestion(true) })
		r.waitStatus(id, termapi.TurnWaitingForOpenClaw)
		if got := eventsNamed(t, r, id, "terminal_bridge_question_detected"); len(got) != 2 {
			t.Fatalf("question detections once the same dialog is drawn again = %d, want 2", len(got))
		}
		askedTwice(t, r, id, KindQuestion)
	})
}

// askedTwice checks that the Turn queued two callbacks of kind, one per
// asking, with two ids: an asking again is news to the origin session.
func askedTwice(t *testing.T, r *rig, turnID, kind string) {
	t.Helper()
	ids := map[string]bool{}
	for _, m := range callbacksOf(t, r, turnID) {
		if m.Metadata["kind"] == kind {
			ids[m.ID] = true
		}
	}
	if len(ids) != 2 {
		t.Fatalf("%s callbacks = %v, want two, one per asking", kind, ids)
	}
}
