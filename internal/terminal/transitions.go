package terminal

import (
	"context"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/transition"
	"github.com/clawconnect/clawconnect/termapi"
)

// Native thread transitions live in package transition; the Service
// answers the CLI's calls and the host's recovery with it and gives it the
// panes (transitionPanes).

// NewThread starts a new native thread in the terminal's agent (transition.Service.NewThread).
func (s *Service) NewThread(ctx context.Context, terminalID string) (termapi.TransitionView, error) {
	return s.transitions.NewThread(ctx, terminalID)
}

// ClearThread clears the terminal agent's context into a new native thread (transition.Service.ClearThread).
func (s *Service) ClearThread(ctx context.Context, terminalID string) (termapi.TransitionView, error) {
	return s.transitions.ClearThread(ctx, terminalID)
}

// ResumeThread resumes one of the workspace's native threads (transition.Service.ResumeThread).
func (s *Service) ResumeThread(ctx context.Context, terminalID, threadID string) (termapi.TransitionView, error) {
	return s.transitions.ResumeThread(ctx, terminalID, threadID)
}

// AdoptThread binds the thread a human switched the pane to (transition.Service.AdoptThread).
func (s *Service) AdoptThread(ctx context.Context, terminalID string) (termapi.TransitionView, error) {
	return s.transitions.AdoptThread(ctx, terminalID)
}

// Transition returns a transition record (transition.Service.Get).
func (s *Service) Transition(ctx context.Context, id string) (termapi.TransitionView, error) {
	return s.transitions.Get(ctx, id)
}

// ResolveTransition settles a transition left uncertain (transition.Service.Resolve).
func (s *Service) ResolveTransition(ctx context.Context, id string, adopt bool) (termapi.TransitionView, error) {
	return s.transitions.Resolve(ctx, id, adopt)
}

// RecoverTransitions settles the open transitions whose owner is gone
// (transition.Service.Recover); the monitor host calls it at every scan.
func (s *Service) RecoverTransitions(ctx context.Context) (int, error) {
	return s.transitions.Recover(ctx)
}

// Threads lists the native threads the terminal's agent could resume (transition.Service.Threads).
func (s *Service) Threads(ctx context.Context, terminalID string) (transition.ThreadsResult, error) {
	return s.transitions.Threads(ctx, terminalID)
}

// transitionPanes is the Service as package transition sees it:
// transition.Panes, transition.Keyboard and transition.Announcer.
type transitionPanes struct{ s *Service }

func (t transitionPanes) Target(ctx context.Context, terminalID string) (agents.Pane, agents.Agent, agents.Identity, error) {
	return t.s.followTarget(ctx, terminalID)
}

func (t transitionPanes) Find(ctx context.Context, key string, pid int, birth string) (agents.Pane, error) {
	return t.s.findPane(ctx, key, pid, birth)
}

func (t transitionPanes) Identify(ctx context.Context, a agents.Agent, p agents.Pane) (agents.Identity, error) {
	return t.s.identify(ctx, a, p)
}

func (t transitionPanes) Ready(ctx context.Context, a agents.Agent, p agents.Pane) error {
	_, err := t.s.checkScreen(ctx, a, p)
	return err
}

func (t transitionPanes) Capture(ctx context.Context, p agents.Pane) (string, error) {
	return t.s.o.Terminals.Capture(ctx, p)
}

func (t transitionPanes) SendText(ctx context.Context, p agents.Pane, text string) error {
	return t.s.o.Terminals.SendText(ctx, p, text)
}

func (t transitionPanes) SendKeys(ctx context.Context, p agents.Pane, keys ...string) error {
	return t.s.o.Terminals.SendKeys(ctx, p, keys...)
}

func (t transitionPanes) WaitDraft(ctx context.Context, a agents.Agent, p agents.Pane, cmd string) bool {
	return t.s.waitCommandDraft(ctx, a, p, cmd)
}

func (t transitionPanes) Changed() { t.s.notify() }
