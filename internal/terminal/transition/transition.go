// Package transition holds native thread transitions: new-thread,
// clear-thread and resume-thread drive the agent's own control in the pane;
// adopt-thread takes over a thread a human switched to. Each is recorded in
// the store before the pane is touched, verified from the agent's own files,
// and committed with its Session writes in one store write. A transition
// creates no Turn: the next ordinary send starts the first Turn of the new
// context. The process running one holds its lease and is registered as its
// owner (owner.go); one left unfinished is recovered or resolved
// (recover.go). The pane's native threads, and the thread a human switched
// to, are read here too (threads.go).
//
// It knows the Turn service only through the small interfaces below.
package transition

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/ids"
	"github.com/clawconnect/clawconnect/termapi"
)

// verifyTimeout bounds the wait for the agent's files to show the
// thread a transition asked for.
const verifyTimeout = 15 * time.Second

// NewThread starts a new native thread in the terminal's agent (its own
// new-thread control). See the package doc for the guarantees.
func (s *Service) NewThread(ctx context.Context, terminalID string) (termapi.TransitionView, error) {
	return s.transition(ctx, store.TransitionNewThread, terminalID, "")
}

// ClearThread clears the terminal agent's context into a new native thread.
func (s *Service) ClearThread(ctx context.Context, terminalID string) (termapi.TransitionView, error) {
	return s.transition(ctx, store.TransitionClearThread, terminalID, "")
}

// ResumeThread resumes one of the workspace's native threads (an id Threads
// lists) in the terminal's agent.
func (s *Service) ResumeThread(ctx context.Context, terminalID, threadID string) (termapi.TransitionView, error) {
	return s.transition(ctx, store.TransitionResumeThread, terminalID, threadID)
}

// AdoptThread binds the thread a human switched the pane to: the Session
// bound to the pane is left detached, the pane's thread gets a Session (a
// new one, or its detached one reactivated) at the next generation.
// Nothing is typed.
func (s *Service) AdoptThread(ctx context.Context, terminalID string) (termapi.TransitionView, error) {
	return s.transition(ctx, store.TransitionAdopt, terminalID, "")
}

// paneBinding returns the Session bound to the pane's process incarnation
// (nil if none) and whether its thread differs from the pane's (a human
// switched the thread).
func paneBinding(ctx context.Context, st store.TerminalStore, p agents.Pane, id agents.Identity) (*store.TermSession, bool, error) {
	list, err := st.SessionsByTerminal(ctx, p.Key)
	if err != nil {
		return nil, false, err
	}
	var same, other *store.TermSession
	for _, c := range list {
		b := c.Binding
		if c.Status != store.SessionBound || b == nil || b.NativeProcess.PID != p.PID || b.NativeProcess.ProcessBirth != p.Birth {
			continue
		}
		switch {
		case b.NativeThreadID == "" || strings.EqualFold(b.NativeThreadID, id.ThreadID):
			same = c
		case other == nil || b.Generation > other.Binding.Generation:
			other = c
		}
	}
	if same != nil {
		return same, false, nil
	}
	return other, other != nil && id.ThreadID != "", nil
}

// conflictReason is the refusal of a send to a pane whose thread a human
// switched.
func conflictReason(sess *store.TermSession, p agents.Pane, id agents.Identity) string {
	return fmt.Sprintf("the pane's native thread changed by hand from %s (session %s) to %s; choose one first: "+
		"`clawconnect terminal adopt-thread %s` (bind the new thread) or `clawconnect terminal detach %s` (keep the old Session detached)",
		sess.Binding.NativeThreadID, sess.SessionID, id.ThreadID, p.TerminalID, sess.SessionID)
}

