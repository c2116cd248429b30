package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
)

var (
	_ TaskFinder = CodexAgent{}
	_ TaskFinder = ClaudeAgent{}
)

// StartedTask implements TaskFinder: the first task_started after the
// anchor (a virgin anchor is bound to the rollout the process opened).
func (c CodexAgent) StartedTask(_ context.Context, p Pane, raw json.RawMessage) (*Acceptance, error) {
	var a codex.Anchor
	if err := json.Unmarshal(anchorJSON(raw), &a); err != nil {
		return nil, fmt.Errorf("codex anchor: %w", err)
	}
	if !a.Bound() {
		inv, err := c.inventory(p)
		if err != nil {
			return nil, err
		}
		if inv.Status != codex.Resolved {
			return nil, nil
		}
		if a, err = a.Bind(inv.Roots[0]); err != nil {
			return nil, err
		}
	}
	turns, err := codex.TurnsStartedAfter(a)
	if err != nil {
		return nil, err
	}
	for _, t := range turns {
		if t != "" {
			ab, _ := json.Marshal(a)
			ev, _ := json.Marshal(evidence{Anchor: ab})
			return &Acceptance{NativeTurnID: t, ThreadID: a.ThreadID, Evidence: ev}, nil
		}
	}
	return nil, nil
}

// ActiveTaskAnchor implements TaskFinder: the line of the task_started of
// the task that runs now.
func (c CodexAgent) ActiveTaskAnchor(ctx context.Context, p Pane, id Identity) (json.RawMessage, error) {
	if id.File == "" {
		return nil, errors.New("codex has no rollout open yet")
	}
	raw, err := c.Anchor(ctx, p, id)
	if err != nil {
		return nil, err
	}
	var end codex.Anchor
	if err := json.Unmarshal(raw, &end); err != nil {
		return nil, fmt.Errorf("codex anchor: %w", err)
	}
	a, _, err := codex.ActiveTaskAnchor(end)
	if err != nil {
		return nil, err
	}
	return json.Marshal(a)
}

// StartedTask implements TaskFinder: the first human prompt after the
// anchor.
func (ClaudeAgent) StartedTask(_ context.Context, _ Pane, raw json.RawMessage) (*Acceptance, error) {
	a, err := claudeAnchor(raw)
	if errors.Is(err, errNotYet) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	prompts, err := claude.PromptsAfter(a)
	if err != nil || len(prompts) == 0 {
		return nil, err
	}
	ab, _ := json.Marshal(a)
	ev, _ := json.Marshal(evidence{Anchor: ab})
	return &Acceptance{NativeTurnID: prompts[0], ThreadID: a.SessionID, Evidence: ev}, nil
}

// ActiveTaskAnchor implements TaskFinder: the line of the last human
// prompt of the pane's live session, while that prompt's turn is open.
func (ClaudeAgent) ActiveTaskAnchor(_ context.Context, p Pane, id Identity) (json.RawMessage, error) {
	dir := claudeDir(p.PID)
	s, err := claude.ReadLiveSession(dir, p.PID)
	if err != nil {
		return nil, err
	}
	if id.ThreadID != "" && s.SessionID != id.ThreadID {
		return nil, fmt.Errorf("the pane's Claude Code session changed from %s to %s", id.ThreadID, s.SessionID)
	}
	end, err := claude.CaptureEnd(dir, s, time.Now())
	if err != nil {
		return nil, err
	}
	a, _, err := claude.ActiveTaskAnchor(end)
	if err != nil {
		return nil, err
	}
	return json.Marshal(a)
}
