package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

func TestSendWaitDoneWithExactReply(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 101)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()

	list, err := r.svc.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Terminals) != 1 {
		t.Fatalf("list = %+v", list)
	}
	row := list.Terminals[0]
	wantActions := []termapi.Action{{Action: "send", Scope: ScopeTerminalFollowCurrent,
		Arguments: map[string]string{"terminal_id": a.pane.TerminalID}, MissingRequired: []string{"request"}}}
	if row.ManagementState != "unmanaged" || row.ActivityState != "idle" || !cmp.Equal(wantActions, row.AvailableActions) {
		t.Fatalf("unmanaged row = %+v", row)
	}

	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "Say hello\n"})
	if err != nil {
		t.Fatal(err)
	}
	if res.SubmissionOutcome != termapi.OutcomeAccepted || !strings.HasPrefix(res.TurnID, "turn-") || !strings.HasPrefix(res.SessionID, "session-") {
		t.Fatalf("send = %+v", res)
	}
	if v, _ := r.svc.Status(ctx, res.TurnID); v.Status != termapi.TurnWaitingForAgent {
		t.Fatalf("after send: %+v", v)
	}
	reply := "FAKE-REPLY: hello ✓ " + strings.Repeat("x", 5000) + " OPENAI_API_KEY=sk-abcdefghijklmnop"
	a.finish(reply, false)
	v, err := r.svc.Wait(ctx, res.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != termapi.TurnIdle || v.Result == nil || v.Result.Outcome != "completed" {
		t.Fatalf("turn = %+v", v)
	}
	if want := resultText(reply); v.Result.Text != want || len([]rune(v.Result.Text)) != MaxResultChars {
		t.Fatalf("result text: %d chars, want the first %d of the reply", len([]rune(v.Result.Text)), MaxResultChars)
	}
	claim, err := r.st.GetCompletionClaim(ctx, res.TurnID)
	if err != nil || claim.Outcome != "completed" {
		t.Fatalf("claim = %+v, %v", claim, err)
	}
	// The pane is now managed; the next send may target the exact session.
	list, _ = r.svc.List(ctx)
	row = list.Terminals[0]
	if row.ManagementState != "managed" || row.SessionID != res.SessionID || len(row.AvailableActions) != 2 ||
		row.AvailableActions[0].Scope != ScopeSessionExact || row.CurrentTurn == nil || row.CurrentTurn.Status != termapi.TurnIdle {
		t.Fatalf("managed row = %+v", row)
	}
	res2, err := r.svc.Send(ctx, termapi.SendRequest{SessionID: res.SessionID, Request: "again"})
	if err != nil || res2.SessionID != res.SessionID || res2.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("session_exact send = %+v, %v", res2, err)
	}
	a.finish("second reply", false)
	if v := r.waitStatus(res2.TurnID, termapi.TurnIdle); v.Result.Text != "second reply" {
		t.Fatalf("second turn = %+v", v)
	}
	ev, _ := r.st.TurnEvents(ctx, res.TurnID, 0, 100)
	var types []string
	for _, e := range ev {
		types = append(types, e.Type)
	}
	want := []string{"terminal_message_submit_prepared", "terminal_message_text_injected", "message",
		"terminal_message_agent_accepted", "terminal_bridge_completion_claimed", "message"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Fatalf("event log (-want +got):\n%s", diff)
	}
}

func TestVirginPaneBoundAfterAcceptance(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 102)
	a.thread = ""
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "first"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := r.st.GetTermSession(t.Context(), res.SessionID)
	if err != nil || sess.Binding.NativeThreadID != "thread-new" || sess.Binding.Generation != 1 {
		t.Fatalf("session after acceptance = %+v, %v", sess.Binding, err)
	}
}

// refusal asserts that f fails with target and leaves the store as it was.
func refusal(t *testing.T, r *rig, target error, substr string, f func() error) {
	t.Helper()
	before, _ := r.st.OpenTurns(t.Context(), 100)
	err := f()
	if !errors.Is(err, target) || !strings.Contains(err.Error(), substr) {
		t.Fatalf("err = %v, want %v containing %q", err, target, substr)
	}
	after, _ := r.st.OpenTurns(t.Context(), 100)
	if len(after) != len(before) {
		t.Fatalf("a refused call changed the open turns: %d -> %d", len(before), len(after))
	}
}