func (s *Service) transition(ctx context.Context, kind, terminalID, thread string) (termapi.TransitionView, error) {
	op := strings.ReplaceAll(kind, "_", "-")
	if kind == store.TransitionAdopt {
		op = "adopt-thread"
	}
	fail := func(err error) (termapi.TransitionView, error) {
		return termapi.TransitionView{}, fmt.Errorf("%s: %w", op, err)
	}
	if err := ids.CheckTerminal(terminalID); err != nil {
		return fail(err)
	}
	if kind == store.TransitionResumeThread && !agents.ValidThreadID(thread) {
		return fail(fmt.Errorf("%w: native thread id %q is not a complete thread id (a UUID); copy one from `clawconnect terminal threads %s`", termapi.ErrBadInput, thread, terminalID))
	}
	p, a, id, err := s.o.Panes.Target(ctx, terminalID)
	if err != nil {
		return fail(err)
	}
	cur, conflict, err := paneBinding(ctx, s.o.Store, p, id)
	if err != nil {
		return fail(err)
	}
	var version string
	var plan []string
	if kind == store.TransitionAdopt {
		if !conflict {
			return fail(fmt.Errorf("%w: the pane shows the thread its Session is bound to; there is nothing to adopt", termapi.ErrRefused))
		}
		thread = id.ThreadID
	} else {
		if conflict {
			return fail(fmt.Errorf("%w: %s", termapi.ErrRefused, conflictReason(cur, p, id)))
		}
		tc, ok := a.(agents.ThreadControl)
		if !ok {
			return fail(fmt.Errorf("%w: the %s reader has no native thread controls", termapi.ErrRefused, p.Agent))
		}
		if kind == store.TransitionResumeThread {
			if strings.EqualFold(thread, id.ThreadID) {
				return fail(fmt.Errorf("%w: thread %s is already the pane's current thread", termapi.ErrRefused, thread))
			}
			list, err := tc.Threads(ctx, p)
			if err != nil {
				return fail(fmt.Errorf("list the resumable threads: %w", err))
			}
			found := false
			for _, t := range list {
				if strings.EqualFold(t.ID, thread) {
					found, thread = true, t.ID
				}
			}
			if !found {
				return fail(fmt.Errorf("%w: thread %s is not a resumable thread of this pane's workspace; `clawconnect terminal threads %s` lists them", termapi.ErrNotFound, thread, terminalID))
			}
		}
		if version, plan, err = tc.ThreadPlan(ctx, p, kind, thread); err != nil {
			return fail(err)
		}
		if err := s.o.Panes.Ready(ctx, a, p); err != nil {
			return fail(err)
		}
	}
	now := nowMs()
	tr := &store.Transition{TransitionID: "transition-" + ids.UUID(), Kind: kind, Agent: p.Agent, AgentVersion: version,
		TerminalID: p.TerminalID, TerminalKey: p.Key, PID: p.PID, ProcessBirth: p.Birth, Workspace: p.Cwd,
		TargetThreadID: thread, Plan: plan, Owner: selfOwner(), PreparedAt: now, Status: store.TransitionPrepared, UpdatedAt: now,
		TargetSessionID: ids.Session(time.Now()), ToGeneration: 1}
	if cur != nil {
		tr.FromSessionID, tr.FromBindingID, tr.FromGeneration = cur.SessionID, cur.Binding.BindingID, cur.Binding.Generation
		tr.FromThreadID, tr.ToGeneration = cur.Binding.NativeThreadID, cur.Binding.Generation+1
	} else {
		tr.FromThreadID = id.ThreadID
	}
	if thread != "" {
		prev, err := s.o.Store.SessionByThread(ctx, p.Agent, thread)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return fail(err)
		case prev.Status == store.SessionBound:
			return fail(fmt.Errorf("%w: thread %s is bound by session %s in another pane; detach that Session first", termapi.ErrRefused, thread, prev.SessionID))
		default:
			tr.TargetSessionID = prev.SessionID
			if prev.Binding != nil && prev.Binding.Generation >= tr.ToGeneration {
				tr.ToGeneration = prev.Binding.Generation + 1
			}
		}
	}
	// The transition's lease says it is being run: a process that cannot
	// prove this one dead (another host) recovers it only once the lease
	// runs out.
	release, err := s.holdWork(ctx, store.LeaseTransition, tr.TransitionID, leaseTTL)
	if err != nil {
		return fail(err)
	}
	defer release()
	if err := s.o.Store.PrepareTransition(ctx, tr); err != nil {
		switch {
		case errors.Is(err, store.ErrTerminalBusy):
			return fail(fmt.Errorf("%w: unresolved work on the terminal: %w", termapi.ErrRefused, err))
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrThreadBound):
			return fail(fmt.Errorf("%w: the terminal's binding changed meanwhile (%w); run `clawconnect terminal list` and try again", termapi.ErrRefused, err))
		}
		return fail(err)
	}
	s.o.Announcer.Changed()
	s.log.Info("transition prepared", "transition_id", tr.TransitionID, "kind", kind, "terminal_id", p.TerminalID)
	tr, err = s.run(ctx, tr, p, a, id)
	v := View(tr)
	if err != nil {
		return v, fmt.Errorf("%s: %w", op, err)
	}
	return v, nil
}

