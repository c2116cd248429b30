package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// Transition returns a prepared new-thread transition away from s's
// binding (s nil: an unmanaged pane on terminalKey).
func Transition(id, kind string, s *store.TermSession, terminalKey, target string) *store.Transition {
	tr := &store.Transition{TransitionID: id, Kind: kind, Agent: "codex", AgentVersion: "1.0.0",
		TerminalID: "terminal:v2:tmux:codex:s:0.0:42", TerminalKey: terminalKey, PID: 42, ProcessBirth: "b1", Workspace: "/w",
		TargetSessionID: target, ToGeneration: 1, Plan: []string{"/clear"}, Owner: "pid:1:birth:x", PreparedAt: 2000,
		Status: store.TransitionPrepared, UpdatedAt: 2000}
	if s != nil {
		tr.FromSessionID, tr.FromBindingID, tr.FromGeneration = s.SessionID, s.Binding.BindingID, s.Binding.Generation
		tr.FromThreadID, tr.ToGeneration = s.Binding.NativeThreadID, s.Binding.Generation+1
	}
	return tr
}

// RunTransition runs the transition-record suite.
func RunTransition(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"PrepareHoldsTheTerminalAndCommitRebinds", testTransitionCommit},
		{"FixedFieldsAndSteps", testTransitionSteps},
		{"UnresolvedWorkBlocks", testTransitionBlocked},
		{"UncertainBlocksAbortFrees", testTransitionUncertain},
		{"CommitIsAtomic", testTransitionAtomic},
		{"ResumeReactivatesADetachedSession", testTransitionReactivate},
		{"SendAndTransitionSerialize", testTransitionRacesSend},
		{"UnmanagedPaneSendAndTransitionSerialize", testTransitionRacesFirstSend},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newStore(t))
		})
	}
}

func stepTransition(t *testing.T, s store.Store, tr *store.Transition, statuses ...string) {
	t.Helper()
	for _, st := range statuses {
		tr.Status = st
		tr.UpdatedAt++
		if err := s.AdvanceTransition(t.Context(), tr); err != nil {
			t.Fatalf("advance to %s: %v", st, err)
		}
	}
}

// leave returns the commit's write of the Session a transition leaves:
// detached, with a new binding at the transition's generation.
func leave(old *store.TermSession, tr *store.Transition) *store.TermSession {
	s := *old
	b := *old.Binding
	b.BindingID, b.Generation = "binding-left-"+tr.TransitionID, tr.ToGeneration
	s.Binding, s.Status, s.DetachedAt, s.UpdatedAt = &b, store.SessionDetached, 3000, 3000
	return &s
}

// fresh returns the commit's new Session bound to thread.
func fresh(id, thread string, tr *store.Transition) *store.TermSession {
	s := TermSession(id, thread, tr.TerminalKey)
	s.Binding.BindingID, s.Binding.Generation = "binding-new-"+id, tr.ToGeneration
	s.Lineage = store.Lineage{CreatedBy: tr.Kind, PreviousSessionID: tr.FromSessionID}
	return s
}

