package terminal

import (
	"errors"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestSessionAndDetach: Session reports the managed Session with its latest
// Turn; Detach refuses while the agent works, then releases the Session
// without a key press, and a session_exact send is refused afterwards.
func TestSessionAndDetach(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 140)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	if _, err := r.svc.Session(ctx, "session-nope"); !errors.Is(err, termapi.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	if _, err := r.svc.Session(ctx, "turn-1"); !errors.Is(err, termapi.ErrBadInput) {
		t.Fatalf("malformed id: %v", err)
	}
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := r.svc.Session(ctx, res.SessionID)
	if err != nil || v.Status != store.SessionBound || v.Latest == nil || v.Latest.TurnID != res.TurnID || !Running(v.Latest.Status) ||
		v.TerminalID != a.pane.TerminalID || v.LatestUpdatedAt == 0 {
		t.Fatalf("session while running = %+v, %v", v, err)
	}
	if _, err := r.svc.Detach(ctx, res.SessionID, "done"); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("detach while running: %v", err)
	}
	a.finish("the reply", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	v, err = r.svc.Session(ctx, res.SessionID)
	if err != nil || v.Latest.Status != termapi.TurnIdle || v.Latest.Result.Text != "the reply" || v.LatestIdleSince == 0 {
		t.Fatalf("session after the reply = %+v, %v", v, err)
	}
	keys := len(a.sentKeys())
	d, err := r.svc.Detach(ctx, res.SessionID, "released by the task")
	if err != nil || d.Status != store.SessionDetached || d.DetachedAt == 0 {
		t.Fatalf("detach = %+v, %v", d, err)
	}
	if got := len(a.sentKeys()); got != keys {
		t.Fatalf("detach pressed keys: %v", a.sentKeys())
	}
	if again, err := r.svc.Detach(ctx, res.SessionID, ""); err != nil || again.DetachedAt != d.DetachedAt {
		t.Fatalf("second detach = %+v, %v", again, err)
	}
	if _, err := r.svc.Send(ctx, termapi.SendRequest{SessionID: res.SessionID, Request: "more"}); err == nil {
		t.Fatal("a session_exact send reached a detached Session")
	}
}