func TestSendRefusesBadInputAndChangesNothing(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 103)
	b := newFakeAgent(termapi.AgentClaude, 104)
	r := newRig(t, a, b)
	ctx := t.Context()
	send := func(req termapi.SendRequest) func() error {
		return func() error { _, err := r.svc.Send(ctx, req); return err }
	}
	tid := a.pane.TerminalID
	refusal(t, r, termapi.ErrBadInput, "slash command", send(termapi.SendRequest{TerminalID: tid, Request: "\n  /model gpt-5\nplease"}))
	refusal(t, r, termapi.ErrBadInput, "empty", send(termapi.SendRequest{TerminalID: tid, Request: " \n"}))
	refusal(t, r, termapi.ErrBadInput, "exactly one", send(termapi.SendRequest{Request: "x"}))
	refusal(t, r, termapi.ErrBadInput, "exactly one", send(termapi.SendRequest{TerminalID: tid, SessionID: "session-1", Request: "x"}))
	refusal(t, r, termapi.ErrBadInput, "malformed", send(termapi.SendRequest{SessionID: "sess-1", Request: "x"}))
	refusal(t, r, termapi.ErrBadInput, "malformed", send(termapi.SendRequest{SessionID: "session-1;drop", Request: "x"}))
	refusal(t, r, termapi.ErrNotFound, "no session", send(termapi.SendRequest{SessionID: "session-20260101000000-abcdef12", Request: "x"}))
	refusal(t, r, termapi.ErrBadInput, "malformed", send(termapi.SendRequest{TerminalID: "terminal:v2:tmux:vim:s:0.0:1", Request: "x"}))
	refusal(t, r, termapi.ErrNotFound, "no live agent pane", send(termapi.SendRequest{TerminalID: "terminal:v2:tmux:codex:s:0.0:999", Request: "x"}))
	refusal(t, r, termapi.ErrBadInput, "inactivity timeout -1m0s is out of range", send(termapi.SendRequest{TerminalID: tid, Request: "x", InactivityTimeout: -time.Minute}))
	refusal(t, r, termapi.ErrBadInput, "longer than the hard timeout", send(termapi.SendRequest{TerminalID: tid, Request: "x", InactivityTimeout: time.Hour, HardTimeout: time.Minute}))

	a.set(func(f *fakeAgent) { f.activity = "working" })
	refusal(t, r, termapi.ErrRefused, "busy", send(termapi.SendRequest{TerminalID: tid, Request: "x"}))
	a.set(func(f *fakeAgent) { f.activity, f.dialog = "idle", true })
	refusal(t, r, termapi.ErrRefused, "dialog", send(termapi.SendRequest{TerminalID: tid, Request: "x"}))
	a.set(func(f *fakeAgent) {
		f.dialog, f.approval = false, &agents.ScreenApproval{Fingerprint: "fp", Approvable: true}
	})
	refusal(t, r, termapi.ErrRefused, "approval", send(termapi.SendRequest{TerminalID: tid, Request: "x"}))
	a.set(func(f *fakeAgent) { f.approval, f.draft = nil, "half-typed" })
	refusal(t, r, termapi.ErrRefused, "composer", send(termapi.SendRequest{TerminalID: tid, Request: "x"}))
	if _, err := r.st.SessionByThread(ctx, termapi.AgentCodex, a.thread); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused send bound a session: %v", err)
	}
	a.set(func(f *fakeAgent) { f.draft = "" })

	// Ambiguous: two processes claim one terminal id.
	dup := newFakeAgent(termapi.AgentCodex, 103)
	dup.pane.Key = "socket:/tmp/other:pane-id:%1"
	r.ft.agents = append(r.ft.agents, dup)
	refusal(t, r, termapi.ErrRefused, "ambiguous", send(termapi.SendRequest{TerminalID: tid, Request: "x"}))
	r.ft.agents = r.ft.agents[:2]

	// A second send while the Turn runs.
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: b.pane.TerminalID, Request: "work"})
	if err != nil {
		t.Fatal(err)
	}
	b.set(func(f *fakeAgent) { f.activity = "idle" }) // even if the screen looks idle
	refusal(t, r, termapi.ErrRefused, res.TurnID, send(termapi.SendRequest{SessionID: res.SessionID, Request: "more"}))
	refusal(t, r, termapi.ErrRefused, res.TurnID, send(termapi.SendRequest{TerminalID: b.pane.TerminalID, Request: "more"}))

	// The agent process changed under the Session.
	b.set(func(f *fakeAgent) { f.pane.Birth = "birth-2" })
	refusal(t, r, termapi.ErrRefused, "process in the pane changed", send(termapi.SendRequest{SessionID: res.SessionID, Request: "more"}))
}

