package transition

import (
	"context"
	"errors"
	"fmt"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/ids"

	"github.com/clawconnect/clawconnect/termapi"
)

// Reading and settling transitions: the view of a record, the recovery
// actions of one left unfinished, and the settling of those whose owner
// ended or that a person resolves.

// View is the visible state of a transition record.
func View(t *store.Transition) termapi.TransitionView {
	v := termapi.TransitionView{TransitionID: t.TransitionID, Kind: t.Kind, Status: t.Status, TerminalID: t.TerminalID, Agent: t.Agent,
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

// Get returns the transition record's view. It changes nothing.
func (s *Service) Get(ctx context.Context, id string) (termapi.TransitionView, error) {
	if err := ids.Check("transition id", "transition-", id); err != nil {
		return termapi.TransitionView{}, fmt.Errorf("transition: %w", err)
	}
	tr, err := s.o.Store.GetTransition(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return termapi.TransitionView{}, fmt.Errorf("transition: %w: no transition %s", termapi.ErrNotFound, id)
	}
	if err != nil {
		return termapi.TransitionView{}, fmt.Errorf("transition: %w", err)
	}
	return View(tr), nil
}

// Resolve settles a transition left uncertain (or whose owner
// process died): adopt re-verifies it from the agent's files and commits
// it only if they prove it; abort ends it without touching any Session and
// frees the terminal (if the pane did switch, its row then shows a thread
// conflict to adopt or detach). A transition still run by a live process
// is refused.
func (s *Service) Resolve(ctx context.Context, id string, adopt bool) (termapi.TransitionView, error) {
	fail := func(err error) (termapi.TransitionView, error) {
		return termapi.TransitionView{}, fmt.Errorf("resolve transition: %w", err)
	}
	failWith := func(tr *store.Transition, err error) (termapi.TransitionView, error) {
		return View(tr), fmt.Errorf("resolve transition: %w", err)
	}
	if err := ids.Check("transition id", "transition-", id); err != nil {
		return fail(err)
	}
	tr, err := s.o.Store.GetTransition(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return fail(fmt.Errorf("%w: no transition %s", termapi.ErrNotFound, id))
	}
	if err != nil {
		return fail(err)
	}
	if store.TransitionFinal(tr.Status) {
		return failWith(tr, fmt.Errorf("%w: transition %s is already %s", termapi.ErrRefused, id, tr.Status))
	}
	if tr.Status != store.TransitionUncertain && !ownerGone(tr.Owner) {
		if o, ok := foreignOwner(tr.Owner); ok {
			return failWith(tr, fmt.Errorf("%w: transition %s is %s and runs in %s, which this process cannot prove ended (another host or pid namespace): resolve it there",
				termapi.ErrRefused, id, tr.Status, o))
		}
		return failWith(tr, fmt.Errorf("%w: transition %s is %s and its process (%s) still runs it", termapi.ErrRefused, id, tr.Status, ownerName(tr.Owner)))
	}
	if !adopt {
		if tr.Status == store.TransitionSubmitted || tr.Status == store.TransitionDispatching {
			if err := s.step(ctx, tr, store.TransitionUncertain, "its process exited mid-transition"); err != nil {
				return fail(err)
			}
		}
		if err := s.step(ctx, tr, store.TransitionAborted, "aborted by resolve-transition --abort"); err != nil {
			return fail(err)
		}
		return View(tr), nil
	}
	p, id2, err := s.reobserve(ctx, tr)
	if err != nil {
		return failWith(tr, err)
	}
	if !proves(tr, id2) {
		return failWith(tr, fmt.Errorf("%w: the agent's files do not prove the transition (the pane's thread is %q); abort it with --abort", termapi.ErrRefused, id2.ThreadID))
	}
	if tr, err = s.reverify(ctx, tr, p, id2); err != nil {
		return failWith(tr, err)
	}
	return View(tr), nil
}

// reobserve finds tr's pane (same process incarnation) and its identity.
func (s *Service) reobserve(ctx context.Context, tr *store.Transition) (agents.Pane, agents.Identity, error) {
	p, err := s.o.Panes.Find(ctx, tr.TerminalKey, tr.PID, tr.ProcessBirth)
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
func (s *Service) reverify(ctx context.Context, tr *store.Transition, p agents.Pane, id agents.Identity) (*store.Transition, error) {
	if tr.Status != store.TransitionUncertain && tr.Status != store.TransitionVerified {
		if err := s.step(ctx, tr, store.TransitionUncertain, "its process exited mid-transition"); err != nil {
			return tr, err
		}
	}
	tr.ObservedThreadID, tr.ObservedFile = id.ThreadID, id.File
	if tr.Status == store.TransitionUncertain {
		if err := s.step(ctx, tr, store.TransitionVerified, "re-verified from the agent's files"); err != nil {
			return tr, err
		}
	}
	return s.commit(ctx, tr, p)
}

// Recover settles the open transitions whose owner process is
// provably gone (a crash mid-transition) or whose transition lease ran out
// (its owner, on another host, stopped renewing it; a live owner there is
// left alone): one that typed nothing is aborted; one the agent's files
// prove is committed; any other becomes uncertain, which keeps its
// terminal blocked until resolve-transition. It returns how many it
// changed. The monitor host calls it at every scan; it reads the leases
// of the open transitions and writes only what it settles.
func (s *Service) Recover(ctx context.Context) (int, error) {
	open, err := s.o.Store.OpenTransitions(ctx, 100)
	if err != nil {
		return 0, fmt.Errorf("recover transitions: %w", err)
	}
	openIDs := make([]string, len(open))
	for i, tr := range open {
		openIDs[i] = tr.TransitionID
	}
	leases, err := s.o.Store.WorkLeases(ctx, store.LeaseTransition, openIDs)
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
			if err := s.step(ctx, tr, store.TransitionAborted, "its process exited before anything was typed"); err != nil {
				s.log.Warn("recover transition", "transition_id", tr.TransitionID, "err", err)
			}
			continue
		}
		p, id, err := s.reobserve(ctx, tr)
		if err == nil && proves(tr, id) {
			if _, err := s.reverify(ctx, tr, p, id); err == nil {
				continue
			}
		}
		if tr.Status != store.TransitionUncertain {
			reason := "its process exited mid-transition and the agent's files do not prove it"
			if err := s.step(ctx, tr, store.TransitionUncertain, reason); err != nil {
				s.log.Warn("recover transition", "transition_id", tr.TransitionID, "err", err)
			}
		}
	}
	return n, nil
}
