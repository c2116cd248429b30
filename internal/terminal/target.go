package terminal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/ids"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
	"github.com/clawconnect/clawconnect/termapi"
)

// livePane looks p up in an inventory at most maxAge old (monitors only;
// a send always discovers afresh): the pane listed under p's key that runs
// p's agent process incarnation, if any, and the inventory's error.
func (s *Service) livePane(ctx context.Context, maxAge time.Duration, p agents.Pane) (agents.Pane, bool, error) {
	s.invMu.Lock()
	defer s.invMu.Unlock()
	if s.invAt.IsZero() || time.Since(s.invAt) >= maxAge {
		panes, err := s.o.Terminals.Discover(ctx)
		s.invByKey, s.invErr, s.invAt = make(map[string][]agents.Pane, len(panes)), err, time.Now()
		for _, q := range panes {
			s.invByKey[q.Key] = append(s.invByKey[q.Key], q)
		}
	}
	found, ok := agents.Pane{}, false
	for _, q := range s.invByKey[p.Key] {
		if q.PID == p.PID && q.Birth == p.Birth {
			found, ok = q, true
		}
	}
	return found, ok, s.invErr
}

// freshness is the private token of a send target: the Session, its binding
// and the live incarnation and native thread. It is derived here and
// re-derived before every side effect; callers never pass it.
func freshness(sess *store.TermSession, p agents.Pane, id agents.Identity) string {
	b, _ := json.Marshal(map[string]any{
		"version": 2, "session_id": sess.SessionID, "status": sess.Status,
		"binding_id": sess.Binding.BindingID, "generation": sess.Binding.Generation,
		"terminal_id": p.TerminalID, "terminal_key": p.Key, "pid": p.PID, "birth": p.Birth, "thread": id.ThreadID,
	})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// findPane returns the live agent pane with terminal key, verifying (when
// pid > 0) that the same process incarnation still runs in it.
func (s *Service) findPane(ctx context.Context, key string, pid int, birth string) (agents.Pane, error) {
	s.followKey(key)
	panes, err := s.o.Terminals.Discover(ctx)
	if err != nil {
		return agents.Pane{}, fmt.Errorf("discover panes: %w", err)
	}
	var found []agents.Pane
	for _, p := range panes {
		if p.Key == key {
			found = append(found, p)
		}
	}
	switch {
	case len(found) == 0:
		return agents.Pane{}, fmt.Errorf("%w: the pane is gone or no longer runs a coding agent; run `clawconnect terminal list`", termapi.ErrRefused)
	case len(found) > 1:
		return agents.Pane{}, fmt.Errorf("%w: %d agent processes claim the pane; it is not controllable until one exits", termapi.ErrRefused, len(found))
	}
	p := found[0]
	if p.NotControllable {
		return p, fmt.Errorf("%w: the pane is not controllable now (%s)", termapi.ErrRefused, p.Reason)
	}
	if pid > 0 && (p.PID != pid || p.Birth != birth) {
		return p, fmt.Errorf("%w: the agent process in the pane changed (was pid %d, now %d); send with --terminal %s to follow the new one",
			termapi.ErrRefused, pid, p.PID, p.TerminalID)
	}
	return p, nil
}

// checkScreen refuses a pane that is busy, shows a dialog, or holds a draft.
func (s *Service) checkScreen(ctx context.Context, a agents.Agent, p agents.Pane) (agents.Screen, error) {
	sc, err := paintedScreen(ctx, s.o.Terminals, a, p)
	if err != nil {
		return agents.Screen{}, err
	}
	switch {
	case sc.Approval != nil:
		return sc, fmt.Errorf("%w: the pane shows an approval prompt; answer it (approve/cancel the Turn that owns it) before sending", termapi.ErrRefused)
	case sc.Question != nil:
		return sc, fmt.Errorf("%w: the pane shows the agent's question; answer it (respond to the Turn that owns it, or in the terminal) before sending", termapi.ErrRefused)
	case sc.Dialog:
		return sc, fmt.Errorf("%w: the pane shows a dialog or menu; close it in the terminal first", termapi.ErrRefused)
	case sc.Activity != "idle":
		return sc, fmt.Errorf("%w: the agent is busy (%s); wait for it to finish", termapi.ErrRefused, sc.Activity)
	case !sc.ComposerEmpty:
		return sc, fmt.Errorf("%w: the composer holds unsent text; clear it in the terminal first", termapi.ErrRefused)
	}
	return sc, nil
}

// paintWait bounds how long paintedScreen waits for a pane to paint.
const paintWait = 5 * time.Second

// paintedScreen reads the pane's screen. A screen that cannot be read
// (unknown activity: no composer drawn) is most often a TUI between
// clearing its screen and painting it again, as Codex does after a new
// thread, or one that has not painted yet: it waits for the pane's output
// (bounded by paintWait) and reads it again, rather than take a repaint
// for a busy agent. Without an OutputWatcher the first read stands.
func paintedScreen(ctx context.Context, terms Terminals, a agents.Agent, p agents.Pane) (agents.Screen, error) {
	text, err := terms.Capture(ctx, p)
	if err != nil {
		return agents.Screen{}, fmt.Errorf("capture pane: %w", err)
	}
	sc := a.Screen(text)
	ow, ok := terms.(OutputWatcher)
	if sc.Activity != string(screen.Unknown) || !ok {
		return sc, nil
	}
	wctx, cancel := context.WithTimeout(ctx, paintWait)
	defer cancel()
	out, err := ow.WatchOutput(wctx, p)
	if err != nil {
		return sc, nil // the screen read stands
	}
	for {
		// Read once more after the watch started: a paint between the
		// first read and the watch is not missed.
		text, err := terms.Capture(ctx, p)
		if err != nil {
			return agents.Screen{}, fmt.Errorf("capture pane: %w", err)
		}
		if sc = a.Screen(text); sc.Activity != string(screen.Unknown) {
			return sc, nil
		}
		select {
		case <-wctx.Done():
			if err := ctx.Err(); err != nil {
				return agents.Screen{}, fmt.Errorf("capture pane: %w", err)
			}
			return sc, nil
		case _, ok := <-out:
			if !ok {
				return sc, nil // the watch ended: the last read stands
			}
		}
	}
}

// exactTarget resolves a session_exact send: the Session's exact pane,
// process and native thread, with no human input since its last Turn.
func (s *Service) exactTarget(ctx context.Context, sessionID string) (*store.TermSession, agents.Pane, agents.Agent, agents.Identity, error) {
	sess, err := s.o.Store.GetTermSession(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("%w: no session %s; run `clawconnect terminal list` for current ids", termapi.ErrNotFound, sessionID)
	}
	if err != nil {
		return nil, agents.Pane{}, nil, agents.Identity{}, err
	}
	if sess.Status != store.SessionBound || sess.Binding == nil {
		return nil, agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("%w: session %s is %s, not bound to a terminal", termapi.ErrRefused, sessionID, sess.Status)
	}
	b := sess.Binding
	p, err := s.findPane(ctx, b.TerminalKey, b.NativeProcess.PID, b.NativeProcess.ProcessBirth)
	if err != nil {
		return nil, agents.Pane{}, nil, agents.Identity{}, err
	}
	a, err := s.agent(p.Agent)
	if err != nil {
		return nil, agents.Pane{}, nil, agents.Identity{}, err
	}
	id, err := s.identify(ctx, a, p)
	if err != nil {
		return nil, agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("identify the pane's native session: %w", err)
	}
	if !strings.EqualFold(id.ThreadID, b.NativeThreadID) {
		return nil, agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("%w: the pane's foreground thread changed since session %s was bound (was %q, now %q); send with --terminal %s to follow the current context",
			termapi.ErrRefused, sessionID, b.NativeThreadID, id.ThreadID, p.TerminalID)
	}
	if len(b.Checkpoint) > 0 {
		human, err := a.UserInputSince(ctx, p, b.Checkpoint)
		if err != nil {
			return nil, agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("check the session file for human input: %w", err)
		}
		if human {
			return nil, agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("%w: someone typed in the pane since the last Turn of session %s, so its exact context is gone; send with --terminal %s to follow the current context",
				termapi.ErrRefused, sessionID, p.TerminalID)
		}
	}
	return sess, p, a, id, nil
}

// identify reads the pane's foreground thread (Agent.Identify). A thread
// the agent holds locked with no session file yet is the pane's thread
// when a Session bound to this very process incarnation already names it:
// the transition that made that Session proved the thread, and its
// rollout is merely unwritten. Without this, a follow send after Codex
// closed the old thread's rollout would see a virgin pane, make a second
// Session, and then fail to bind the thread the first one holds.
func (s *Service) identify(ctx context.Context, a agents.Agent, p agents.Pane) (agents.Identity, error) {
	id, err := a.Identify(ctx, p)
	if err != nil || id.ThreadID != "" || id.Locked == "" {
		return id, err
	}
	list, err := s.o.Store.SessionsByTerminal(ctx, p.Key)
	if err != nil {
		return agents.Identity{}, fmt.Errorf("identify: sessions of the terminal: %w", err)
	}
	for _, c := range list {
		b := c.Binding
		if c.Status == store.SessionBound && b != nil && b.NativeProcess.PID == p.PID && b.NativeProcess.ProcessBirth == p.Birth &&
			strings.EqualFold(b.NativeThreadID, id.Locked) {
			id.ThreadID = b.NativeThreadID
			return id, nil
		}
	}
	return id, nil
}

// followTarget resolves a terminal_follow_current send to its live pane.
func (s *Service) followTarget(ctx context.Context, terminalID string) (agents.Pane, agents.Agent, agents.Identity, error) {
	if host, ok := s.foreign(terminalID); ok {
		return agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("%w: terminal %s runs on terminal host %s; this operation runs only there", termapi.ErrRefused, terminalID, host)
	}
	terminalID = s.ownID(terminalID)
	panes, err := s.o.Terminals.Discover(ctx)
	if err != nil {
		return agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("discover panes: %w", err)
	}
	var found []agents.Pane
	for _, p := range panes {
		if p.TerminalID == terminalID {
			found = append(found, p)
		}
	}
	switch {
	case len(found) == 0:
		return agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("%w: no live agent pane has terminal id %s (the pane is gone or its process changed); run `clawconnect terminal list`", termapi.ErrNotFound, terminalID)
	case len(found) > 1:
		return agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("%w: terminal id %s is ambiguous (%d panes on several sockets); stop one of them", termapi.ErrRefused, terminalID, len(found))
	}
	p := found[0]
	if p.NotControllable {
		return agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("%w: the pane is not controllable now (%s)", termapi.ErrRefused, p.Reason)
	}
	a, err := s.agent(p.Agent)
	if err != nil {
		return agents.Pane{}, nil, agents.Identity{}, err
	}
	id, err := s.identify(ctx, a, p)
	if err != nil {
		return agents.Pane{}, nil, agents.Identity{}, fmt.Errorf("identify the pane's native session: %w", err)
	}
	return p, a, id, nil
}

// followSession returns the Session that owns the pane's current native
// context, binding (or rebinding) it to this pane and process.
func (s *Service) followSession(ctx context.Context, p agents.Pane, id agents.Identity) (*store.TermSession, error) {
	now := nowMs()
	binding := func(gen int64) *store.Binding {
		return &store.Binding{BindingID: ids.Binding(), Generation: gen, TerminalID: p.TerminalID, TerminalKey: p.Key,
			NativeThreadID: id.ThreadID, NativeProcess: store.NativeProcess{PID: p.PID, ProcessBirth: p.Birth, Rollout: id.File},
			BoundAt: now, LastVerifiedAt: now}
	}
	var sess *store.TermSession
	if id.ThreadID != "" {
		got, err := s.o.Store.SessionByThread(ctx, p.Agent, id.ThreadID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		sess = got
	} else {
		// A virgin pane: reuse a Session already bound to this very
		// process whose thread is still unknown.
		list, err := s.o.Store.SessionsByTerminal(ctx, p.Key)
		if err != nil {
			return nil, err
		}
		for _, c := range list {
			if b := c.Binding; b != nil && b.NativeThreadID == "" && b.NativeProcess.PID == p.PID && b.NativeProcess.ProcessBirth == p.Birth {
				sess = c
				break
			}
		}
	}
	if sess == nil {
		sess = &store.TermSession{SessionID: ids.Session(time.Now()), Agent: p.Agent, Workspace: p.Cwd,
			Status: store.SessionBound, Binding: binding(1), Lineage: store.Lineage{CreatedBy: "attach"}, CreatedAt: now, UpdatedAt: now}
		if err := s.o.Store.CreateTermSession(ctx, sess); err != nil {
			return nil, fmt.Errorf("bind session: %w", err)
		}
		return sess, nil
	}
	b := sess.Binding
	if b != nil && b.TerminalKey == p.Key && b.NativeProcess.PID == p.PID && b.NativeProcess.ProcessBirth == p.Birth && sess.Status == store.SessionBound {
		return sess, nil
	}
	gen := int64(1)
	if b != nil {
		gen = b.Generation + 1
	}
	sess.Binding, sess.Status, sess.UpdatedAt = binding(gen), store.SessionBound, now
	if err := s.o.Store.SaveTermSession(ctx, sess); err != nil {
		return nil, fmt.Errorf("rebind session %s: %w", sess.SessionID, err)
	}
	return sess, nil
}
