package terminal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/ids"
	"github.com/clawconnect/clawconnect/internal/terminal/proc"
	"github.com/clawconnect/clawconnect/termapi"
)

// The fake's native thread controls: /clear and /resume <id>, proven on
// its one version.
func (r fakeReader) ThreadPlan(_ context.Context, _ agents.Pane, kind, thread string) (string, []string, error) {
	if kind == store.TransitionResumeThread {
		return "9.9.9", []string{"/resume " + thread}, nil
	}
	return "9.9.9", []string{"/clear"}, nil
}

func (r fakeReader) Threads(_ context.Context, p agents.Pane) ([]agents.NativeThread, error) {
	a := r.agentOf(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []agents.NativeThread
	for i, id := range a.history {
		out = append([]agents.NativeThread{{ID: id, Title: "prompt of " + id, UpdatedAt: int64(i + 1)}}, out...)
	}
	return out, nil
}

const (
	fakeThreadA = "0a1b2c3d-0000-4000-8000-00000000000a"
	fakeThreadB = "0a1b2c3d-0000-4000-8000-00000000000b"
)

func row(t *testing.T, r *rig) termapi.TerminalRow {
	t.Helper()
	list, err := r.svc.List(t.Context())
	if err != nil || len(list.Terminals) != 1 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	return list.Terminals[0]
}

func TestNewThreadAdvancesTheGenerationAndTheNextSendStartsThere(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 401)
	a.thread = fakeThreadA
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "first"})
	if err != nil {
		t.Fatal(err)
	}
	a.finish("first done", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	if got := row(t, r); got.BindingGeneration != 1 || got.SessionID != res.SessionID || got.ManagementState != "managed" {
		t.Fatalf("row before = %+v", got)
	}
	before, _ := r.st.SessionTurns(ctx, res.SessionID, 10)

	v, err := r.svc.NewThread(ctx, a.pane.TerminalID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != store.TransitionCommitted || v.Generation != 2 || v.FromSessionID != res.SessionID || v.SessionID == res.SessionID ||
		v.ThreadID == fakeThreadA || v.ThreadID == "" || v.FromThreadID != fakeThreadA {
		t.Fatalf("transition = %+v", v)
	}
	// No Turn was created; the old Session is detached.
	after, _ := r.st.SessionTurns(ctx, res.SessionID, 10)
	if len(after) != len(before) {
		t.Fatalf("the transition created a turn: %d -> %d", len(before), len(after))
	}
	if turns, _ := r.st.SessionTurns(ctx, v.SessionID, 10); len(turns) != 0 {
		t.Fatalf("the new session has turns: %+v", turns)
	}
	old, _ := r.st.GetTermSession(ctx, res.SessionID)
	if old.Status != store.SessionDetached {
		t.Fatalf("old session = %+v", old)
	}
	got := row(t, r)
	if got.BindingGeneration != 2 || got.SessionID != v.SessionID || got.NativeThreadID != v.ThreadID || got.Transition != nil {
		t.Fatalf("row after = %+v", got)
	}
	res2, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "second"})
	if err != nil {
		t.Fatal(err)
	}
	turn, _ := r.st.GetTurn(ctx, res2.TurnID)
	if res2.SessionID != v.SessionID || turn.TerminalBindingGeneration != 2 || turn.NativeThreadID != v.ThreadID {
		t.Fatalf("first turn in the new thread = %+v (session %s)", turn, res2.SessionID)
	}
	// The exact Session of the old thread is gone from this pane.
	if _, err := r.svc.Send(ctx, termapi.SendRequest{SessionID: res.SessionID, Request: "x"}); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("send to the left session: %v", err)
	}
}