func TestSubmissionFailuresAreNeverRetried(t *testing.T) {
	t.Run("not sent", func(t *testing.T) {
		a := newFakeAgent(termapi.AgentClaude, 110)
		a.sendErr = termapi.ErrInputNotSent
		r := newRig(t, a)
		res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
		if !errors.Is(err, termapi.ErrInputNotSent) || res.SubmissionOutcome != termapi.OutcomeNotSent || res.DoNotRetry {
			t.Fatalf("send = %+v, %v", res, err)
		}
		d, _ := r.st.GetDispatch(t.Context(), a.pane.Key)
		if d.Status != termapi.DispatchAborted || !d.SafeToRetry {
			t.Fatalf("ledger = %+v", d)
		}
		a.sendErr = nil
		if _, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"}); err != nil {
			t.Fatalf("send after a zero-input abort: %v", err)
		}
	})
	t.Run("uncertain blocks until closed", func(t *testing.T) {
		a := newFakeAgent(termapi.AgentClaude, 111)
		a.sendErr = termapi.ErrOutcomeUncertain
		r := newRig(t, a)
		res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
		if !errors.Is(err, termapi.ErrOutcomeUncertain) || res.SubmissionOutcome != termapi.OutcomeUncertain || !res.DoNotRetry {
			t.Fatalf("send = %+v, %v", res, err)
		}
		a.sendErr = nil
		refusal(t, r, termapi.ErrRefused, "owns the terminal", func() error {
			_, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
			return err
		})
		if _, err := r.svc.Close(t.Context(), res.TurnID, "checked the pane"); err != nil {
			t.Fatal(err)
		}
		if _, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"}); err != nil {
			t.Fatalf("send after close: %v", err)
		}
	})
	t.Run("codex draft never shown", func(t *testing.T) {
		a := newFakeAgent(termapi.AgentCodex, 112)
		r := newRig(t, a)
		r.svc.o.DraftTimeout = 50 * time.Millisecond
		a.set(func(f *fakeAgent) { f.sendErr = nil })
		// Text goes in, but the composer shows something else.
		r.ft.agents[0].acceptPrompts = false
		orig := r.ft
		_ = orig
		res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x\ny"})
		if err == nil || res.SubmissionOutcome != termapi.OutcomeNotAccepted {
			t.Fatalf("send = %+v, %v", res, err)
		}
		if keys := a.sentKeys(); len(keys) != 0 && keys[len(keys)-1] == "Enter" && !strings.Contains(err.Error(), "still in the composer") {
			t.Fatalf("keys = %v, err = %v", keys, err)
		}
	})
}