// step advances tr to status (setting its reason) and announces it.
func (s *Service) step(ctx context.Context, tr *store.Transition, status, reason string) error {
	next := *tr
	next.Status, next.UpdatedAt = status, nowMs()
	if reason != "" {
		next.Reason = reason
	}
	switch status {
	case store.TransitionDispatching:
		next.DispatchedAt = next.UpdatedAt
	case store.TransitionSubmitted:
		next.SubmittedAt = next.UpdatedAt
	case store.TransitionVerified:
		next.VerifiedAt = next.UpdatedAt
	case store.TransitionAborted:
		next.EndedAt = next.UpdatedAt
	}
	if err := s.o.Store.AdvanceTransition(context.WithoutCancel(ctx), &next); err != nil {
		return err
	}
	*tr = next
	s.o.Announcer.Changed()
	if h := s.o.Stepped; h != nil {
		h(status)
	}
	return nil
}

// settle ends a failed step: aborted when nothing reached the pane, else
// uncertain; the returned error carries reason.
func (s *Service) settle(ctx context.Context, tr *store.Transition, status, reason string, cause error) (*store.Transition, error) {
	if err := s.step(ctx, tr, status, reason); err != nil {
		return tr, errors.Join(fmt.Errorf("%s: %w", reason, cause), err)
	}
	if status == store.TransitionUncertain {
		return tr, fmt.Errorf("%w: %s; settle it with `%s` or `%s`", termapi.ErrOutcomeUncertain, reason, recoveryActions(tr.TransitionID)[0], recoveryActions(tr.TransitionID)[1])
	}
	return tr, fmt.Errorf("%s: %w", reason, cause)
}

// run drives the prepared tr to committed, aborted or uncertain.
func (s *Service) run(ctx context.Context, tr *store.Transition, p agents.Pane, a agents.Agent, before agents.Identity) (*store.Transition, error) {
	if tr.Kind == store.TransitionAdopt {
		if err := s.step(ctx, tr, store.TransitionVerified, ""); err != nil {
			return tr, err
		}
		tr.ObservedThreadID, tr.ObservedFile = before.ThreadID, before.File
		return s.commit(ctx, tr, p)
	}
	// Revalidate the pane right before touching it.
	live, err := s.o.Panes.Find(ctx, p.Key, p.PID, p.Birth)
	if err == nil {
		var id agents.Identity
		if id, err = s.o.Panes.Identify(ctx, a, live); err == nil && !strings.EqualFold(id.ThreadID, before.ThreadID) {
			err = fmt.Errorf("%w: the pane's thread changed since the transition was prepared", termapi.ErrRefused)
		}
	}
	if err == nil {
		err = s.o.Panes.Ready(ctx, a, live)
	}
	if err != nil {
		return s.settle(ctx, tr, store.TransitionAborted, "the pane changed before anything was typed", err)
	}
	if err := s.step(ctx, tr, store.TransitionDispatching, ""); err != nil {
		return tr, err
	}
	for i, line := range tr.Plan {
		if err := s.o.Keyboard.SendText(ctx, p, line); err != nil {
			if i == 0 && errors.Is(err, termapi.ErrInputNotSent) {
				return s.settle(ctx, tr, store.TransitionAborted, "the terminal refused the text; nothing was typed", err)
			}
			return s.settle(ctx, tr, store.TransitionUncertain, "typing "+line+" may or may not have reached the pane", err)
		}
		if !s.o.Keyboard.WaitDraft(ctx, a, p, line) {
			_ = s.o.Keyboard.SendKeys(context.WithoutCancel(ctx), p, "Escape")
			if i == 0 {
				return s.settle(ctx, tr, store.TransitionAborted, "the command did not show in the composer, so Enter was not pressed", termapi.ErrRefused)
			}
			return s.settle(ctx, tr, store.TransitionUncertain, "the command "+line+" did not show in the composer after an earlier step", termapi.ErrRefused)
		}
		if err := s.o.Keyboard.SendKeys(ctx, p, "Enter"); err != nil {
			return s.settle(ctx, tr, store.TransitionUncertain, "pressing Enter after "+line+" failed", err)
		}
	}
	if err := s.step(ctx, tr, store.TransitionSubmitted, ""); err != nil {
		return tr, err
	}
	id, err := s.verify(ctx, tr, p, a)
	if err != nil {
		return s.settle(ctx, tr, store.TransitionUncertain, err.Error(), termapi.ErrOutcomeUncertain)
	}
	tr.ObservedThreadID, tr.ObservedFile = id.ThreadID, id.File
	if err := s.step(ctx, tr, store.TransitionVerified, ""); err != nil {
		return tr, err
	}
	return s.commit(ctx, tr, p)
}