func TestTransitionRefusedWhileATurnRunsOrWithBadInput(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 402)
	a.thread = fakeThreadA
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	for _, c := range []struct {
		term, thread string
		want         error
	}{{"nope", fakeThreadB, termapi.ErrBadInput}, {a.pane.TerminalID, "0a1b2c3d", termapi.ErrBadInput}, {a.pane.TerminalID, "../x", termapi.ErrBadInput},
		{a.pane.TerminalID, fakeThreadB, termapi.ErrNotFound}} {
		if _, err := r.svc.ResumeThread(ctx, c.term, c.thread); !errors.Is(err, c.want) {
			t.Fatalf("resume %q %q: %v, want %v", c.term, c.thread, err, c.want)
		}
	}
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "long job"})
	if err != nil {
		t.Fatal(err)
	}
	// The screen says busy; a transition is refused before anything is
	// recorded, and with the screen idle the store still refuses.
	if _, err := r.svc.NewThread(ctx, a.pane.TerminalID); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("new-thread while busy: %v", err)
	}
	a.set(func(f *fakeAgent) { f.activity = "idle" })
	_, err = r.svc.ClearThread(ctx, a.pane.TerminalID)
	if !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), res.TurnID) {
		t.Fatalf("clear-thread while a Turn runs: %v", err)
	}
	if strings.Contains(strings.Join(a.sentKeys(), ","), "Escape") || a.thread != fakeThreadA {
		t.Fatalf("the refused transition touched the pane: keys %v thread %s", a.sentKeys(), a.thread)
	}
	ts := r.st
	if open, _ := ts.OpenTransitions(ctx, 10); len(open) != 0 {
		t.Fatalf("open transitions after refusals: %+v", open)
	}
}

func TestCallbackPreparedBeforeATransitionIsRefusedAfterIt(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 403)
	a.thread = fakeThreadA
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	turnID, cb := completedTurn(t, r, a, "agent:main:s1", "done")
	// An undelivered callback blocks the transition.
	if _, err := r.svc.NewThread(ctx, a.pane.TerminalID); !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), cb.MessageID) {
		t.Fatalf("new-thread with an undelivered callback: %v", err)
	}
	cbs := r.st
	claimed, err := cbs.ClaimCallback(ctx, cb.MessageID, "test", nowMs(), nowMs()+60000)
	if err != nil {
		t.Fatal(err)
	}
	claimed.Status, claimed.DeliveredAt, claimed.LeaseUntil = termapi.CallbackDelivered, nowMs(), 0
	if err := cbs.SaveCallback(ctx, claimed); err != nil {
		t.Fatal(err)
	}
	// A callback prepared for the old binding before the transition…
	turn, _ := r.st.GetTurn(ctx, turnID)
	msg, err := newMessage(turn, actorOf(turn.Agent), ActorOpenClaw, MsgProgress, "late progress", nowMs())
	if err != nil {
		t.Fatal(err)
	}
	late := callbackID(turnID, "late")
	hook := prepareCallback(turn, msg, late, "progress", nil)
	v, err := r.svc.NewThread(ctx, a.pane.TerminalID)
	if err != nil || v.Status != store.TransitionCommitted {
		t.Fatalf("new-thread = %+v, %v", v, err)
	}
	// …lands after it: refused, logged on its historical Turn only.
	turn, _ = r.st.GetTurn(ctx, turnID)
	if err := r.st.WriteTurn(ctx, store.TurnWrite{Turn: turn, Also: hook}); err != nil {
		t.Fatal(err)
	}
	if _, err := cbs.GetCallback(ctx, late); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the pre-transition callback was queued: %v", err)
	}
	evs, _ := r.st.TurnEvents(ctx, turnID, 0, 100)
	if last := evs[len(evs)-1]; last.Type != "callback_refused" || !strings.Contains(string(last.Data), late) {
		t.Fatalf("last event of the historical turn = %+v", last)
	}
	if turns, _ := r.st.SessionTurns(ctx, v.SessionID, 10); len(turns) != 0 {
		t.Fatalf("the new context got turns: %+v", turns)
	}
}

