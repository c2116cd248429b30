package terminal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/proc"

	"github.com/clawconnect/clawconnect/termapi"
)

// Native thread transitions: new-thread,
// clear-thread and resume-thread drive the agent's own control in the pane;
// adopt-thread takes over a thread a human switched to. Each is recorded in
// the store before the pane is touched, verified from the agent's own files,
// and committed with its Session writes in one store write. A transition
// creates no Turn: the next ordinary send starts the first Turn of the new
// context.

// ThreadsResult is what Threads returns.
type ThreadsResult struct {
	TerminalID string                `json:"terminal_id"`
	Agent      string                `json:"agent"`
	Workspace  string                `json:"workspace"`
	Threads    []agents.NativeThread `json:"threads"`
}

// TransitionView is termapi.TransitionView.
type TransitionView = termapi.TransitionView

func transitionView(t *store.Transition) TransitionView {
	v := TransitionView{TransitionID: t.TransitionID, Kind: t.Kind, Status: t.Status, TerminalID: t.TerminalID, Agent: t.Agent,
		AgentVersion: t.AgentVersion, FromSessionID: t.FromSessionID, FromGeneration: t.FromGeneration, FromThreadID: t.FromThreadID,
		SessionID: t.TargetSessionID, Generation: t.ToGeneration, ThreadID: t.TargetThreadID, Reason: t.Reason,
		PreparedAt: t.PreparedAt, UpdatedAt: t.UpdatedAt}
	if t.ObservedThreadID != "" {
		v.ThreadID = t.ObservedThreadID
	}
	if !store.TransitionFinal(t.Status) {
		v.RecoveryActions = recoveryActions(t.TransitionID)
		if id, ok := foreignOwner(t.Owner); ok && v.Reason == "" {
			v.Reason = "run by " + id.String() + ", which this process cannot prove ended (another host or pid namespace); recovery here waits until its transition lease runs out"
		}
	}
	return v
}

func recoveryActions(id string) []string {
	return []string{"clawconnect terminal resolve-transition " + id + " --adopt",
		"clawconnect terminal resolve-transition " + id + " --abort"}
}

// transitionVerifyTimeout bounds the wait for the agent's files to show the
// thread a transition asked for.
const transitionVerifyTimeout = 15 * time.Second

// selfIdentity is this process as the owner of the transitions it runs:
// the identity task and terminal leases use (host and pid namespace, pid,
// boot id and start time), so any process sharing the store can tell
// whether it can prove the owner dead.
var selfIdentity = sync.OnceValue(owner.Self)

// selfOwner is selfIdentity as a transition records it.
var selfOwner = sync.OnceValue(func() string { return selfIdentity().Encode() })

// ownerGone reports whether the process that owns a transition has
// provably exited. An owner on another host, boot or pid namespace is
// never proven gone from here: its transition is left as it is (there is
// no lease to run out) until a process that can see it settles it.
func ownerGone(o string) bool {
	if o == selfOwner() {
		return false
	}
	if id, err := owner.Decode(o); err == nil {
		return selfIdentity().Dead(id.Process("", 0))
	}
	// Owners written before transitions recorded the whole identity,
	// "pid:<pid>:start:<ticks>", are processes of this host.
	pid, ticks, err := proc.ParseIncarnation(o)
	if err != nil {
		return true
	}
	alive, err := proc.Alive(pid, ticks)
	return err == nil && !alive
}

// foreignOwner returns a transition owner that runs where this process
// cannot see it (another host or pid namespace, or either unknown).
func foreignOwner(o string) (owner.Identity, bool) {
	id, err := owner.Decode(o)
	if err != nil {
		return id, false
	}
	self := selfIdentity()
	return id, id.Host == "" || self.Host == "" || id.Host != self.Host
}

// transitionLeaseTTL is how long a transition's lease lasts unrenewed;
// the process running it renews it every third of that.
const transitionLeaseTTL = 2 * time.Minute