// proves reports whether the pane's identity id proves tr done.
func proves(tr *store.Transition, id agents.Identity) bool {
	switch tr.Kind {
	case store.TransitionResumeThread, store.TransitionAdopt:
		return id.ThreadID != "" && strings.EqualFold(id.ThreadID, tr.TargetThreadID)
	}
	return id.ThreadID != "" && !strings.EqualFold(id.ThreadID, tr.FromThreadID)
}

// verify waits (bounded) until the agent's files show the thread
// tr asked for and the pane is idle again.
func (s *Service) verify(ctx context.Context, tr *store.Transition, p agents.Pane, a agents.Agent) (agents.Identity, error) {
	deadline := time.Now().Add(verifyTimeout)
	last := "no identity read yet"
	for {
		id, err := a.Identify(ctx, p)
		switch {
		case err != nil:
			last = "identify: " + err.Error()
		case proves(tr, id):
			if text, err := s.o.Panes.Capture(ctx, p); err == nil && a.Screen(text).Activity == "idle" {
				return id, nil
			}
			last = "the pane is not idle yet"
		default:
			last = "the agent's files still name thread " + id.ThreadID
		}
		if time.Now().After(deadline) {
			return agents.Identity{}, fmt.Errorf("the transition is not proven after %s (%s)", verifyTimeout, last)
		}
		select {
		case <-ctx.Done():
			return agents.Identity{}, fmt.Errorf("the transition was interrupted before it was proven: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// commit writes the verified tr: the Session it leaves is detached behind
// a new binding at the new generation (so nothing prepared for the old
// binding lands), and the target Session is created or reactivated.
func (s *Service) commit(ctx context.Context, tr *store.Transition, p agents.Pane) (*store.Transition, error) {
	ctx = context.WithoutCancel(ctx)
	now := nowMs()
	next := *tr
	next.Status, next.UpdatedAt, next.EndedAt = store.TransitionCommitted, now, now
	var writes []*store.TermSession
	if tr.FromSessionID != "" && tr.FromSessionID != tr.TargetSessionID {
		old, err := s.o.Store.GetTermSession(ctx, tr.FromSessionID)
		if err != nil {
			return s.settle(ctx, tr, store.TransitionUncertain, "read the Session the transition leaves", err)
		}
		b := *old.Binding
		b.BindingID, b.Generation, b.Checkpoint = ids.Binding(), tr.ToGeneration, nil
		old.Binding, old.Status, old.DetachedAt, old.UpdatedAt = &b, store.SessionDetached, now, now
		writes = append(writes, old)
	}
	binding := &store.Binding{BindingID: ids.Binding(), Generation: tr.ToGeneration, TerminalID: p.TerminalID, TerminalKey: p.Key,
		NativeThreadID: tr.ObservedThreadID, NativeProcess: store.NativeProcess{PID: p.PID, ProcessBirth: p.Birth, Rollout: tr.ObservedFile},
		BoundAt: now, LastVerifiedAt: now}
	target, err := s.o.Store.GetTermSession(ctx, tr.TargetSessionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		created := map[string]string{store.TransitionAdopt: "human_observed"}[tr.Kind]
		if created == "" {
			created = tr.Kind
		}
		lin := store.Lineage{CreatedBy: created, PreviousSessionID: tr.FromSessionID}
		if tr.Kind == store.TransitionResumeThread {
			lin.ResumedFromNativeThreadID = tr.TargetThreadID
		}
		target = &store.TermSession{SessionID: tr.TargetSessionID, Agent: tr.Agent, Workspace: tr.Workspace, Status: store.SessionBound,
			Binding: binding, Lineage: lin, CreatedAt: now, UpdatedAt: now}
	case err != nil:
		return s.settle(ctx, tr, store.TransitionUncertain, "read the target Session", err)
	default:
		target.Binding, target.Status, target.DetachedAt, target.UpdatedAt = binding, store.SessionBound, 0, now
	}
	writes = append(writes, target)
	if err := s.o.Store.CommitTransition(ctx, store.TransitionCommit{Transition: &next, Sessions: writes}); err != nil {
		return s.settle(ctx, tr, store.TransitionUncertain, "commit the verified transition: "+err.Error(), err)
	}
	*tr = next
	s.o.Announcer.Changed()
	s.log.Info("transition committed", "transition_id", tr.TransitionID, "session_id", tr.TargetSessionID, "generation", tr.ToGeneration)
	return tr, nil
}