func TestHumanThreadSwitchIsAConflictUntilAdopted(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 404)
	a.thread = fakeThreadA
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "first"})
	if err != nil {
		t.Fatal(err)
	}
	a.finish("ok", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	if _, err := r.svc.AdoptThread(ctx, a.pane.TerminalID); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("adopt without a switch: %v", err)
	}
	a.set(func(f *fakeAgent) { f.thread = fakeThreadB }) // a human typed /clear
	got := row(t, r)
	if got.ManagementState != "conflict" || got.Conflict == nil || got.Conflict.SessionID != res.SessionID || len(got.AvailableActions) != 0 ||
		len(got.Conflict.Choices) != 2 || !strings.Contains(got.Conflict.Choices[0], "adopt-thread") || !strings.Contains(got.Conflict.Choices[1], "detach") {
		t.Fatalf("row after a human switch = %+v", got)
	}
	refusal(t, r, termapi.ErrRefused, "adopt-thread", func() error {
		_, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
		return err
	})
	if _, err := r.svc.NewThread(ctx, a.pane.TerminalID); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("new-thread over a conflict: %v", err)
	}
	v, err := r.svc.AdoptThread(ctx, a.pane.TerminalID)
	if err != nil || v.Status != store.TransitionCommitted || v.ThreadID != fakeThreadB || v.Generation != 2 {
		t.Fatalf("adopt = %+v, %v", v, err)
	}
	sess, _ := r.st.GetTermSession(ctx, v.SessionID)
	if sess.Lineage.CreatedBy != "human_observed" || sess.Lineage.PreviousSessionID != res.SessionID {
		t.Fatalf("adopted session = %+v", sess)
	}
	if got := row(t, r); got.ManagementState != "managed" || got.BindingGeneration != 2 || len(got.AvailableActions) == 0 {
		t.Fatalf("row after adopt = %+v", got)
	}
	res2, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "second"})
	if err != nil || res2.SessionID != v.SessionID {
		t.Fatalf("send after adopt = %+v, %v", res2, err)
	}
}

func TestResumeReactivatesTheThreadsSession(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 405)
	a.thread = fakeThreadA
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "in A"})
	if err != nil {
		t.Fatal(err)
	}
	a.finish("ok", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	v1, err := r.svc.NewThread(ctx, a.pane.TerminalID)
	if err != nil {
		t.Fatal(err)
	}
	th, err := r.svc.Threads(ctx, a.pane.TerminalID)
	if err != nil || len(th.Threads) != 1 || th.Threads[0].ID != fakeThreadA || th.Threads[0].SessionID != res.SessionID || th.Threads[0].SessionStatus != store.SessionDetached {
		t.Fatalf("threads = %+v, %v", th, err)
	}
	if _, err := r.svc.ResumeThread(ctx, a.pane.TerminalID, v1.ThreadID); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("resume of the current thread: %v", err)
	}
	v2, err := r.svc.ResumeThread(ctx, a.pane.TerminalID, strings.ToUpper(fakeThreadA))
	if err != nil || v2.Status != store.TransitionCommitted || v2.SessionID != res.SessionID || v2.Generation != 3 || v2.ThreadID != fakeThreadA {
		t.Fatalf("resume = %+v, %v", v2, err)
	}
	if a.thread != fakeThreadA {
		t.Fatalf("the pane was not switched: %s", a.thread)
	}
	got := row(t, r)
	if got.SessionID != res.SessionID || got.BindingGeneration != 3 {
		t.Fatalf("row after resume = %+v", got)
	}
	res2, err := r.svc.Send(ctx, termapi.SendRequest{SessionID: res.SessionID, Request: "back in A"})
	if err != nil {
		t.Fatalf("session_exact send to the reactivated session: %v", err)
	}
	if turn, _ := r.st.GetTurn(ctx, res2.TurnID); turn.TerminalBindingGeneration != 3 {
		t.Fatalf("turn generation = %d", turn.TerminalBindingGeneration)
	}
}

// deadOwner returns the incarnation of a process that has exited, as
// earlier versions recorded a transition's owner.
func deadOwner(t *testing.T) string {
	_, p := exitedProcess(t)
	return p.Incarnation()
}