func TestApprovalApproveDone(t *testing.T) {
	r, a, res := pendingApproval(t, 120, agents.ScreenApproval{Fingerprint: "fp-1", Kind: "run_command", Command: "ls TOKEN=abcdefgh123", Approvable: true})
	ctx := t.Context()
	v := r.waitStatus(res.TurnID, termapi.TurnWaitingForOpenClaw)
	if v.Approval == nil || v.Approval.Fingerprint != "fp-1" || v.Approval.Command != "ls TOKEN=[REDACTED]" {
		t.Fatalf("approval = %+v", v.Approval)
	}
	w, err := r.svc.Wait(ctx, res.TurnID)
	if err != nil || w.Status != termapi.TurnWaitingForOpenClaw {
		t.Fatalf("send --wait returns on approval: %+v, %v", w, err)
	}
	if _, err := r.svc.Approve(ctx, res.TurnID, "fp-other"); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("approve with another fingerprint: %v", err)
	}
	// The prompt changes under the shown one: approving what was shown is
	// refused (whether or not the monitor has seen the new prompt yet).
	a.set(func(f *fakeAgent) {
		f.approval = &agents.ScreenApproval{Fingerprint: "fp-2", Kind: "run_command", Approvable: true}
	})
	if _, err := r.svc.Approve(ctx, res.TurnID, "fp-1"); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("approve a changed prompt: %v", err)
	}
	if got := a.sentKeys(); strings.Join(got, ",") != "Enter" {
		t.Fatalf("a refused approve pressed keys: %v", got)
	}
	r.until("the new prompt is reported", func() bool {
		v, _ := r.svc.Status(ctx, res.TurnID)
		return v.Approval != nil && v.Approval.Fingerprint == "fp-2"
	})
	if _, err := r.svc.Approve(ctx, res.TurnID, "fp-2"); err != nil {
		t.Fatal(err)
	}
	if got := a.sentKeys(); strings.Join(got, ",") != "Enter,y" {
		t.Fatalf("keys = %v", got)
	}
	a.finish("approved and done", false)
	if v := r.waitStatus(res.TurnID, termapi.TurnIdle); v.Result.Text != "approved and done" {
		t.Fatalf("turn = %+v", v)
	}
}

func TestCancel(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 130)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "long job"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Cancel(ctx, "turn-nope"); !errors.Is(err, termapi.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	a.set(func(f *fakeAgent) { f.dialog = true })
	if _, err := r.svc.Cancel(ctx, res.TurnID); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("cancel over a dialog: %v", err)
	}
	a.set(func(f *fakeAgent) { f.dialog = false })
	v, err := r.svc.Cancel(ctx, res.TurnID)
	if err != nil || v.Status != termapi.TurnCancelled {
		t.Fatalf("cancel = %+v, %v", v, err)
	}
	if got := a.sentKeys(); got[len(got)-1] != "C-c" {
		t.Fatalf("keys = %v", got)
	}
	if _, err := r.svc.Cancel(ctx, res.TurnID); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("second cancel: %v", err)
	}
	// A late completion does not revive a cancelled Turn.
	a.finish("late", false)
	if _, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "next"}); err != nil {
		t.Fatalf("send after cancel: %v", err)
	}
	if v, _ := r.svc.Status(ctx, res.TurnID); v.Status != termapi.TurnCancelled || v.Result != nil {
		t.Fatalf("cancelled turn = %+v", v)
	}
}

func TestStallRenewDone(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 140)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "slow", InactivityTimeout: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	v := r.waitStatus(res.TurnID, termapi.TurnStalled)
	if !strings.Contains(v.StalledReason, "no activity") {
		t.Fatalf("stalled = %+v", v)
	}
	if _, err := r.svc.Renew(ctx, res.TurnID, -1); !errors.Is(err, termapi.ErrBadInput) {
		t.Fatalf("renew -1: %v", err)
	}
	if _, err := r.svc.Renew(ctx, res.TurnID, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Renew(ctx, res.TurnID, 10); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("renew of a running turn: %v", err)
	}
	a.finish("slow reply", false)
	if v := r.waitStatus(res.TurnID, termapi.TurnIdle); v.Result.Text != "slow reply" {
		t.Fatalf("turn = %+v", v)
	}
}

