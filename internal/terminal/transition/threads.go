package transition

import (
	"context"
	"fmt"
	"strings"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/ids"

	"github.com/clawconnect/clawconnect/termapi"
)

// The native threads of a pane: the listing a resume picks from, and the
// thread a human switched to that blocks sends until adopted or detached.

// ThreadsResult is what Threads returns.
type ThreadsResult struct {
	TerminalID string                `json:"terminal_id"`
	Agent      string                `json:"agent"`
	Workspace  string                `json:"workspace"`
	Threads    []agents.NativeThread `json:"threads"`
}

// Threads lists the native threads the terminal's agent could resume in its
// workspace, newest first, with the managed Session of each. It changes
// nothing.
func (s *Service) Threads(ctx context.Context, terminalID string) (ThreadsResult, error) {
	if err := ids.CheckTerminal(terminalID); err != nil {
		return ThreadsResult{}, fmt.Errorf("threads: %w", err)
	}
	p, a, id, err := s.o.Panes.Target(ctx, terminalID)
	if err != nil {
		return ThreadsResult{}, fmt.Errorf("threads: %w", err)
	}
	tc, ok := a.(agents.ThreadControl)
	if !ok {
		return ThreadsResult{}, fmt.Errorf("threads: %w: the %s reader cannot list native threads", termapi.ErrRefused, p.Agent)
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

// CheckSwitch refuses a follow-current send to a pane whose thread a
// human switched, until adopt-thread or detach settles it.
func CheckSwitch(ctx context.Context, st store.TerminalStore, p agents.Pane, id agents.Identity) error {
	cur, conflict, err := paneBinding(ctx, st, p, id)
	if err != nil {
		return err
	}
	if conflict {
		return fmt.Errorf("%w: %s", termapi.ErrRefused, conflictReason(cur, p, id))
	}
	return nil
}

// FillRow fills the pane's list row with its binding generation, thread
// conflict and open transition, and returns why they block a send.
func FillRow(ctx context.Context, st store.Store, p agents.Pane, id agents.Identity, sess *store.TermSession, r *termapi.TerminalRow) []string {
	r.NativeThreadID = id.ThreadID
	var blocked []string
	cur, conflict, err := paneBinding(ctx, st, p, id)
	if err == nil && conflict {
		r.ManagementState = "conflict"
		r.Conflict = &termapi.ThreadConflict{SessionID: cur.SessionID, BoundThreadID: cur.Binding.NativeThreadID, PaneThreadID: id.ThreadID,
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
	if list, err := st.TerminalTransitions(ctx, p.Key, 1); err == nil && len(list) == 1 && !store.TransitionFinal(list[0].Status) {
		v := View(list[0])
		r.Transition = &v
		blocked = append(blocked, "thread transition "+v.TransitionID+" is "+v.Status)
	}
	return blocked
}
