package termapi

import (
	"context"
	"fmt"
	"strings"
)

// Candidate is a pane a delegate considered: enough for a person or a
// model to name one exactly next time.
type Candidate struct {
	TerminalID string `json:"terminal_id"`
	Agent      string `json:"agent"`
	Cwd        string `json:"cwd"`
	// Reason says why the pane cannot take work now; empty for an idle,
	// sendable pane.
	Reason string `json:"reason,omitempty"`
}

// DelegateRefusal is a delegate that found no single pane: none can take
// work now, or several can. It wraps ErrRefused.
type DelegateRefusal struct {
	// Agent is the agent kind asked for ("" = any).
	Agent string
	// Eligible is how many panes could have taken the work.
	Eligible int
	// Candidates are the eligible panes when there are several, else
	// every pane with why it cannot take work.
	Candidates []Candidate
}

func (e *DelegateRefusal) Error() string {
	var b strings.Builder
	what := "agent pane"
	if e.Agent != "" {
		what = e.Agent + " pane"
	}
	switch {
	case e.Eligible > 1:
		fmt.Fprintf(&b, "%s: %d idle %ss could take it; name one by its terminal id:", ErrRefused, e.Eligible, what)
	case len(e.Candidates) == 0:
		fmt.Fprintf(&b, "%s: no %s found; start codex or claude inside tmux", ErrRefused, what)
	default:
		fmt.Fprintf(&b, "%s: no idle %s can take it now:", ErrRefused, what)
	}
	for _, c := range e.Candidates {
		fmt.Fprintf(&b, "\n  %s (%s, %s)", c.TerminalID, c.Agent, c.Cwd)
		if c.Reason != "" {
			fmt.Fprintf(&b, ": %s", c.Reason)
		}
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrRefused) hold.
func (e *DelegateRefusal) Unwrap() error { return ErrRefused }

// Idle reports whether the pane r can take new work now: its agent is
// idle and a send is offered (no Turn runs, no dialog, nothing typed).
func Idle(r TerminalRow) bool {
	return r.ActivityState == "idle" && len(r.AvailableActions) > 0
}

// ChooseIdle picks the one idle pane of rows that runs agent ("" = any
// agent). It fails closed with a *DelegateRefusal unless exactly one
// pane qualifies, so work is never handed to a pane by guess.
func ChooseIdle(rows []TerminalRow, agent string) (TerminalRow, error) {
	var idle, all []Candidate
	var pick TerminalRow
	for _, r := range rows {
		if agent != "" && r.Agent != agent {
			continue
		}
		c := Candidate{TerminalID: r.ID, Agent: r.Agent, Cwd: r.Cwd}
		if Idle(r) {
			idle = append(idle, c)
			pick = r
			continue
		}
		c.Reason = r.Reason
		if c.Reason == "" {
			c.Reason = "the agent is " + r.ActivityState
		}
		all = append(all, c)
	}
	switch len(idle) {
	case 1:
		return pick, nil
	case 0:
		return TerminalRow{}, &DelegateRefusal{Agent: agent, Candidates: all}
	}
	return TerminalRow{}, &DelegateRefusal{Agent: agent, Eligible: len(idle), Candidates: idle}
}

// Delegator is what Delegate needs from a Turn service.
type Delegator interface {
	List(ctx context.Context) (ListResult, error)
	Send(ctx context.Context, r SendRequest) (SendResult, error)
}

// Delegate sends r to the one idle pane running agent ("" = any), as a
// terminal_follow_current send; r names no target. It returns the pane it
// chose with Send's result, or a *DelegateRefusal listing the candidates.
// The pane is checked again by Send, so a pane that got busy in between
// is refused, not typed into.
func Delegate(ctx context.Context, d Delegator, agent string, r SendRequest) (SendResult, TerminalRow, error) {
	if r.SessionID != "" || r.TerminalID != "" {
		return SendResult{}, TerminalRow{}, fmt.Errorf("delegate: %w: a delegate picks its pane itself; send to a session or terminal id instead", ErrBadInput)
	}
	if agent != "" && agent != AgentCodex && agent != AgentClaude {
		return SendResult{}, TerminalRow{}, fmt.Errorf("delegate: %w: agent %q is neither %s nor %s", ErrBadInput, agent, AgentCodex, AgentClaude)
	}
	res, err := d.List(ctx)
	if err != nil {
		return SendResult{}, TerminalRow{}, fmt.Errorf("delegate: %w", err)
	}
	row, err := ChooseIdle(res.Terminals, agent)
	if err != nil {
		return SendResult{}, TerminalRow{}, fmt.Errorf("delegate: %w", err)
	}
	r.TerminalID = row.ID
	out, err := d.Send(ctx, r)
	return out, row, err
}