func TestADeadOwnersTransitionIsRecoveredNeverHalfApplied(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 406)
	a.thread = fakeThreadA
	r := newRig(t, a)
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "first"})
	if err != nil {
		t.Fatal(err)
	}
	a.finish("ok", false)
	r.start(r.svc, hostpkg.Options{})
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	sess, _ := r.st.GetTermSession(ctx, res.SessionID)
	ts := r.st
	// A process died after typing /clear, before verifying: the pane did
	// switch, so recovery proves and commits it.
	prepare := func(id string) *store.Transition {
		tr := &store.Transition{TransitionID: id, Kind: store.TransitionClearThread, Agent: termapi.AgentClaude, TerminalID: a.pane.TerminalID,
			TerminalKey: a.pane.Key, PID: a.pane.PID, ProcessBirth: a.pane.Birth, Workspace: "/w", FromSessionID: sess.SessionID,
			FromBindingID: sess.Binding.BindingID, FromGeneration: sess.Binding.Generation, FromThreadID: sess.Binding.NativeThreadID,
			TargetSessionID: ids.Session(time.Now()), ToGeneration: sess.Binding.Generation + 1, Plan: []string{"/clear"},
			Owner: deadOwner(t), PreparedAt: nowMs(), Status: store.TransitionPrepared, UpdatedAt: nowMs()}
		if err := ts.PrepareTransition(ctx, tr); err != nil {
			t.Fatal(err)
		}
		for _, st := range []string{store.TransitionDispatching, store.TransitionSubmitted} {
			tr.Status = st
			if err := ts.AdvanceTransition(ctx, tr); err != nil {
				t.Fatal(err)
			}
		}
		return tr
	}
	tr := prepare("transition-crash-done")
	a.set(func(f *fakeAgent) { f.thread = fakeThreadB })
	if n, err := r.svc.RecoverTransitions(ctx); err != nil || n != 1 {
		t.Fatalf("recover = %d, %v", n, err)
	}
	got, _ := ts.GetTransition(ctx, tr.TransitionID)
	newSess, err := r.st.GetTermSession(ctx, tr.TargetSessionID)
	if got.Status != store.TransitionCommitted || err != nil || newSess.Binding.NativeThreadID != fakeThreadB || newSess.Binding.Generation != 2 {
		t.Fatalf("recovered = %+v, session %+v, %v", got, newSess, err)
	}
	// Again from the new binding; this time the pane did not switch: the
	// record becomes uncertain, the terminal stays blocked with the
	// recovery actions shown, and abort frees it with no Session changed.
	sess = newSess
	tr = prepare("transition-crash-unproven")
	if _, err := r.svc.RecoverTransitions(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = ts.GetTransition(ctx, tr.TransitionID)
	if got.Status != store.TransitionUncertain {
		t.Fatalf("unproven transition = %+v", got)
	}
	row1 := row(t, r)
	if row1.Transition == nil || row1.Transition.Status != store.TransitionUncertain || len(row1.Transition.RecoveryActions) != 2 ||
		len(row1.AvailableActions) != 0 || !strings.Contains(row1.Reason, tr.TransitionID) {
		t.Fatalf("row with an uncertain transition = %+v", row1)
	}
	if _, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"}); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("send during an uncertain transition: %v", err)
	}
	if _, err := r.svc.ResolveTransition(ctx, tr.TransitionID, true); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("adopt of an unproven transition: %v", err)
	}
	if s, _ := r.st.GetTermSession(ctx, sess.SessionID); s.Status != store.SessionBound || s.Revision != sess.Revision {
		t.Fatalf("the uncertain transition changed the session: %+v", s)
	}
	v, err := r.svc.ResolveTransition(ctx, tr.TransitionID, false)
	if err != nil || v.Status != store.TransitionAborted {
		t.Fatalf("abort = %+v, %v", v, err)
	}
	if got := row(t, r); got.Transition != nil || len(got.AvailableActions) == 0 || got.BindingGeneration != 2 {
		t.Fatalf("row after abort = %+v", got)
	}
	if _, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "after"}); err != nil {
		t.Fatalf("send after abort: %v", err)
	}
}

func TestTheHostsScanRecoversADeadOwnersTransition(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 407)
	a.thread = fakeThreadA
	r := newRig(t, a)
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "first"})
	if err != nil {
		t.Fatal(err)
	}
	a.finish("ok", false)
	sess, _ := r.st.GetTermSession(ctx, res.SessionID)
	ts := r.st
	tr := &store.Transition{TransitionID: "transition-host-scan", Kind: store.TransitionNewThread, Agent: termapi.AgentClaude, TerminalID: a.pane.TerminalID,
		TerminalKey: a.pane.Key, PID: a.pane.PID, ProcessBirth: a.pane.Birth, Workspace: "/w", FromSessionID: sess.SessionID,
		FromBindingID: sess.Binding.BindingID, FromGeneration: 1, FromThreadID: fakeThreadA, TargetSessionID: ids.Session(time.Now()),
		ToGeneration: 2, Plan: []string{"/clear"}, Owner: deadOwner(t), PreparedAt: nowMs(), Status: store.TransitionPrepared, UpdatedAt: nowMs()}
	// A first host follows the Turn to its end and stops (a crash leaves
	// no host running); the next one starts after the owner died.
	r.start(r.svc, hostpkg.Options{})
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	r.stop()
	<-r.done
	if err := ts.PrepareTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	tr.Status = store.TransitionDispatching
	if err := ts.AdvanceTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	a.set(func(f *fakeAgent) { f.thread = fakeThreadB })
	r.start(r.svc, hostpkg.Options{Rescan: 20 * time.Millisecond})
	r.until("the host's scan settles the transition", func() bool {
		got, err := ts.GetTransition(ctx, tr.TransitionID)
		return err == nil && got.Status == store.TransitionCommitted
	})
	if got := row(t, r); got.BindingGeneration != 2 || got.NativeThreadID != fakeThreadB || got.Transition != nil {
		t.Fatalf("row after the host's recovery = %+v", got)
	}
}

