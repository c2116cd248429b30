package terminal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"

	"github.com/clawconnect/clawconnect/internal/terminal/transition"
	"github.com/clawconnect/clawconnect/termapi"
)

// List returns one row per live agent pane, with the exact send scope
// allowed now. It changes nothing.
func (s *Service) List(ctx context.Context) (termapi.ListResult, error) {
	s.followRecorded(ctx)
	panes, err := s.o.Terminals.Discover(ctx)
	if err != nil {
		return termapi.ListResult{}, fmt.Errorf("list: discover panes: %w", err)
	}
	// Each row captures its pane (one tmux call) and reads the agent's
	// files: build them a few at a time.
	rows := make([]termapi.TerminalRow, len(panes))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, p := range panes {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			rows[i] = s.row(ctx, p)
		}()
	}
	wg.Wait()
	s.inputs.keep(panes)
	return termapi.ListResult{Terminals: rows}, nil
}

func (s *Service) row(ctx context.Context, p agents.Pane) termapi.TerminalRow {
	r := termapi.TerminalRow{ID: p.TerminalID, Agent: p.Agent, PID: p.PID, Cwd: p.Cwd, ActivityState: "unknown",
		ManagementState: "unmanaged", AvailableActions: []termapi.Action{}}
	a, err := s.agent(p.Agent)
	if err != nil {
		r.Reason = err.Error()
		return r
	}
	if v, proven := provenance(a, p); !proven {
		r.UnprovenVersion = v
	}
	var sc agents.Screen
	if text, err := s.o.Terminals.Capture(ctx, p); err == nil {
		sc = a.Screen(text)
		r.ActivityState = sc.Activity
		if sc.Approval != nil {
			r.ActivityState = "awaiting_approval"
		}
	}
	id, idErr := s.identify(ctx, a, p)
	var sess *store.TermSession
	if idErr == nil && id.ThreadID != "" {
		sess, _ = s.o.Store.SessionByThread(ctx, p.Agent, id.ThreadID)
	} else if idErr == nil {
		list, _ := s.o.Store.SessionsByTerminal(ctx, p.Key)
		for _, c := range list {
			if b := c.Binding; b != nil && b.NativeThreadID == "" && b.NativeProcess.PID == p.PID && b.NativeProcess.ProcessBirth == p.Birth {
				sess = c
				break
			}
		}
	}
	exact := false
	if sess != nil {
		b := sess.Binding
		r.SessionID = sess.SessionID
		switch {
		case b == nil || sess.Status != store.SessionBound:
			r.ManagementState = "conflict"
			r.Reason = "session " + sess.SessionID + " is " + sess.Status
		case b.TerminalKey != p.Key:
			r.ManagementState = "conflict"
			r.Reason = "the native thread is bound to session " + sess.SessionID + " in another pane"
		default:
			r.ManagementState = "managed"
			exact = b.NativeProcess.PID == p.PID && b.NativeProcess.ProcessBirth == p.Birth
			if exact && len(b.Checkpoint) > 0 {
				if human, err := s.inputs.since(ctx, a, p, b.Checkpoint); err != nil || human {
					exact = false
				}
			}
		}
		if turns, err := s.o.Store.SessionTurns(ctx, sess.SessionID, 1); err == nil && len(turns) == 1 {
			t := turns[0]
			r.CurrentTurn = &termapi.TurnRef{TurnID: t.TurnID, Status: t.Status,
				Shown: ShownStatus(termapi.TurnView{Status: t.Status, OriginSession: t.OriginSessionKey, Approval: t.Approval})}
		}
	}
	var blocked []string
	if idErr == nil {
		blocked = append(blocked, transition.FillRow(ctx, s.o.Store, p, id, sess, &r)...)
	}
	if p.NotControllable {
		blocked = append(blocked, "not controllable: "+p.Reason)
	}
	if idErr != nil {
		blocked = append(blocked, "native identity unknown: "+idErr.Error())
	}
	switch {
	case sc.Approval != nil:
		blocked = append(blocked, "an approval prompt is open")
	case sc.Dialog:
		blocked = append(blocked, "a dialog is open")
	case sc.Activity != "idle":
		blocked = append(blocked, "the agent is "+r.ActivityState)
	case !sc.ComposerEmpty:
		blocked = append(blocked, "the composer holds unsent text")
	}
	if r.CurrentTurn != nil && r.CurrentTurn.Status.SendBlocking() {
		blocked = append(blocked, "turn "+r.CurrentTurn.TurnID+" is "+string(r.CurrentTurn.Status))
	}
	if d, err := s.o.Store.GetDispatch(ctx, p.Key); err == nil && d.MessageType != store.DispatchTransition {
		var owner termapi.TurnStatus
		if t, err := s.o.Store.GetTurn(ctx, d.TurnID); err == nil {
			owner = t.Status
		} else if !errors.Is(err, store.ErrNotFound) {
			owner = "unknown"
		}
		if d.Blocks(owner) {
			blocked = append(blocked, "turn "+d.TurnID+" owns the next input (dispatch "+string(d.Status)+"; close it after checking the pane)")
		}
	}
	if r.ManagementState == "conflict" {
		blocked = append(blocked, r.Reason)
	}
	if len(blocked) > 0 {
		r.Reason = strings.Join(blocked, "; ")
		return r
	}
	if exact {
		r.AvailableActions = append(r.AvailableActions, termapi.Action{Action: "send", Scope: ScopeSessionExact,
			Arguments: map[string]string{"session_id": sess.SessionID}, MissingRequired: []string{"request"}})
	}
	r.AvailableActions = append(r.AvailableActions, termapi.Action{Action: "send", Scope: ScopeTerminalFollowCurrent,
		Arguments: map[string]string{"terminal_id": p.TerminalID}, MissingRequired: []string{"request"}})
	return r
}
