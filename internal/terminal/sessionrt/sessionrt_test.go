package sessionrt

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/termapi"
)

var testNow = time.UnixMilli(10_000)

func TestObserveMapsTurnStatuses(t *testing.T) {
	t.Parallel()
	session := func(status string, turn *termapi.TurnView) terminal.SessionView {
		return terminal.SessionView{SessionID: "session-1", Agent: "codex", Status: status, TerminalID: "terminal:x",
			CreatedAt: 1000, UpdatedAt: 2000, Latest: turn, LatestUpdatedAt: 3000, LatestIdleSince: 2500}
	}
	turn := func(status termapi.TurnStatus, mutate func(*termapi.TurnView)) *termapi.TurnView {
		v := &termapi.TurnView{TurnID: "turn-1", Status: status}
		if mutate != nil {
			mutate(v)
		}
		return v
	}
	reply := func(v *termapi.TurnView) { v.Result = &termapi.TurnResult{Outcome: "completed", Text: "the reply"} }
	tests := []struct {
		name      string
		v         terminal.SessionView
		state     agentsession.State
		final     string
		lastEvent int64
		alive     *bool
	}{
		{"no turn", session(store.SessionBound, nil), agentsession.StateIdle, "", 2000, nil},
		{"running", session(store.SessionBound, turn(termapi.TurnWaitingForAgent, nil)), agentsession.StateRunning, "", 3000, agentsession.Bool(true)},
		{"approval", session(store.SessionBound, turn(termapi.TurnWaitingForOpenClaw, func(v *termapi.TurnView) {
			v.Approval = &termapi.Approval{Fingerprint: "fp", Kind: "exec", Command: "ls"}
		})), agentsession.StateNeedsPermission, "", 3000, agentsession.Bool(true)},
		{"idle with the reply", session(store.SessionBound, turn(termapi.TurnIdle, reply)), agentsession.StateIdle, "the reply", 2500, agentsession.Bool(true)},
		{"stalled, agent alive", session(store.SessionBound, turn(termapi.TurnStalled, func(v *termapi.TurnView) { v.StalledReason = "no activity" })),
			agentsession.StateStale, "", 3000, nil},
		{"stalled, agent exited", session(store.SessionBound, turn(termapi.TurnStalled, func(v *termapi.TurnView) {
			v.StalledReason = "the agent process exited before the Turn completed"
		})), agentsession.StateDead, "", 3000, agentsession.Bool(false)},
		{"failed", session(store.SessionBound, turn(termapi.TurnFailed, func(v *termapi.TurnView) {
			v.Result = &termapi.TurnResult{Outcome: "failed", Text: "API error"}
		})), agentsession.StateFailed, "", 3000, nil},
		{"cancelled", session(store.SessionBound, turn(termapi.TurnCancelled, nil)), agentsession.StateIdle, "", 3000, nil},
		{"detached after a reply", session(store.SessionDetached, turn(termapi.TurnIdle, reply)), agentsession.StateCompleted, "the reply", 3000, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := Observe(tc.v)
			if o.State != string(tc.state) || o.FinalResponse != tc.final {
				t.Errorf("state %q final %q, want %q %q", o.State, o.FinalResponse, tc.state, tc.final)
			}
			st := agentsession.Normalize(agentsession.Ref{Runtime: RuntimeID, SessionID: "session-1"}, o, testNow)
			if st.LastEventAt != tc.lastEvent {
				t.Errorf("lastEventAt %d, want %d (the store's time, not the look's)", st.LastEventAt, tc.lastEvent)
			}
			if (o.Alive == nil) != (tc.alive == nil) || (o.Alive != nil && *o.Alive != *tc.alive) {
				t.Errorf("alive %v, want %v", o.Alive, tc.alive)
			}
		})
	}
}

// fakeSessions is one Session whose latest Turn the test sets.
type fakeSessions struct {
	view     terminal.SessionView
	sent     []termapi.SendRequest
	detached string
}

func (f *fakeSessions) Session(_ context.Context, id string) (terminal.SessionView, error) {
	if id != f.view.SessionID {
		return terminal.SessionView{}, fmt.Errorf("session: %w", termapi.ErrNotFound)
	}
	return f.view, nil
}

func (f *fakeSessions) Send(_ context.Context, r termapi.SendRequest) (termapi.SendResult, error) {
	if r.SessionID != f.view.SessionID {
		return termapi.SendResult{}, fmt.Errorf("send: %w", termapi.ErrNotFound)
	}
	f.sent = append(f.sent, r)
	f.view.Latest = &termapi.TurnView{TurnID: "turn-2", Status: termapi.TurnWaitingForAgent}
	return termapi.SendResult{SessionID: r.SessionID, TurnID: "turn-2", SubmissionOutcome: termapi.OutcomeAccepted}, nil
}

func (f *fakeSessions) Detach(_ context.Context, id, reason string) (terminal.SessionView, error) {
	if id != f.view.SessionID {
		return terminal.SessionView{}, fmt.Errorf("detach: %w", termapi.ErrNotFound)
	}
	f.detached = reason
	f.view.Status = store.SessionDetached
	return f.view, nil
}

// TestRuntimeCallbacks: inspect is unavailable while no host answers and
// null for an unknown Session; continue sends in session_exact scope; detach
// releases the Session.
func TestRuntimeCallbacks(t *testing.T) {
	t.Parallel()
	f := &fakeSessions{view: terminal.SessionView{SessionID: "session-1", Agent: "codex", Status: store.SessionBound, CreatedAt: 1,
		Latest: &termapi.TurnView{TurnID: "turn-1", Status: termapi.TurnIdle, Result: &termapi.TurnResult{Text: "done"}}, LatestIdleSince: 5}}
	down := true
	rt := Runtime(func(context.Context) (Sessions, error) {
		if down {
			return nil, errors.New("no terminal monitor host")
		}
		return f, nil
	})
	if rt.ID != RuntimeID || !rt.Supports(agentsession.OpContinue) || !rt.Supports(agentsession.OpDetach) {
		t.Fatalf("runtime %s capabilities = %+v", rt.ID, rt.Capabilities())
	}
	ctx := t.Context()
	ref := agentsession.Ref{Runtime: RuntimeID, SessionID: "session-1"}
	o, err := rt.Inspect(ctx, ref)
	if err != nil || o == nil || o.State != string(agentsession.StateUnavailable) {
		t.Fatalf("inspect without a host = %+v, %v", o, err)
	}
	down = false
	if o, err := rt.Inspect(ctx, ref); err != nil || o.State != "idle" || o.FinalResponse != "done" {
		t.Fatalf("inspect = %+v, %v", o, err)
	}
	if o, err := rt.Inspect(ctx, agentsession.Ref{Runtime: RuntimeID, SessionID: "session-2"}); err != nil || o != nil {
		t.Fatalf("inspect of an unknown session = %+v, %v; want null", o, err)
	}
	if o, err := rt.Continue(ctx, ref, "next step"); err != nil || o.State != "running" || len(f.sent) != 1 || f.sent[0].Request != "next step" {
		t.Fatalf("continue = %+v, %v; sent %+v", o, err, f.sent)
	}
	if o, err := rt.Detach(ctx, ref, "task over"); err != nil || o.State != "completed" || f.detached != "task over" {
		t.Fatalf("detach = %+v, %v", o, err)
	}
}