// holdWork claims kind's lease of id for this process (selfIdentity) and
// renews it in the background until the returned release ends it: work a
// command runs itself, such as a thread transition.
//
// While it holds such work the process is registered in the store's
// process registry under that identity (role WorkRole), so a host that
// proves it dead frees the lease at once (owner.Identity.ReapDead), as it
// does a dead host's, instead of waiting out the lease.
func (s *Service) holdWork(ctx context.Context, kind, id string, ttl time.Duration) (release func(), err error) {
	reg, _ := s.o.Store.(registry)
	if reg != nil {
		s.mu.Lock()
		s.holding++
		s.mu.Unlock()
		s.beatHolder(ctx, reg) // registered before the lease names it
	}
	unregister := func() {
		if reg == nil {
			return
		}
		s.mu.Lock()
		s.holding--
		last := s.holding == 0
		s.mu.Unlock()
		if last {
			if err := reg.RemoveProcess(context.WithoutCancel(ctx), selfIdentity().ID); err != nil {
				s.log.Warn("leave the process registry", "err", err)
			}
		}
	}
	now := time.Now()
	l, err := s.o.Store.ClaimWork(ctx, kind, id, selfIdentity().ID, now.UnixMilli(), now.Add(ttl).UnixMilli())
	if err != nil {
		unregister()
		return nil, fmt.Errorf("claim the %s lease: %w", kind, err)
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-tick.C:
				if reg != nil {
					s.beatHolder(rctx, reg)
				}
				lost, err := s.o.Store.RenewWork(rctx, kind, l.Owner, time.Now().Add(ttl).UnixMilli(), []string{id})
				if err == nil && len(lost) > 0 {
					err = store.ErrLeaseLost
				}
				if err != nil && rctx.Err() == nil {
					s.log.Warn("renew work lease", "kind", kind, "id", id, "err", err)
				}
			}
		}
	}()
	return func() {
		stop()
		<-done
		if err := s.o.Store.ReleaseWork(context.WithoutCancel(ctx), l); err != nil {
			s.log.Warn("release work lease", "kind", kind, "id", id, "err", err)
		}
		unregister()
	}, nil
}

// WorkRole is the process-registry role of a process while it holds work
// leases of its own (a thread transition it runs). It does not start with
// HostRole: such a process follows no one else's work.
const WorkRole = "transition"

// beatHolder registers (or refreshes) this process as the owner of the
// work it holds for itself.
func (s *Service) beatHolder(ctx context.Context, reg registry) {
	if err := reg.Heartbeat(ctx, selfIdentity().Process(WorkRole, time.Now().UnixMilli())); err != nil && ctx.Err() == nil {
		s.log.Warn("register as a work lease owner", "err", err)
	}
}

// ownerName names a transition's owner for a reader.
func ownerName(o string) string {
	if id, err := owner.Decode(o); err == nil {
		return id.String()
	}
	return o
}

func (s *Service) transitions() (store.TransitionStore, error) {
	ts, ok := s.o.Store.(store.TransitionStore)
	if !ok {
		return nil, fmt.Errorf("%w: this store keeps no thread transitions", ErrRefused)
	}
	return ts, nil
}

// NewThread starts a new native thread in the terminal's agent (its own
// new-thread control). See transition for the guarantees.
func (s *Service) NewThread(ctx context.Context, terminalID string) (TransitionView, error) {
	return s.transition(ctx, store.TransitionNewThread, terminalID, "")
}

// ClearThread clears the terminal agent's context into a new native thread.
func (s *Service) ClearThread(ctx context.Context, terminalID string) (TransitionView, error) {
	return s.transition(ctx, store.TransitionClearThread, terminalID, "")
}

// ResumeThread resumes one of the workspace's native threads (an id Threads
// lists) in the terminal's agent.
func (s *Service) ResumeThread(ctx context.Context, terminalID, threadID string) (TransitionView, error) {
	return s.transition(ctx, store.TransitionResumeThread, terminalID, threadID)
}

// AdoptThread binds the thread a human switched the pane to: the Session
// bound to the pane is left detached, the pane's thread gets a Session (a
// new one, or its detached one reactivated) at the next generation.
// Nothing is typed.
func (s *Service) AdoptThread(ctx context.Context, terminalID string) (TransitionView, error) {
	return s.transition(ctx, store.TransitionAdopt, terminalID, "")
}