// After a new-thread, Codex may close the old thread's rollout before the
// new thread has one: its files then name the new thread only by its
// writer lock. The next sends (follow and exact) must still land in the
// Session the transition made, not in a second one that can never bind
// the thread.
func TestSendAfterNewThreadWithOnlyALockUsesTheTransitionsSession(t *testing.T) {
	for _, agent := range []string{termapi.AgentCodex, termapi.AgentClaude} {
		t.Run(agent, func(t *testing.T) {
			a := newFakeAgent(agent, 411)
			a.thread = fakeThreadA
			r := newRig(t, a)
			r.start(r.svc, hostpkg.Options{})
			ctx := t.Context()
			first, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "first"})
			if err != nil {
				t.Fatal(err)
			}
			a.finish("first done", false)
			r.waitStatus(first.TurnID, termapi.TurnIdle)
			v, err := r.svc.NewThread(ctx, a.pane.TerminalID)
			if err != nil {
				t.Fatal(err)
			}
			a.set(func(f *fakeAgent) { f.lockOnly = true })
			if got := row(t, r); got.SessionID != v.SessionID || got.NativeThreadID != v.ThreadID || got.ManagementState != "managed" {
				t.Fatalf("row with only a lock = %+v, want session %s on thread %s", got, v.SessionID, v.ThreadID)
			}
			// An exact send to the new Session is not refused as a thread
			// change.
			if _, _, _, id, err := r.svc.exactTarget(ctx, v.SessionID); err != nil || id.ThreadID != v.ThreadID {
				t.Fatalf("exact target with only a lock: %v (thread %q)", err, id.ThreadID)
			}
			res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "second"})
			if err != nil {
				t.Fatal(err)
			}
			turn, _ := r.st.GetTurn(ctx, res.TurnID)
			if res.SessionID != v.SessionID || turn.NativeThreadID != v.ThreadID || turn.TerminalBindingGeneration != 2 {
				t.Fatalf("follow send went to session %s (turn %+v), want %s at generation 2 on %s", res.SessionID, turn, v.SessionID, v.ThreadID)
			}
			a.finish("second done", false)
			r.waitStatus(res.TurnID, termapi.TurnIdle)
			list, err := r.st.SessionsByTerminal(ctx, a.pane.Key)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 2 {
				t.Fatalf("the terminal has %d Sessions, want 2 (the left one and the transition's)", len(list))
			}
		})
	}
}

// exitedProcess starts and reaps a process, returning its identity as a
// transition on this host would have recorded it, and what /proc said of
// it while it ran.
func exitedProcess(t *testing.T) (owner.Identity, proc.Process) {
	t.Helper()
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p, err := proc.Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	self := owner.Self()
	boot, _, _ := strings.Cut(self.Start, ":")
	return owner.Identity{ID: "exited", Host: self.Host, PID: int64(p.PID), Start: fmt.Sprintf("%s:%d", boot, p.StartTicks)}, p
}