func TestAgentDeath(t *testing.T) {
	t.Run("no completion: stalled", func(t *testing.T) {
		a := newFakeAgent(termapi.AgentClaude, 150)
		r := newRig(t, a)
		r.start(r.svc, hostpkg.Options{Recheck: 20 * time.Millisecond})
		res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
		if err != nil {
			t.Fatal(err)
		}
		a.set(func(f *fakeAgent) { f.alive = false })
		if v := r.waitStatus(res.TurnID, termapi.TurnStalled); !strings.Contains(v.StalledReason, "exited") {
			t.Fatalf("turn = %+v", v)
		}
	})
	t.Run("incomplete inventory proves nothing", func(t *testing.T) {
		a := newFakeAgent(termapi.AgentClaude, 151)
		r := newRig(t, a)
		res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
		if err != nil {
			t.Fatal(err)
		}
		r.ft.mu.Lock()
		r.ft.failDiscover = errors.New("tmux timed out")
		r.ft.mu.Unlock()
		m := &monitor{h: &hostpkg.Host{}, s: r.svc, turnID: res.TurnID, pane: a.pane, agent: fakeReader{r.ft}}
		stop, _, err := m.check(t.Context(), hostpkg.Wake{})
		if stop || err != nil {
			t.Fatalf("check with a failed inventory: stop=%v err=%v", stop, err)
		}
		if v, _ := r.svc.Status(t.Context(), res.TurnID); v.Status != termapi.TurnWaitingForAgent {
			t.Fatalf("turn = %+v", v)
		}
	})
	t.Run("completion written before death: done", func(t *testing.T) {
		a := newFakeAgent(termapi.AgentCodex, 152)
		r := newRig(t, a)
		res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
		if err != nil {
			t.Fatal(err)
		}
		a.finish("last words", false)
		a.set(func(f *fakeAgent) { f.alive = false })
		r.start(r.svc, hostpkg.Options{})
		if v := r.waitStatus(res.TurnID, termapi.TurnIdle); v.Result.Text != "last words" {
			t.Fatalf("turn = %+v", v)
		}
	})
}

func TestHostRestartResumesWithOneCompletion(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 160)
	r := newRig(t, a)
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	// A host that died (kill -9) holds the lease until it expires.
	now := time.Now()
	if _, err := r.st.ClaimWork(ctx, store.LeaseMonitor, res.TurnID, "dead-host", now.UnixMilli(), now.Add(300*time.Millisecond).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	a.finish("after restart", false)
	// Two new hosts race for it; the store admits one monitor and one
	// completion.
	s1, s2 := r.service(), r.service()
	r.start(s1, hostpkg.Options{Rescan: 20 * time.Millisecond})
	r.start(s2, hostpkg.Options{Rescan: 20 * time.Millisecond})
	r.svc = s1
	if v := r.waitStatus(res.TurnID, termapi.TurnIdle); v.Result.Text != "after restart" {
		t.Fatalf("turn = %+v", v)
	}
	if n := completionClaims(t, r.st, res.TurnID); n != 1 {
		t.Fatalf("%d completions, want 1", n)
	}
}

// TestHostTakesOverADeadProcessAtOnce: a monitor lease held by a process
// the store's registry proves dead (this host, its pid now another process)
// is freed when a new host starts, long before the lease would expire.
func TestHostTakesOverADeadProcessAtOnce(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 165)
	r := newRig(t, a)
	ctx := t.Context()
	self := owner.Self()
	if self.Host == "" {
		t.Skip("proving a process dead needs /proc")
	}
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	reg := r.st
	dead := self.Process("terminal host", 1)
	dead.ID, dead.Start = "killed-host", "another-boot:1" // our pid, another incarnation
	if err := reg.Heartbeat(ctx, dead); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := r.st.ClaimWork(ctx, store.LeaseMonitor, res.TurnID, dead.ID, now.UnixMilli(), now.Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	a.finish("after kill -9", false)
	r.start(r.svc, hostpkg.Options{Rescan: time.Hour, LeaseTTL: time.Hour})
	if v := r.waitStatus(res.TurnID, termapi.TurnIdle); v.Result.Text != "after kill -9" {
		t.Fatalf("turn = %+v", v)
	}
	ps, err := reg.Processes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.ID == dead.ID {
			t.Errorf("the dead process is still registered: %+v", p)
		}
	}
}

