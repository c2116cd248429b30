// Package sessionrt is the agent-session runtime "tmux-terminal": it maps
// a ClawConnect terminal Session (its session_id is the ref's sessionId)
// and the Session's latest Turn onto the seam's observation states, sends
// a follow-up as a new Turn in session_exact scope, and detaches the
// Session without touching its pane. `clawconnect terminal module` serves
// it over the runtime-module protocol.
package sessionrt

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/termapi"
)

// RuntimeID is the id the runtime registers.
const RuntimeID = "tmux-terminal"

// Sessions is what the runtime needs from the Turn service
// (terminal.Service).
type Sessions interface {
	Session(ctx context.Context, sessionID string) (terminal.SessionView, error)
	Send(ctx context.Context, r termapi.SendRequest) (termapi.SendResult, error)
	Detach(ctx context.Context, sessionID, reason string) (terminal.SessionView, error)
}

// Open returns the Turn service for one call, or an error when it cannot be
// reached now (the store does not open); the
// runtime then reports the session unavailable.
type Open func(ctx context.Context) (Sessions, error)

// Runtime returns the tmux-terminal runtime over open.
func Runtime(open Open) agentsession.Runtime {
	return agentsession.Runtime{
		ID: RuntimeID,
		Inspect: func(ctx context.Context, ref agentsession.Ref) (*agentsession.Observation, error) {
			s, err := open(ctx)
			if err != nil {
				return unavailable(err), nil
			}
			v, err := s.Session(ctx, ref.SessionID)
			switch {
			case errors.Is(err, termapi.ErrNotFound), errors.Is(err, termapi.ErrBadInput):
				return nil, nil // no such session
			case err != nil:
				return unavailable(err), nil
			}
			return Observe(v), nil
		},
		Continue: func(ctx context.Context, ref agentsession.Ref, prompt string) (*agentsession.Observation, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, fmt.Errorf("continue: %w", err)
			}
			res, err := s.Send(ctx, termapi.SendRequest{SessionID: ref.SessionID, Request: prompt})
			if err != nil {
				if res.DoNotRetry {
					return nil, fmt.Errorf("continue: %w (the text may have reached the pane: do not send it again)", err)
				}
				return nil, fmt.Errorf("continue: %w", err)
			}
			v, err := s.Session(ctx, ref.SessionID)
			if err != nil {
				return &agentsession.Observation{State: string(agentsession.StateRunning), Detail: "turn " + res.TurnID + " sent"}, nil
			}
			return Observe(v), nil
		},
		Detach: func(ctx context.Context, ref agentsession.Ref, reason string) (*agentsession.Observation, error) {
			s, err := open(ctx)
			if err != nil {
				return nil, fmt.Errorf("detach: %w", err)
			}
			v, err := s.Detach(ctx, ref.SessionID, reason)
			if errors.Is(err, termapi.ErrNotFound) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return Observe(v), nil
		},
	}
}

func unavailable(err error) *agentsession.Observation {
	return &agentsession.Observation{State: string(agentsession.StateUnavailable), Detail: err.Error(),
		Error: &agentsession.ObservationError{Code: "terminal_unavailable", Message: err.Error()}}
}

// Observe maps a Session and its latest Turn onto an observation:
//
//   - no Turn yet: idle, without a reply;
//   - a Turn with the agent (created, running, waiting_for_agent,
//     cancelling): running;
//   - waiting_for_openclaw (an approval prompt): needs_permission;
//   - idle: idle, with the reply as finalResponse, dated when it was
//     recorded;
//   - stalled: dead when the agent process is gone, else stale;
//   - failed: failed, with the error;
//   - cancelled or closed: idle, without a reply;
//   - a detached Session: completed, with the last reply if any.
//
// lastEventAt is the time the Turn last changed (its reply's time when
// idle): what the store recorded, never the time of the look.
func Observe(v terminal.SessionView) *agentsession.Observation {
	o := &agentsession.Observation{
		StartedAt:         agentsession.Millis(v.CreatedAt),
		LastEventAt:       agentsession.Millis(v.UpdatedAt),
		ProviderSessionID: v.NativeThreadID,
		Metadata:          map[string]any{"agent": v.Agent, "session_status": v.Status},
	}
	if v.TerminalID != "" {
		o.Metadata["terminal_id"] = v.TerminalID
	}
	t := v.Latest
	if t == nil {
		o.State = string(agentsession.StateIdle)
		o.Detail = "no turn yet"
		if v.Status == store.SessionDetached {
			o.State = string(agentsession.StateCompleted)
		}
		return o
	}
	o.Metadata["turn_id"] = t.TurnID
	o.Metadata["turn_status"] = t.Status
	if v.LatestUpdatedAt > 0 {
		o.LastEventAt = agentsession.Millis(v.LatestUpdatedAt)
	}
	reply := ""
	if t.Result != nil {
		reply = t.Result.Text
	}
	switch {
	case v.Status == store.SessionDetached:
		o.State = string(agentsession.StateCompleted)
		o.Detail = "session detached"
		if t.Status == termapi.TurnIdle {
			o.FinalResponse = reply
		}
	case terminal.Running(t.Status):
		o.State = string(agentsession.StateRunning)
		o.Alive = agentsession.Bool(true)
		o.LatestResponse = reply
	case t.Status == termapi.TurnWaitingForOpenClaw:
		o.State = string(agentsession.StateNeedsPermission)
		o.Alive = agentsession.Bool(true)
		if t.Approval != nil {
			o.Detail = "approval " + t.Approval.Kind
			if t.Approval.Command != "" {
				o.Detail += ": " + t.Approval.Command
			}
		}
	case t.Status == termapi.TurnIdle:
		o.State = string(agentsession.StateIdle)
		o.Alive = agentsession.Bool(true)
		o.FinalResponse = reply
		if v.LatestIdleSince > 0 {
			o.LastEventAt = agentsession.Millis(v.LatestIdleSince)
		}
	case t.Status == termapi.TurnStalled:
		o.State = string(agentsession.StateStale)
		o.Detail = t.StalledReason
		if strings.Contains(t.StalledReason, "exited") {
			o.State = string(agentsession.StateDead)
			o.Alive = agentsession.Bool(false)
		}
	case t.Status == termapi.TurnFailed:
		o.State = string(agentsession.StateFailed)
		msg := t.DetectorDiagnostic
		if reply != "" {
			msg = reply
		}
		o.Error = &agentsession.ObservationError{Code: "turn_failed", Message: msg}
	default: // cancelled, closed
		o.State = string(agentsession.StateIdle)
		o.Detail = "turn " + string(t.Status)
	}
	return o
}