// testRecoveryLeavesAnotherHostsTransition: on a store shared by hosts, a
// prepared transition owned by a process on another host (whose pid does
// not run here) is left as it is, and resolving it from here is refused;
// a transition whose owner on this host provably exited is aborted.
func testRecoveryLeavesAnotherHostsTransition(t *testing.T, svc *Service, ts store.TransitionStore) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("proving a process dead needs /proc")
	}
	ctx := t.Context()
	dead, _ := exitedProcess(t)
	remote := owner.Identity{ID: "elsewhere/" + strconv.FormatInt(dead.PID, 10) + "/beef", Host: "elsewhere/pid:[4026531836]",
		PID: dead.PID, Start: "another-boot:1"}
	prepare := func(id, key, ownerID string) {
		now := nowMs()
		tr := &store.Transition{TransitionID: id, Kind: store.TransitionClearThread, Agent: termapi.AgentClaude, TerminalID: "term-" + key,
			TerminalKey: key, PID: 4242, ProcessBirth: "b", Workspace: "/w", TargetSessionID: ids.Session(time.Now()), ToGeneration: 1,
			Plan: []string{"/clear"}, Owner: ownerID, PreparedAt: now, Status: store.TransitionPrepared, UpdatedAt: now}
		if err := ts.PrepareTransition(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	prepare("transition-remote-owner", "tmux:%91", remote.Encode())
	prepare("transition-dead-owner", "tmux:%92", dead.Encode())
	if n, err := svc.RecoverTransitions(ctx); err != nil || n != 1 {
		t.Fatalf("recover = %d, %v; want the dead local owner's transition only", n, err)
	}
	if got, _ := ts.GetTransition(ctx, "transition-remote-owner"); got.Status != store.TransitionPrepared {
		t.Fatalf("another host's transition = %s (%s), want it left prepared", got.Status, got.Reason)
	}
	if got, _ := ts.GetTransition(ctx, "transition-dead-owner"); got.Status != store.TransitionAborted {
		t.Fatalf("the dead owner's transition = %s, want aborted", got.Status)
	}
	v, err := svc.ResolveTransition(ctx, "transition-remote-owner", false)
	name := "pid " + strconv.FormatInt(dead.PID, 10) + " on elsewhere"
	if !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), name) {
		t.Fatalf("resolve another host's transition: %v", err)
	}
	if !strings.Contains(v.Reason, name) || !strings.Contains(v.Reason, "cannot prove") {
		t.Fatalf("the transition's view does not say why it is left alone: %q", v.Reason)
	}
}

func TestRecoveryLeavesAnotherHostsTransition(t *testing.T) {
	r := newRig(t)
	testRecoveryLeavesAnotherHostsTransition(t, r.svc, r.st)
}

// TestRecoverTransitionsLeavesOtherHostsAlone: a transition run by a live
// process on another host (its identity names another host and boot; its
// transition lease is renewed) is left as it is by every recovery; once
// that lease runs out (the process stopped renewing it, or a host reaped
// it), the next recovery settles it.
func TestRecoverTransitionsLeavesOtherHostsAlone(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	ts := r.st
	remote := owner.Identity{ID: "elsewhere/4242/beef", Host: "elsewhere/pid:[4026531836]", PID: 4242, Start: "another-boot:1"}
	now := nowMs()
	tr := &store.Transition{TransitionID: "transition-remote", Kind: store.TransitionClearThread, Agent: termapi.AgentClaude, TerminalID: "term-x",
		TerminalKey: "tmux:%93", PID: 4242, ProcessBirth: "b", Workspace: "/w", TargetSessionID: ids.Session(time.Now()), ToGeneration: 1,
		Plan: []string{"/clear"}, Owner: remote.Encode(), PreparedAt: now, Status: store.TransitionPrepared, UpdatedAt: now}
	l, err := r.st.ClaimWork(ctx, store.LeaseTransition, tr.TransitionID, remote.ID, now, now+time.Hour.Milliseconds())
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.PrepareTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if n, err := r.svc.RecoverTransitions(ctx); err != nil || n != 0 {
			t.Fatalf("recover = %d, %v; want the live remote owner's transition left alone", n, err)
		}
	}
	if got, _ := ts.GetTransition(ctx, tr.TransitionID); got.Status != store.TransitionPrepared {
		t.Fatalf("the live remote owner's transition = %s (%s), want prepared", got.Status, got.Reason)
	}
	// Its lease ends (as when a host reaps a process that stopped beating).
	if err := r.st.ReleaseWork(ctx, l); err != nil {
		t.Fatal(err)
	}
	if n, err := r.svc.RecoverTransitions(ctx); err != nil || n != 1 {
		t.Fatalf("recover after the lease ran out = %d, %v; want 1", n, err)
	}
	if got, _ := ts.GetTransition(ctx, tr.TransitionID); got.Status != store.TransitionAborted {
		t.Fatalf("the abandoned transition = %s, want aborted (nothing was typed)", got.Status)
	}
}