func TestHumanTypingBetweenTurns(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 170)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "one"})
	if err != nil {
		t.Fatal(err)
	}
	a.finish("one done", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	// Wait until the checkpoint is on the Session.
	r.until("the session has a checkpoint", func() bool {
		s, _ := r.st.GetTermSession(ctx, res.SessionID)
		return len(s.Binding.Checkpoint) > 0
	})
	a.human("what did you just do?")
	refusal(t, r, termapi.ErrRefused, "someone typed", func() error {
		_, err := r.svc.Send(ctx, termapi.SendRequest{SessionID: res.SessionID, Request: "two"})
		return err
	})
	list, _ := r.svc.List(ctx)
	if acts := list.Terminals[0].AvailableActions; len(acts) != 1 || acts[0].Scope != ScopeTerminalFollowCurrent {
		t.Fatalf("actions after human input = %+v", acts)
	}
	res2, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "two"})
	if err != nil || res2.SessionID != res.SessionID {
		t.Fatalf("follow-current send = %+v, %v", res2, err)
	}
	// A human switching threads: the old session is refused.
	a.finish("two done", false)
	r.waitStatus(res2.TurnID, termapi.TurnIdle)
	a.set(func(f *fakeAgent) { f.thread = "thread-other" })
	refusal(t, r, termapi.ErrRefused, "foreground thread changed", func() error {
		_, err := r.svc.Send(ctx, termapi.SendRequest{SessionID: res.SessionID, Request: "three"})
		return err
	})
	// Following the pane waits for a choice (issue 17): adopt the new
	// thread, or keep the old Session detached.
	refusal(t, r, termapi.ErrRefused, "adopt-thread", func() error {
		_, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "three"})
		return err
	})
	if _, err := r.svc.Detach(ctx, res.SessionID, "kept detached"); err != nil {
		t.Fatal(err)
	}
	res3, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "three"})
	if err != nil || res3.SessionID == res.SessionID {
		t.Fatalf("follow-current after the old session was detached = %+v, %v", res3, err)
	}
}

func TestStatusCloseRespondBadInput(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 180)
	r := newRig(t, a)
	ctx := t.Context()
	for _, id := range []string{"", "turn-", "job-1", "turn-x/y"} {
		if _, err := r.svc.Status(ctx, id); !errors.Is(err, termapi.ErrBadInput) {
			t.Fatalf("status %q: %v", id, err)
		}
	}
	if _, err := r.svc.Status(ctx, "turn-20260101T000000-abcdef12"); !errors.Is(err, termapi.ErrNotFound) {
		t.Fatalf("status unknown: %v", err)
	}
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Close(ctx, res.TurnID, ""); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("close of a running turn: %v", err)
	}
	if _, err := r.svc.Respond(ctx, res.TurnID, "answer"); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("respond to a running turn: %v", err)
	}
	if _, err := r.svc.Approve(ctx, res.TurnID, ""); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("approve without a prompt: %v", err)
	}
}

func TestRespondContinuesTheTurn(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 190)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{Recheck: 20 * time.Millisecond})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x", Principal: "user:alice"})
	if err != nil {
		t.Fatal(err)
	}
	a.set(func(f *fakeAgent) { f.approval = &agents.ScreenApproval{Fingerprint: "q", Approvable: false} })
	r.waitStatus(res.TurnID, termapi.TurnWaitingForOpenClaw)
	if _, err := r.svc.Respond(ctx, res.TurnID, "use the other file"); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("respond over a prompt: %v", err)
	}
	// The human dismissed the prompt and the agent asks in text: the
	// monitor sees the prompt gone (the Turn returns to the agent); a
	// blocked Turn is answered with respond.
	a.set(func(f *fakeAgent) { f.approval, f.activity = nil, "idle" })
	r.waitStatus(res.TurnID, termapi.TurnWaitingForAgent)
	turn, _ := r.st.GetTurn(ctx, res.TurnID)
	turn.Status = termapi.TurnWaitingForOpenClaw
	if err := r.st.WriteTurn(ctx, store.TurnWrite{Turn: turn}); err != nil {
		t.Fatal(err)
	}
	out, err := r.svc.Respond(ctx, res.TurnID, "use the other file")
	if err != nil || out.TurnID != res.TurnID || out.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("respond = %+v, %v", out, err)
	}
	r.svc.startMonitor(t.Context(), res.TurnID)
	a.finish("used it", false)
	if v := r.waitStatus(res.TurnID, termapi.TurnIdle); v.Result.Text != "used it" || v.Principal != "user:alice" {
		t.Fatalf("turn = %+v, want the reply and the sender's principal", v)
	}
}

