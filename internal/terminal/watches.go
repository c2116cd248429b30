package terminal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/termapi"
)

// Watches of tasks a human runs in a pane live in package watch; the
// Service answers the CLI's and the dashboard's calls with it and gives it
// the panes (watchPanes).

// Watch starts a watch of the task a human runs in the pane (watch.Service.Watch).
func (s *Service) Watch(ctx context.Context, req watch.Request) (watch.View, error) {
	return s.watches.Watch(ctx, req)
}

// WatchStatus returns a watch by watch id or pane (watch.Service.Status).
func (s *Service) WatchStatus(ctx context.Context, id string) (watch.View, error) {
	return s.watches.Status(ctx, id)
}

// Watches returns the active watches (watch.Service.List).
func (s *Service) Watches(ctx context.Context, limit int) ([]watch.View, error) {
	return s.watches.List(ctx, limit)
}

// Unwatch cancels a watch (watch.Service.Unwatch).
func (s *Service) Unwatch(ctx context.Context, id string) (watch.View, error) {
	return s.watches.Unwatch(ctx, id)
}

// watchPanes is the Service as package watch sees it: watch.Panes and
// watch.Announcer.
type watchPanes struct{ s *Service }

func (w watchPanes) Target(ctx context.Context, terminalID string) (agents.Pane, agents.Agent, agents.Identity, error) {
	return w.s.followTarget(ctx, terminalID)
}

func (w watchPanes) Bind(ctx context.Context, p agents.Pane, id agents.Identity) (*store.TermSession, error) {
	return w.s.followSession(ctx, p, id)
}

func (w watchPanes) Capture(ctx context.Context, p agents.Pane) (string, error) {
	return w.s.o.Terminals.Capture(ctx, p)
}

// Live looks p up in a pane inventory at most half a second old; the
// process check of the Terminals, when they have one, decides whether the
// process exited.
func (w watchPanes) Live(ctx context.Context, p agents.Pane) (agents.Pane, bool, bool) {
	listed, exited := false, false
	w.s.followKey(p.Key)
	if cur, found, err := w.s.livePane(ctx, 500*time.Millisecond, p); err == nil {
		if listed = found; listed {
			p = cur
		}
		exited = !listed
	}
	if pc, ok := w.s.o.Terminals.(ProcessChecker); ok {
		running, err := pc.Alive(p)
		exited = err == nil && !running
	}
	return p, listed, exited
}

// TurnRuns reports (as a refusal) a Turn of ours that still owns the
// pane's next input.
func (w watchPanes) TurnRuns(ctx context.Context, p agents.Pane) error {
	return w.s.ourTurnRuns(ctx, p)
}

func (w watchPanes) Changed() { w.s.notify() }

func (w watchPanes) Announce(ctx context.Context, watchID string) { w.s.startMonitor(ctx, watchID) }

// ourTurnRuns reports (as a refusal) a Turn of ours that still owns the
// pane's next input.
func (s *Service) ourTurnRuns(ctx context.Context, p agents.Pane) error {
	d, err := s.o.Store.GetDispatch(ctx, p.Key)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var status termapi.TurnStatus
	if t, err := s.o.Store.GetTurn(ctx, d.TurnID); err == nil {
		status = t.Status
	}
	if d.Blocks(status) || (status != "" && status.SendBlocking()) {
		return fmt.Errorf("%w: Turn %s of ClawConnect runs in this pane (%s); follow it with `clawconnect terminal status %s` instead of a watch",
			termapi.ErrRefused, d.TurnID, status, d.TurnID)
	}
	return nil
}