// paneBinding returns the Session bound to the pane's process incarnation
// (nil if none) and whether its thread differs from the pane's (a human
// switched the thread).
func (s *Service) paneBinding(ctx context.Context, p agents.Pane, id agents.Identity) (*store.TermSession, bool, error) {
	list, err := s.o.Store.SessionsByTerminal(ctx, p.Key)
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

func (s *Service) transition(ctx context.Context, kind, terminalID, thread string) (TransitionView, error) {
	op := strings.ReplaceAll(kind, "_", "-")
	if kind == store.TransitionAdopt {
		op = "adopt-thread"
	}
	fail := func(err error) (TransitionView, error) { return TransitionView{}, fmt.Errorf("%s: %w", op, err) }
	if err := checkTerminalID(terminalID); err != nil {
		return fail(err)
	}
	if kind == store.TransitionResumeThread && !agents.ValidThreadID(thread) {
		return fail(fmt.Errorf("%w: native thread id %q is not a complete thread id (a UUID); copy one from `clawconnect terminal threads %s`", ErrBadInput, thread, terminalID))
	}
	ts, err := s.transitions()
	if err != nil {
		return fail(err)
	}
	p, a, id, err := s.followTarget(ctx, terminalID)
	if err != nil {
		return fail(err)
	}
	cur, conflict, err := s.paneBinding(ctx, p, id)
	if err != nil {
		return fail(err)
	}
	var version string
	var plan []string
	if kind == store.TransitionAdopt {
		if !conflict {
			return fail(fmt.Errorf("%w: the pane shows the thread its Session is bound to; there is nothing to adopt", ErrRefused))
		}
		thread = id.ThreadID
	} else {
		if conflict {
			return fail(fmt.Errorf("%w: %s", ErrRefused, conflictReason(cur, p, id)))
		}
		tc, ok := a.(agents.ThreadControl)
		if !ok {
			return fail(fmt.Errorf("%w: the %s reader has no native thread controls", ErrRefused, p.Agent))
		}
		if kind == store.TransitionResumeThread {
			if strings.EqualFold(thread, id.ThreadID) {
				return fail(fmt.Errorf("%w: thread %s is already the pane's current thread", ErrRefused, thread))
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
				return fail(fmt.Errorf("%w: thread %s is not a resumable thread of this pane's workspace; `clawconnect terminal threads %s` lists them", ErrNotFound, thread, terminalID))
			}
		}
		if version, plan, err = tc.ThreadPlan(ctx, p, kind, thread); err != nil {
			return fail(err)
		}
		if _, err := s.checkScreen(ctx, a, p); err != nil {
			return fail(err)
		}
	}
	now := nowMs()
	tr := &store.Transition{TransitionID: "transition-" + uuid(), Kind: kind, Agent: p.Agent, AgentVersion: version,
		TerminalID: p.TerminalID, TerminalKey: p.Key, PID: p.PID, ProcessBirth: p.Birth, Workspace: p.Cwd,
		TargetThreadID: thread, Plan: plan, Owner: selfOwner(), PreparedAt: now, Status: store.TransitionPrepared, UpdatedAt: now,
		TargetSessionID: newSessionID(time.Now()), ToGeneration: 1}
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
			return fail(fmt.Errorf("%w: thread %s is bound by session %s in another pane; detach that Session first", ErrRefused, thread, prev.SessionID))
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
	release, err := s.holdWork(ctx, store.LeaseTransition, tr.TransitionID, transitionLeaseTTL)
	if err != nil {
		return fail(err)
	}
	defer release()
	if err := ts.PrepareTransition(ctx, tr); err != nil {
		switch {
		case errors.Is(err, store.ErrTerminalBusy):
			return fail(fmt.Errorf("%w: unresolved work on the terminal: %w", ErrRefused, err))
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrThreadBound):
			return fail(fmt.Errorf("%w: the terminal's binding changed meanwhile (%w); run `clawconnect terminal list` and try again", ErrRefused, err))
		}
		return fail(err)
	}
	s.notify()
	s.log.Info("transition prepared", "transition_id", tr.TransitionID, "kind", kind, "terminal_id", p.TerminalID)
	tr, err = s.runTransition(ctx, ts, tr, p, a, id)
	v := transitionView(tr)
	if err != nil {
		return v, fmt.Errorf("%s: %w", op, err)
	}
	return v, nil
}

// step advances tr to status (setting its reason) and announces it.
func (s *Service) step(ctx context.Context, ts store.TransitionStore, tr *store.Transition, status, reason string) error {
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
	if err := ts.AdvanceTransition(context.WithoutCancel(ctx), &next); err != nil {
		return err
	}
	*tr = next
	s.notify()
	if h := s.transitionHook; h != nil {
		h(status)
	}
	return nil
}

