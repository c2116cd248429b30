package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
)

// StartedTask implements agents.TaskFinder: the first task_started after
// the anchor (a virgin anchor is bound to the rollout the process opened).
func (c Agent) StartedTask(_ context.Context, p agents.Pane, raw json.RawMessage) (*agents.Acceptance, error) {
	var a Anchor
	if err := json.Unmarshal(agents.AnchorOf(raw), &a); err != nil {
		return nil, fmt.Errorf("codex anchor: %w", err)
	}
	if !a.Bound() {
		inv, err := c.inventory(p)
		if err != nil {
			return nil, err
		}
		if inv.Status != Resolved {
			return nil, nil
		}
		if a, err = a.Bind(inv.Roots[0]); err != nil {
			return nil, err
		}
	}
	turns, err := TurnsStartedAfter(a)
	if err != nil {
		return nil, err
	}
	for _, t := range turns {
		if t != "" {
			ab, _ := json.Marshal(a)
			ev, _ := json.Marshal(agents.Evidence{Anchor: ab})
			return &agents.Acceptance{NativeTurnID: t, ThreadID: a.ThreadID, Evidence: ev}, nil
		}
	}
	return nil, nil
}

// ActiveTaskAnchor implements agents.TaskFinder: the line of the
// task_started of the task that runs now.
func (c Agent) ActiveTaskAnchor(ctx context.Context, p agents.Pane, id agents.Identity) (json.RawMessage, error) {
	if id.File == "" {
		return nil, errors.New("codex has no rollout open yet")
	}
	raw, err := c.Anchor(ctx, p, id)
	if err != nil {
		return nil, err
	}
	var end Anchor
	if err := json.Unmarshal(raw, &end); err != nil {
		return nil, fmt.Errorf("codex anchor: %w", err)
	}
	a, _, err := ActiveTaskAnchor(end)
	if err != nil {
		return nil, err
	}
	return json.Marshal(a)
}
