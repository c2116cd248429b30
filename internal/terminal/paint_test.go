package terminal

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/termapi"
)

// repaintingTerminals serves a pane whose TUI has cleared its screen and
// not yet painted it again (as Codex does after a new thread): captures
// read a blank screen until the paint, which comes as pane output after a
// watch of the output started (never, when paints is false).
type repaintingTerminals struct {
	*fakeTerminals
	paints bool

	mu      sync.Mutex
	painted bool
}

func (r *repaintingTerminals) Capture(ctx context.Context, p agents.Pane) (string, error) {
	r.mu.Lock()
	painted := r.painted
	r.mu.Unlock()
	if !painted {
		return `{"activity":"unknown"}`, nil
	}
	return r.fakeTerminals.Capture(ctx, p)
}

func (r *repaintingTerminals) WatchOutput(ctx context.Context, _ agents.Pane) (<-chan struct{}, error) {
	out := make(chan struct{}, 1)
	if r.paints {
		r.mu.Lock()
		r.painted = true
		r.mu.Unlock()
		out <- struct{}{}
	}
	return out, nil
}

// TestSendWaitsForThePaneToPaint: a send to a pane read while its TUI
// repaints (a blank screen, no composer to read) waits for the paint
// instead of refusing the agent as busy.
func TestSendWaitsForThePaneToPaint(t *testing.T) {
	t.Parallel()
	a := newFakeAgent(termapi.AgentCodex, 250)
	r := newRig(t, a)
	rt := &repaintingTerminals{fakeTerminals: r.ft, paints: true}
	r.svc = NewService(Options{Store: r.st, Terminals: rt, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}}, DraftTimeout: time.Second})
	if _, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "after the repaint"}); err != nil {
		t.Fatalf("send to a pane that paints after a blank read: %v", err)
	}
}

// TestSendToAPaneThatNeverPaints: the wait for a paint is bounded; a
// screen that stays unreadable is refused as before.
func TestSendToAPaneThatNeverPaints(t *testing.T) {
	st := newRig(t).st // outside the bubble (see outsideBubble)
	synctest.Test(t, func(t *testing.T) {
		a := newFakeAgent(termapi.AgentCodex, 251)
		ft := &fakeTerminals{agents: []*fakeAgent{a}}
		rt := &repaintingTerminals{fakeTerminals: ft}
		svc := NewService(Options{Store: outsideBubble{st.(*sqlstore.DB)}, Terminals: rt, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{ft}}, DraftTimeout: time.Second})
		_, err := svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
		if !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), "busy (unknown)") {
			t.Fatalf("send to a pane that never paints: %v, want refused as busy (unknown)", err)
		}
	})
}