func testTransitionCommit(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := TermSession("session-a", "T1", "k")
	mustCreateSession(t, s, a)
	tr := Transition("transition-1", store.TransitionNewThread, a, "k", "session-b")
	if err := s.PrepareTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if tr.Version != 1 {
		t.Fatalf("version after prepare = %d", tr.Version)
	}
	// The transition owns the next input: no send gets in.
	if err := s.CreateTurn(ctx, NewTurn("turn-during", a, 2100)); !errors.Is(err, store.ErrTerminalBusy) {
		t.Fatalf("send during a transition: %v, want ErrTerminalBusy", err)
	}
	if open, err := s.OpenTransitions(ctx, 10); err != nil || len(open) != 1 {
		t.Fatalf("open transitions = %v, %v", open, err)
	}
	stepTransition(t, s, tr, store.TransitionDispatching, store.TransitionSubmitted, store.TransitionVerified)
	tr.Status, tr.ObservedThreadID = store.TransitionCommitted, "T2"
	b := fresh("session-b", "T2", tr)
	err := s.CommitTransition(ctx, store.TransitionCommit{Transition: tr, Sessions: []*store.TermSession{leave(a, tr), b}})
	if err != nil {
		t.Fatal(err)
	}
	gotA, _ := s.GetTermSession(ctx, "session-a")
	gotB, err := s.GetTermSession(ctx, "session-b")
	if err != nil || gotA.Status != store.SessionDetached || gotA.Binding.Generation != 2 || gotB.Status != store.SessionBound || gotB.Binding.Generation != 2 || gotB.Revision != 1 {
		t.Fatalf("after commit: a=%+v b=%+v %v", gotA, gotB, err)
	}
	if owner, err := s.SessionByThread(ctx, "codex", "t2"); err != nil || owner.SessionID != "session-b" {
		t.Fatalf("thread T2 owner = %+v, %v", owner, err)
	}
	got, err := s.GetTransition(ctx, "transition-1")
	if err != nil || got.Status != store.TransitionCommitted || got.ObservedThreadID != "T2" || got.Version != tr.Version {
		t.Fatalf("stored transition = %+v, %v (version %d)", got, err, tr.Version)
	}
	if open, _ := s.OpenTransitions(ctx, 10); len(open) != 0 {
		t.Fatalf("committed transition still open: %+v", open)
	}
	if list, _ := s.TerminalTransitions(ctx, "k", 5); len(list) != 1 || list[0].TransitionID != "transition-1" {
		t.Fatalf("terminal transitions = %+v", list)
	}
	// The ledger is free again: the new Session takes its first Turn; a
	// Turn fenced to the old binding is refused.
	if err := s.CreateTurn(ctx, NewTurn("turn-old", a, 3100)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("turn on the old binding: %v, want ErrConflict", err)
	}
	if err := s.CreateTurn(ctx, NewTurn("turn-new", gotB, 3200)); err != nil {
		t.Fatalf("first turn of the new session: %v", err)
	}
}

func testTransitionSteps(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := TermSession("session-a", "T1", "k")
	mustCreateSession(t, s, a)
	tr := Transition("transition-s", store.TransitionResumeThread, a, "k", "session-c")
	tr.TargetThreadID = "T0"
	bad := *tr
	bad.TransitionID = "nope"
	if err := s.PrepareTransition(ctx, &bad); !errors.Is(err, store.ErrBindingRule) {
		t.Fatalf("bad id: %v", err)
	}
	noTarget := *tr
	noTarget.TransitionID, noTarget.TargetThreadID = "transition-nt", ""
	if err := s.PrepareTransition(ctx, &noTarget); !errors.Is(err, store.ErrBindingRule) {
		t.Fatalf("resume without a thread: %v", err)
	}
	if err := s.PrepareTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	if err := s.PrepareTransition(ctx, Transition("transition-s", store.TransitionNewThread, nil, "k2", "session-x")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate id: %v", err)
	}
	edit := func(name string, f func(x *store.Transition), want error) {
		t.Helper()
		cur, err := s.GetTransition(ctx, tr.TransitionID)
		if err != nil {
			t.Fatal(err)
		}
		f(cur)
		if err := s.AdvanceTransition(ctx, cur); !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("%s: %v, want %v", name, err, want)
		}
	}
	edit("target thread is fixed", func(x *store.Transition) { x.TargetThreadID = "T9"; x.Status = store.TransitionDispatching }, store.ErrBindingRule)
	edit("plan is fixed", func(x *store.Transition) { x.Plan = []string{"/new"}; x.Status = store.TransitionDispatching }, store.ErrBindingRule)
	edit("generation is fixed", func(x *store.Transition) { x.ToGeneration = 5; x.Status = store.TransitionDispatching }, store.ErrBindingRule)
	edit("committed only through commit", func(x *store.Transition) { x.Status = store.TransitionCommitted }, store.ErrBindingRule)
	edit("prepared → submitted skips dispatching", func(x *store.Transition) { x.Status = store.TransitionSubmitted }, store.ErrBindingRule)
	edit("stale version", func(x *store.Transition) { x.Version--; x.Status = store.TransitionDispatching }, store.ErrConflict)
	edit("dispatching", func(x *store.Transition) { x.Status = store.TransitionDispatching }, nil)
	edit("submitted", func(x *store.Transition) { x.Status = store.TransitionSubmitted; x.SubmittedAt = 2500 }, nil)
	edit("submitted input is never aborted", func(x *store.Transition) { x.Status = store.TransitionAborted }, store.ErrBindingRule)
	cur, _ := s.GetTransition(ctx, tr.TransitionID)
	cur.Status = store.TransitionCommitted
	if err := s.CommitTransition(ctx, store.TransitionCommit{Transition: cur}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("commit of a submitted (unverified) transition: %v, want ErrConflict", err)
	}
}