// TestSendRecordsThePrincipal: the MCP caller named in a send is stored on the
// Turn, reported by Status and kept through the monitor's writes; a
// malformed principal is refused before anything changes.
func TestSendRecordsThePrincipal(t *testing.T) {
	a, b := newFakeAgent(termapi.AgentCodex, 191), newFakeAgent(termapi.AgentClaude, 192)
	r := newRig(t, a, b)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	c := r.svc

	for _, p := range []string{"user:al\nice", strings.Repeat("p", 257)} {
		refusal(t, r, termapi.ErrBadInput, "principal", func() error {
			_, err := c.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x", Principal: p})
			return err
		})
	}
	res, err := c.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "mine", Principal: "user:alice"})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := r.st.GetTurn(ctx, res.TurnID)
	if err != nil || stored.Principal != "user:alice" {
		t.Fatalf("stored turn = %+v, %v; want principal user:alice", stored, err)
	}
	if v, err := c.Status(ctx, res.TurnID); err != nil || v.Principal != "user:alice" {
		t.Errorf("status = %+v, %v; want principal user:alice", v, err)
	}
	a.finish("done", false)
	if v := r.waitStatus(res.TurnID, termapi.TurnIdle); v.Principal != "user:alice" {
		t.Fatalf("finished turn = %+v, want principal user:alice", v)
	}
	// A send with no principal (the CLI, the plugin) records none.
	anon, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: b.pane.TerminalID, Request: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := r.svc.Status(ctx, anon.TurnID); err != nil || v.Principal != "" {
		t.Fatalf("cli turn = %+v, %v; want no principal", v, err)
	}
}

func TestMonitorsStopWithHost(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 200)
	r := newRig(t, a)
	h := r.start(r.svc, hostpkg.Options{})
	if _, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"}); err != nil {
		t.Fatal(err)
	}
	r.until("a monitor runs", func() bool { return h.Monitoring() == 1 })
	r.stop()
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		t.Fatal("host did not stop")
	}
	if h.Monitoring() != 0 {
		t.Fatalf("%d monitors left after Run returned", h.Monitoring())
	}
}

func TestDeadSenderIsNeverResent(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 210)
	r := newRig(t, a)
	ctx := t.Context()
	// A sender that died after typing: the Turn is text_injected, prepared
	// long ago, and its lease expired.
	sess := &store.TermSession{SessionID: "session-dead-sender", Agent: termapi.AgentCodex, Workspace: "/w", Status: store.SessionBound,
		Lineage: store.Lineage{CreatedBy: "attach"}, CreatedAt: 1, UpdatedAt: 1,
		Binding: &store.Binding{BindingID: "binding-x", Generation: 1, TerminalID: a.pane.TerminalID, TerminalKey: a.pane.Key,
			NativeThreadID: a.thread, NativeProcess: store.NativeProcess{PID: a.pane.PID, ProcessBirth: a.pane.Birth}}}
	if err := r.st.CreateTermSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	ctrl, _ := json.Marshal(a.pane)
	old := time.Now().Add(-2 * senderLeaseTTL).UnixMilli()
	turn := &store.Turn{TurnID: "turn-dead-sender", SessionID: sess.SessionID, Agent: termapi.AgentCodex, TerminalBindingID: "binding-x",
		TerminalBindingGeneration: 1, Status: termapi.TurnCreated, CreatedAt: old, UpdatedAt: old,
		Takeover: store.Takeover{TerminalID: a.pane.TerminalID, TerminalKey: a.pane.Key, TerminalControl: ctrl, AgentPID: a.pane.PID,
			ProcessBirth: a.pane.Birth, RequestText: "x", StartedAt: old, InactivityTimeoutMinutes: 60, HardTimeoutMinutes: 720,
			Submission: store.Submission{MessageID: "msg-1", MessageType: MsgTask, Status: termapi.DispatchTextInjected, PreparedAt: old}}}
	d := &store.Dispatch{TerminalKey: a.pane.Key, GenerationID: "g1", SessionID: sess.SessionID, TurnID: turn.TurnID, MessageID: "msg-1",
		Status: termapi.DispatchPrepared, BindingID: "binding-x", BindingGeneration: 1, PreparedAt: old}
	if err := r.st.CreateTurn(ctx, store.TurnCreate{Turn: turn, Dispatch: d}); err != nil {
		t.Fatal(err)
	}
	r.start(r.svc, hostpkg.Options{})
	v := r.waitStatus(turn.TurnID, termapi.TurnFailed)
	if v.SubmissionOutcome != termapi.OutcomeUncertain {
		t.Fatalf("turn = %+v", v)
	}
	if keys := a.sentKeys(); len(keys) != 0 {
		t.Fatalf("keys sent for a dead sender's turn: %v", keys)
	}
	if got, _ := r.st.GetDispatch(ctx, a.pane.Key); got.Status != termapi.DispatchUncertain {
		t.Fatalf("ledger = %+v", got)
	}
	refusal(t, r, termapi.ErrRefused, "owns the terminal", func() error {
		_, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "y"})
		return err
	})
}