// settle ends a failed step: aborted when nothing reached the pane, else
// uncertain; the returned error carries reason.
func (s *Service) settle(ctx context.Context, ts store.TransitionStore, tr *store.Transition, status, reason string, cause error) (*store.Transition, error) {
	if err := s.step(ctx, ts, tr, status, reason); err != nil {
		return tr, errors.Join(fmt.Errorf("%s: %w", reason, cause), err)
	}
	if status == store.TransitionUncertain {
		return tr, fmt.Errorf("%w: %s; settle it with `%s` or `%s`", ErrOutcomeUncertain, reason, recoveryActions(tr.TransitionID)[0], recoveryActions(tr.TransitionID)[1])
	}
	return tr, fmt.Errorf("%s: %w", reason, cause)
}

func (s *Service) runTransition(ctx context.Context, ts store.TransitionStore, tr *store.Transition, p agents.Pane, a agents.Agent, before agents.Identity) (*store.Transition, error) {
	if tr.Kind == store.TransitionAdopt {
		if err := s.step(ctx, ts, tr, store.TransitionVerified, ""); err != nil {
			return tr, err
		}
		tr.ObservedThreadID, tr.ObservedFile = before.ThreadID, before.File
		return s.commit(ctx, ts, tr, p)
	}
	// Revalidate the pane right before touching it.
	live, err := s.findPane(ctx, p.Key, p.PID, p.Birth)
	if err == nil {
		var id agents.Identity
		if id, err = s.identify(ctx, a, live); err == nil && !strings.EqualFold(id.ThreadID, before.ThreadID) {
			err = fmt.Errorf("%w: the pane's thread changed since the transition was prepared", ErrRefused)
		}
	}
	if err == nil {
		_, err = s.checkScreen(ctx, a, live)
	}
	if err != nil {
		return s.settle(ctx, ts, tr, store.TransitionAborted, "the pane changed before anything was typed", err)
	}
	if err := s.step(ctx, ts, tr, store.TransitionDispatching, ""); err != nil {
		return tr, err
	}
	for i, line := range tr.Plan {
		if err := s.o.Terminals.SendText(ctx, p, line); err != nil {
			if i == 0 && errors.Is(err, ErrInputNotSent) {
				return s.settle(ctx, ts, tr, store.TransitionAborted, "the terminal refused the text; nothing was typed", err)
			}
			return s.settle(ctx, ts, tr, store.TransitionUncertain, "typing "+line+" may or may not have reached the pane", err)
		}
		if !s.waitCommandDraft(ctx, a, p, line) {
			_ = s.o.Terminals.SendKeys(context.WithoutCancel(ctx), p, "Escape")
			if i == 0 {
				return s.settle(ctx, ts, tr, store.TransitionAborted, "the command did not show in the composer, so Enter was not pressed", ErrRefused)
			}
			return s.settle(ctx, ts, tr, store.TransitionUncertain, "the command "+line+" did not show in the composer after an earlier step", ErrRefused)
		}
		if err := s.o.Terminals.SendKeys(ctx, p, "Enter"); err != nil {
			return s.settle(ctx, ts, tr, store.TransitionUncertain, "pressing Enter after "+line+" failed", err)
		}
	}
	if err := s.step(ctx, ts, tr, store.TransitionSubmitted, ""); err != nil {
		return tr, err
	}
	id, err := s.verifyTransition(ctx, tr, p, a)
	if err != nil {
		return s.settle(ctx, ts, tr, store.TransitionUncertain, err.Error(), ErrOutcomeUncertain)
	}
	tr.ObservedThreadID, tr.ObservedFile = id.ThreadID, id.File
	if err := s.step(ctx, ts, tr, store.TransitionVerified, ""); err != nil {
		return tr, err
	}
	return s.commit(ctx, ts, tr, p)
}

// proves reports whether the pane's identity id proves tr done.
func proves(tr *store.Transition, id agents.Identity) bool {
	switch tr.Kind {
	case store.TransitionResumeThread, store.TransitionAdopt:
		return id.ThreadID != "" && strings.EqualFold(id.ThreadID, tr.TargetThreadID)
	}
	return id.ThreadID != "" && !strings.EqualFold(id.ThreadID, tr.FromThreadID)
}