func testTransitionBlocked(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := TermSession("session-a", "T1", "k")
	mustCreateSession(t, s, a)
	// A stale binding (the caller derived generation 1, the Session moved
	// on) is refused.
	stale := Transition("transition-stale", store.TransitionNewThread, a, "k", "session-b")
	stale.FromBindingID = "binding-other"
	if err := s.PrepareTransition(ctx, stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale binding: %v, want ErrConflict", err)
	}
	// A running Turn blocks.
	tc := NewTurn("turn-1", a, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	err := s.PrepareTransition(ctx, Transition("transition-run", store.TransitionNewThread, a, "k", "session-b"))
	if !errors.Is(err, store.ErrTerminalBusy) {
		t.Fatalf("transition while a Turn runs: %v, want ErrTerminalBusy", err)
	}
	// The Turn ends with an undelivered callback: still blocked.
	turn := tc.Turn
	turn.Status = termapi.TurnIdle
	err = s.WriteTurn(ctx, store.TurnWrite{Turn: turn,
		Dispatch: &store.DispatchAdvance{TerminalKey: "k", GenerationID: tc.Dispatch.GenerationID, Update: func() *store.Dispatch {
			d := *tc.Dispatch
			d.Status = termapi.DispatchAgentAccepted
			return &d
		}()},
		Also: func(ctx context.Context, tx store.TerminalTx) error {
			return tx.PutCallback(ctx, &store.Callback{MessageID: "msg-cb-1", TurnID: "turn-1", SessionID: "session-a", Kind: "done",
				SessionKey: "agent:main:x", BindingID: a.Binding.BindingID, Generation: 1, Message: []byte(`{"id":"msg-cb-1"}`),
				Status: termapi.CallbackPending, CreatedAt: 20, UpdatedAt: 20})
		}})
	if err != nil {
		t.Fatal(err)
	}
	err = s.PrepareTransition(ctx, Transition("transition-cb", store.TransitionNewThread, a, "k", "session-b"))
	if !errors.Is(err, store.ErrTerminalBusy) {
		t.Fatalf("transition with an undelivered callback: %v, want ErrTerminalBusy", err)
	}
	cb, err := s.ClaimCallback(ctx, "msg-cb-1", "w", 30, 90)
	if err != nil {
		t.Fatal(err)
	}
	cb.Status, cb.DeliveredAt, cb.LeaseUntil = termapi.CallbackDelivered, 31, 0
	if err := s.SaveCallback(ctx, cb); err != nil {
		t.Fatal(err)
	}
	first := Transition("transition-ok", store.TransitionNewThread, a, "k", "session-b")
	if err := s.PrepareTransition(ctx, first); err != nil {
		t.Fatalf("transition after delivery: %v", err)
	}
	// One open transition per terminal.
	if err := s.PrepareTransition(ctx, Transition("transition-2nd", store.TransitionClearThread, a, "k", "session-c")); !errors.Is(err, store.ErrTerminalBusy) {
		t.Fatalf("second open transition: %v, want ErrTerminalBusy", err)
	}
	if _, err := s.GetTransition(ctx, "transition-2nd"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused transition was stored: %v", err)
	}
}

func testTransitionUncertain(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := TermSession("session-a", "T1", "k")
	mustCreateSession(t, s, a)
	tr := Transition("transition-u", store.TransitionClearThread, a, "k", "session-b")
	if err := s.PrepareTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	stepTransition(t, s, tr, store.TransitionDispatching)
	tr.Reason = "the owner died"
	stepTransition(t, s, tr, store.TransitionUncertain)
	if err := s.CreateTurn(ctx, NewTurn("turn-x", a, 2100)); !errors.Is(err, store.ErrTerminalBusy) {
		t.Fatalf("send while a transition is uncertain: %v, want ErrTerminalBusy", err)
	}
	if d, err := s.GetDispatch(ctx, "k"); err != nil || d.Status != termapi.DispatchUncertain || d.MessageType != store.DispatchTransition {
		t.Fatalf("ledger = %+v, %v", d, err)
	}
	stepTransition(t, s, tr, store.TransitionAborted)
	if open, _ := s.OpenTransitions(ctx, 10); len(open) != 0 {
		t.Fatalf("aborted transition still open: %+v", open)
	}
	if err := s.CreateTurn(ctx, NewTurn("turn-y", a, 2200)); err != nil {
		t.Fatalf("send after the abort: %v", err)
	}
	tr.Status = store.TransitionVerified
	if err := s.AdvanceTransition(ctx, tr); !errors.Is(err, store.ErrBindingRule) {
		t.Fatalf("an aborted transition moved on: %v", err)
	}
}

func testTransitionAtomic(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := TermSession("session-a", "T1", "k")
	mustCreateSession(t, s, a)
	mustCreateSession(t, s, TermSession("session-other", "T2", "k9"))
	tr := Transition("transition-a", store.TransitionNewThread, a, "k", "session-b")
	if err := s.PrepareTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	stepTransition(t, s, tr, store.TransitionDispatching, store.TransitionSubmitted, store.TransitionVerified)
	// The observed thread is bound by another Session: nothing is applied.
	commit := *tr
	commit.Status = store.TransitionCommitted
	err := s.CommitTransition(ctx, store.TransitionCommit{Transition: &commit, Sessions: []*store.TermSession{leave(a, tr), fresh("session-b", "T2", tr)}})
	if !errors.Is(err, store.ErrThreadBound) {
		t.Fatalf("commit onto a bound thread: %v, want ErrThreadBound", err)
	}
	gotA, _ := s.GetTermSession(ctx, "session-a")
	if gotA.Status != store.SessionBound || gotA.Revision != 1 {
		t.Fatalf("session a changed by a failed commit: %+v", gotA)
	}
	if _, err := s.GetTermSession(ctx, "session-b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("session b created by a failed commit: %v", err)
	}
	if got, _ := s.GetTransition(ctx, tr.TransitionID); got.Status != store.TransitionVerified {
		t.Fatalf("transition after a failed commit = %s", got.Status)
	}
	// A wrong generation is refused too.
	commit = *tr
	commit.Status = store.TransitionCommitted
	wrong := fresh("session-b", "T3", tr)
	wrong.Binding.Generation = 7
	if err := s.CommitTransition(ctx, store.TransitionCommit{Transition: &commit, Sessions: []*store.TermSession{wrong}}); !errors.Is(err, store.ErrBindingRule) {
		t.Fatalf("commit with a wrong generation: %v, want ErrBindingRule", err)
	}
}

func testTransitionReactivate(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := TermSession("session-c", "T0", "k")
	mustCreateSession(t, s, c)
	c.Status, c.DetachedAt = store.SessionDetached, 1500
	if err := s.SaveTermSession(ctx, c); err != nil {
		t.Fatal(err)
	}
	a := TermSession("session-a", "T1", "k")
	a.Binding.BindingID = "binding-a"
	mustCreateSession(t, s, a)
	a.Binding = &store.Binding{BindingID: "binding-a2", Generation: 2, TerminalID: a.Binding.TerminalID, TerminalKey: "k", NativeThreadID: "T1",
		NativeProcess: a.Binding.NativeProcess}
	if err := s.SaveTermSession(ctx, a); err != nil {
		t.Fatal(err)
	}
	tr := Transition("transition-r", store.TransitionResumeThread, a, "k", "session-c")
	tr.TargetThreadID = "T0"
	if tr.ToGeneration != 3 {
		t.Fatalf("to generation = %d", tr.ToGeneration)
	}
	if err := s.PrepareTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	stepTransition(t, s, tr, store.TransitionDispatching, store.TransitionSubmitted, store.TransitionVerified)
	re := *c
	b := *c.Binding
	b.BindingID, b.Generation = "binding-c3", 3
	re.Binding, re.Status, re.DetachedAt = &b, store.SessionBound, 0
	tr.Status = store.TransitionCommitted
	if err := s.CommitTransition(ctx, store.TransitionCommit{Transition: tr, Sessions: []*store.TermSession{leave(a, tr), &re}}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetTermSession(ctx, "session-c")
	if got.Status != store.SessionBound || got.Binding.Generation != 3 || got.Binding.BindingID != "binding-c3" {
		t.Fatalf("reactivated session = %+v", got)
	}
	// A bound Session is never the target of another terminal's resume.
	other := Transition("transition-r2", store.TransitionResumeThread, nil, "k2", "session-c")
	other.TargetThreadID = "T0"
	if err := s.PrepareTransition(ctx, other); !errors.Is(err, store.ErrThreadBound) {
		t.Fatalf("resume of a bound session's thread: %v, want ErrThreadBound", err)
	}
}

// testTransitionRacesSend runs a send and a transition on one Session at
// the same time, many times: exactly one of them takes the terminal.
func testTransitionRacesSend(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i := range 20 {
		key := fmt.Sprintf("k-race-%d", i)
		a := TermSession(fmt.Sprintf("session-race-%d", i), fmt.Sprintf("T-race-%d", i), key)
		mustCreateSession(t, s, a)
		var wg sync.WaitGroup
		var sendErr, prepErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			sendErr = s.CreateTurn(ctx, NewTurn(fmt.Sprintf("turn-race-%d", i), a, 100))
		}()
		go func() {
			defer wg.Done()
			prepErr = s.PrepareTransition(ctx, Transition(fmt.Sprintf("transition-race-%d", i), store.TransitionNewThread, a, key, fmt.Sprintf("session-race-new-%d", i)))
		}()
		wg.Wait()
		if (sendErr == nil) == (prepErr == nil) {
			t.Fatalf("round %d: send %v, transition %v: exactly one must take the terminal", i, sendErr, prepErr)
		}
		for _, err := range []error{sendErr, prepErr} {
			if err != nil && !errors.Is(err, store.ErrTerminalBusy) {
				t.Fatalf("round %d: the loser failed with %v, want ErrTerminalBusy", i, err)
			}
		}
	}
}

// testTransitionRacesFirstSend races the first send of a new Session with
// a transition of the still unmanaged pane (no Session row to lock, no
// ledger entry yet): exactly one takes the terminal.
func testTransitionRacesFirstSend(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i := range 20 {
		key := fmt.Sprintf("k-first-%d", i)
		a := TermSession(fmt.Sprintf("session-first-%d", i), fmt.Sprintf("T-first-%d", i), key)
		mustCreateSession(t, s, a)
		var wg sync.WaitGroup
		var sendErr, prepErr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			sendErr = s.CreateTurn(ctx, NewTurn(fmt.Sprintf("turn-first-%d", i), a, 100))
		}()
		go func() {
			defer wg.Done()
			prepErr = s.PrepareTransition(ctx, Transition(fmt.Sprintf("transition-first-%d", i), store.TransitionNewThread, nil, key, fmt.Sprintf("session-first-new-%d", i)))
		}()
		wg.Wait()
		if (sendErr == nil) == (prepErr == nil) {
			d, derr := s.GetDispatch(ctx, key)
			t.Fatalf("round %d: send %v, transition %v: exactly one must take the terminal (ledger %+v, %v)", i, sendErr, prepErr, d, derr)
		}
	}
}