func TestMalformedSessionFileIsADiagnosticNeverACompletion(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 220)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{Recheck: 20 * time.Millisecond})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	a.set(func(f *fakeAgent) {
		f.scanErr = errors.New("invalid_rollout_jsonl: line ending at byte 99 token=sk-abcdefghijklmnopqrst")
	})
	a.finish("must not be reported while the file is unreadable", false)
	r.until("the diagnostic is recorded", func() bool {
		v, _ := r.svc.Status(ctx, res.TurnID)
		return v.DetectorDiagnostic != ""
	})
	v, _ := r.svc.Status(ctx, res.TurnID)
	if v.Status != termapi.TurnWaitingForAgent || v.Result != nil || strings.Contains(v.DetectorDiagnostic, "sk-abcdefghijklmnopqrst") {
		t.Fatalf("turn with an unreadable session file = %+v", v)
	}
	a.set(func(f *fakeAgent) { f.scanErr = nil })
	if v := r.waitStatus(res.TurnID, termapi.TurnIdle); v.Result.Text != "must not be reported while the file is unreadable" {
		t.Fatalf("turn = %+v", v)
	}
}

// closedOutput is fake terminals whose pane-output watch ends at once (a
// control client that exited).
type closedOutput struct {
	*fakeTerminals
	captures atomic.Int64
}

func (c *closedOutput) Capture(ctx context.Context, p agents.Pane) (string, error) {
	c.captures.Add(1)
	return c.fakeTerminals.Capture(ctx, p)
}

func (c *closedOutput) WatchOutput(context.Context, agents.Pane) (<-chan struct{}, error) {
	ch := make(chan struct{})
	close(ch)
	return ch, nil
}

func TestEndedOutputWatchDoesNotSpin(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 230)
	r := newRig(t, a)
	co := &closedOutput{fakeTerminals: r.ft}
	svc := NewService(Options{Store: r.st, Terminals: co, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}}, DraftTimeout: time.Second})
	r.svc = svc
	h := r.start(svc, hostpkg.Options{})
	res, err := svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	r.until("a monitor runs", func() bool { return h.Monitoring() == 1 })
	before := co.captures.Load()
	select {
	case <-time.After(300 * time.Millisecond):
	case <-t.Context().Done():
	}
	if n := co.captures.Load() - before; n > 5 {
		t.Fatalf("%d screen captures in 300 ms after the output watch ended: the monitor spins", n)
	}
	a.finish("ok", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
}

// A Session re-bound after the monitor's look but before its completion
// claim: the claim is refused in its own transaction and the Turn stalls,
// so a completion from the context the Session left is never recorded.
func TestCompletionFencedByBinding(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 153)
	r := newRig(t, a)
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x", OriginSession: "agent:main:s1"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	lease, err := r.st.ClaimWork(ctx, store.LeaseMonitor, res.TurnID, "o", now.UnixMilli(), now.Add(time.Minute).UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	turn, err := r.st.GetTurn(ctx, res.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	rebind(t, r.st, res.SessionID)
	m := &monitor{h: &hostpkg.Host{}, s: r.svc, turnID: res.TurnID, pane: a.pane, agent: fakeReader{r.ft}, lease: lease}
	if err := m.complete(ctx, turn, agents.Completion{Outcome: "completed", Text: "late reply", ID: "c1"}); err != nil {
		t.Fatal(err)
	}
	v, err := r.svc.Status(ctx, res.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != termapi.TurnStalled || v.Result != nil {
		t.Fatalf("turn = %+v", v)
	}
	if _, err := r.st.GetCompletionClaim(ctx, res.TurnID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("completion claim after a re-bind: %v", err)
	}
	if cbs, _ := r.st.TurnCallbacks(ctx, res.TurnID, 10); len(cbs) != 0 {
		t.Fatalf("callbacks after a re-bind: %+v", cbs)
	}
}