// verifyTransition waits (bounded) until the agent's files show the thread
// tr asked for and the pane is idle again.
func (s *Service) verifyTransition(ctx context.Context, tr *store.Transition, p agents.Pane, a agents.Agent) (agents.Identity, error) {
	deadline := time.Now().Add(transitionVerifyTimeout)
	last := "no identity read yet"
	for {
		id, err := a.Identify(ctx, p)
		switch {
		case err != nil:
			last = "identify: " + err.Error()
		case proves(tr, id):
			if text, err := s.o.Terminals.Capture(ctx, p); err == nil && a.Screen(text).Activity == "idle" {
				return id, nil
			}
			last = "the pane is not idle yet"
		default:
			last = "the agent's files still name thread " + id.ThreadID
		}
		if time.Now().After(deadline) {
			return agents.Identity{}, fmt.Errorf("the transition is not proven after %s (%s)", transitionVerifyTimeout, last)
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
func (s *Service) commit(ctx context.Context, ts store.TransitionStore, tr *store.Transition, p agents.Pane) (*store.Transition, error) {
	ctx = context.WithoutCancel(ctx)
	now := nowMs()
	next := *tr
	next.Status, next.UpdatedAt, next.EndedAt = store.TransitionCommitted, now, now
	var writes []*store.TermSession
	if tr.FromSessionID != "" && tr.FromSessionID != tr.TargetSessionID {
		old, err := s.o.Store.GetTermSession(ctx, tr.FromSessionID)
		if err != nil {
			return s.settle(ctx, ts, tr, store.TransitionUncertain, "read the Session the transition leaves", err)
		}
		b := *old.Binding
		b.BindingID, b.Generation, b.Checkpoint = newBindingID(), tr.ToGeneration, nil
		old.Binding, old.Status, old.DetachedAt, old.UpdatedAt = &b, store.SessionDetached, now, now
		writes = append(writes, old)
	}
	binding := &store.Binding{BindingID: newBindingID(), Generation: tr.ToGeneration, TerminalID: p.TerminalID, TerminalKey: p.Key,
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
		return s.settle(ctx, ts, tr, store.TransitionUncertain, "read the target Session", err)
	default:
		target.Binding, target.Status, target.DetachedAt, target.UpdatedAt = binding, store.SessionBound, 0, now
	}
	writes = append(writes, target)
	if err := ts.CommitTransition(ctx, store.TransitionCommit{Transition: &next, Sessions: writes}); err != nil {
		return s.settle(ctx, ts, tr, store.TransitionUncertain, "commit the verified transition: "+err.Error(), err)
	}
	*tr = next
	s.notify()
	s.log.Info("transition committed", "transition_id", tr.TransitionID, "session_id", tr.TargetSessionID, "generation", tr.ToGeneration)
	return tr, nil
}

// Transition returns the transition record. It changes nothing.
func (s *Service) Transition(ctx context.Context, id string) (TransitionView, error) {
	if err := checkID("transition id", "transition-", id); err != nil {
		return TransitionView{}, fmt.Errorf("transition: %w", err)
	}
	ts, err := s.transitions()
	if err != nil {
		return TransitionView{}, fmt.Errorf("transition: %w", err)
	}
	tr, err := ts.GetTransition(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return TransitionView{}, fmt.Errorf("transition: %w: no transition %s", ErrNotFound, id)
	}
	if err != nil {
		return TransitionView{}, fmt.Errorf("transition: %w", err)
	}
	return transitionView(tr), nil
}

// ResolveTransition settles a transition left uncertain (or whose owner
// process died): adopt re-verifies it from the agent's files and commits
// it only if they prove it; abort ends it without touching any Session and
// frees the terminal (if the pane did switch, its row then shows a thread
// conflict to adopt or detach). A transition still run by a live process
// is refused.
func (s *Service) ResolveTransition(ctx context.Context, id string, adopt bool) (TransitionView, error) {
	fail := func(err error) (TransitionView, error) {
		return TransitionView{}, fmt.Errorf("resolve transition: %w", err)
	}
	failWith := func(tr *store.Transition, err error) (TransitionView, error) {
		return transitionView(tr), fmt.Errorf("resolve transition: %w", err)
	}
	if err := checkID("transition id", "transition-", id); err != nil {
		return fail(err)
	}
	ts, err := s.transitions()
	if err != nil {
		return fail(err)
	}
	tr, err := ts.GetTransition(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fail(fmt.Errorf("%w: no transition %s", ErrNotFound, id))
	}
	if err != nil {
		return fail(err)
	}
	if store.TransitionFinal(tr.Status) {
		return failWith(tr, fmt.Errorf("%w: transition %s is already %s", ErrRefused, id, tr.Status))
	}
	if tr.Status != store.TransitionUncertain && !ownerGone(tr.Owner) {
		if o, ok := foreignOwner(tr.Owner); ok {
			return failWith(tr, fmt.Errorf("%w: transition %s is %s and runs in %s, which this process cannot prove ended (another host or pid namespace): resolve it there",
				ErrRefused, id, tr.Status, o))
		}
		return failWith(tr, fmt.Errorf("%w: transition %s is %s and its process (%s) still runs it", ErrRefused, id, tr.Status, ownerName(tr.Owner)))
	}
	if !adopt {
		if tr.Status == store.TransitionSubmitted || tr.Status == store.TransitionDispatching {
			if err := s.step(ctx, ts, tr, store.TransitionUncertain, "its process exited mid-transition"); err != nil {
				return fail(err)
			}
		}
		if err := s.step(ctx, ts, tr, store.TransitionAborted, "aborted by resolve-transition --abort"); err != nil {
			return fail(err)
		}
		return transitionView(tr), nil
	}
	p, id2, err := s.reobserve(ctx, tr)
	if err != nil {
		return failWith(tr, err)
	}
	if !proves(tr, id2) {
		return failWith(tr, fmt.Errorf("%w: the agent's files do not prove the transition (the pane's thread is %q); abort it with --abort", ErrRefused, id2.ThreadID))
	}
	if tr, err = s.reverify(ctx, ts, tr, p, id2); err != nil {
		return failWith(tr, err)
	}
	return transitionView(tr), nil
}

// reobserve finds tr's pane (same process incarnation) and its identity.
func (s *Service) reobserve(ctx context.Context, tr *store.Transition) (agents.Pane, agents.Identity, error) {
	p, err := s.findPane(ctx, tr.TerminalKey, tr.PID, tr.ProcessBirth)
	if err != nil {
		return p, agents.Identity{}, err
	}
	a, err := s.agent(p.Agent)
	if err != nil {
		return p, agents.Identity{}, err
	}
	id, err := a.Identify(ctx, p)
	return p, id, err
}

// reverify moves tr to verified from evidence id and commits it.
func (s *Service) reverify(ctx context.Context, ts store.TransitionStore, tr *store.Transition, p agents.Pane, id agents.Identity) (*store.Transition, error) {
	if tr.Status != store.TransitionUncertain && tr.Status != store.TransitionVerified {
		if err := s.step(ctx, ts, tr, store.TransitionUncertain, "its process exited mid-transition"); err != nil {
			return tr, err
		}
	}
	tr.ObservedThreadID, tr.ObservedFile = id.ThreadID, id.File
	if tr.Status == store.TransitionUncertain {
		if err := s.step(ctx, ts, tr, store.TransitionVerified, "re-verified from the agent's files"); err != nil {
			return tr, err
		}
	}
	return s.commit(ctx, ts, tr, p)
}

// RecoverTransitions settles the open transitions whose owner process is
// provably gone (a crash mid-transition) or whose transition lease ran out
// (its owner, on another host, stopped renewing it; a live owner there is
// left alone): one that typed nothing is aborted; one the agent's files
// prove is committed; any other becomes uncertain, which keeps its
// terminal blocked until resolve-transition. It returns how many it
// changed. The monitor host calls it at every scan; it reads the leases
// of the open transitions and writes only what it settles.
func (s *Service) RecoverTransitions(ctx context.Context) (int, error) {
	ts, err := s.transitions()
	if err != nil {
		return 0, nil
	}
	open, err := ts.OpenTransitions(ctx, 100)
	if err != nil {
		return 0, fmt.Errorf("recover transitions: %w", err)
	}
	ids := make([]string, len(open))
	for i, tr := range open {
		ids[i] = tr.TransitionID
	}
	leases, err := s.o.Store.WorkLeases(ctx, store.LeaseTransition, ids)
	if err != nil {
		return 0, fmt.Errorf("recover transitions: %w", err)
	}
	ranOut := map[string]bool{}
	now := nowMs()
	for _, l := range leases {
		ranOut[l.ID] = l.Until < now
	}
	n := 0
	for _, tr := range open {
		if tr.Status == store.TransitionUncertain || !(ranOut[tr.TransitionID] || ownerGone(tr.Owner)) {
			continue
		}
		n++
		if tr.Status == store.TransitionPrepared {
			if err := s.step(ctx, ts, tr, store.TransitionAborted, "its process exited before anything was typed"); err != nil {
				s.log.Warn("recover transition", "transition_id", tr.TransitionID, "err", err)
			}
			continue
		}
		p, id, err := s.reobserve(ctx, tr)
		if err == nil && proves(tr, id) {
			if _, err := s.reverify(ctx, ts, tr, p, id); err == nil {
				continue
			}
		}
		if tr.Status != store.TransitionUncertain {
			reason := "its process exited mid-transition and the agent's files do not prove it"
			if err := s.step(ctx, ts, tr, store.TransitionUncertain, reason); err != nil {
				s.log.Warn("recover transition", "transition_id", tr.TransitionID, "err", err)
			}
		}
	}
	return n, nil
}

// Threads lists the native threads the terminal's agent could resume in its
// workspace, newest first, with the managed Session of each. It changes
// nothing.
func (s *Service) Threads(ctx context.Context, terminalID string) (ThreadsResult, error) {
	if err := checkTerminalID(terminalID); err != nil {
		return ThreadsResult{}, fmt.Errorf("threads: %w", err)
	}
	p, a, id, err := s.followTarget(ctx, terminalID)
	if err != nil {
		return ThreadsResult{}, fmt.Errorf("threads: %w", err)
	}
	tc, ok := a.(agents.ThreadControl)
	if !ok {
		return ThreadsResult{}, fmt.Errorf("threads: %w: the %s reader cannot list native threads", ErrRefused, p.Agent)
	}
	list, err := tc.Threads(ctx, p)
	if err != nil {
		return ThreadsResult{}, fmt.Errorf("threads: %w", err)
	}
	for i := range list {
		t := &list[i]
		t.Current = strings.EqualFold(t.ID, id.ThreadID)
		if sess, err := s.o.Store.SessionByThread(ctx, p.Agent, t.ID); err == nil {
			t.SessionID, t.SessionStatus = sess.SessionID, sess.Status
		}
	}
	if list == nil {
		list = []agents.NativeThread{}
	}
	return ThreadsResult{TerminalID: p.TerminalID, Agent: p.Agent, Workspace: p.Cwd, Threads: list}, nil
}

// ThreadConflict is termapi.ThreadConflict.
type ThreadConflict = termapi.ThreadConflict

// checkThreadSwitch refuses a follow-current send to a pane whose thread a
// human switched, until adopt-thread or detach settles it.
func (s *Service) checkThreadSwitch(ctx context.Context, p agents.Pane, id agents.Identity) error {
	cur, conflict, err := s.paneBinding(ctx, p, id)
	if err != nil {
		return err
	}
	if conflict {
		return fmt.Errorf("%w: %s", ErrRefused, conflictReason(cur, p, id))
	}
	return nil
}

// transitionRow fills the row's binding generation, thread conflict and
// open transition, and returns why they block a send.
func (s *Service) transitionRow(ctx context.Context, p agents.Pane, id agents.Identity, sess *store.TermSession, r *TerminalRow) []string {
	r.NativeThreadID = id.ThreadID
	var blocked []string
	cur, conflict, err := s.paneBinding(ctx, p, id)
	if err == nil && conflict {
		r.ManagementState = "conflict"
		r.Conflict = &ThreadConflict{SessionID: cur.SessionID, BoundThreadID: cur.Binding.NativeThreadID, PaneThreadID: id.ThreadID,
			Reason:  conflictReason(cur, p, id),
			Choices: []string{"clawconnect terminal adopt-thread " + p.TerminalID, "clawconnect terminal detach " + cur.SessionID}}
		if r.SessionID == "" {
			r.SessionID = cur.SessionID
		}
		r.BindingGeneration = cur.Binding.Generation
		blocked = append(blocked, r.Conflict.Reason)
	}
	if sess != nil && sess.Binding != nil && sess.Status == store.SessionBound && sess.Binding.TerminalKey == p.Key {
		r.BindingGeneration = sess.Binding.Generation
	} else if err == nil && cur != nil && !conflict {
		r.BindingGeneration = cur.Binding.Generation
	}
	if ts, err := s.transitions(); err == nil {
		if list, err := ts.TerminalTransitions(ctx, p.Key, 1); err == nil && len(list) == 1 && !store.TransitionFinal(list[0].Status) {
			v := transitionView(list[0])
			r.Transition = &v
			blocked = append(blocked, "thread transition "+v.TransitionID+" is "+v.Status)
		}
	}
	return blocked
}
