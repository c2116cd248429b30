package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
)

// StartedTask implements agents.TaskFinder: the first human prompt after
// the anchor.
func (Agent) StartedTask(_ context.Context, _ agents.Pane, raw json.RawMessage) (*agents.Acceptance, error) {
	a, err := storedAnchor(raw)
	if errors.Is(err, errNotYet) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	prompts, err := PromptsAfter(a)
	if err != nil || len(prompts) == 0 {
		return nil, err
	}
	ab, _ := json.Marshal(a)
	ev, _ := json.Marshal(agents.Evidence{Anchor: ab})
	return &agents.Acceptance{NativeTurnID: prompts[0], ThreadID: a.SessionID, Evidence: ev}, nil
}

// ActiveTaskAnchor implements agents.TaskFinder: the line of the last
// human prompt of the pane's live session, while that prompt's turn is
// open.
func (Agent) ActiveTaskAnchor(_ context.Context, p agents.Pane, id agents.Identity) (json.RawMessage, error) {
	dir := configDir(p.PID)
	s, err := ReadLiveSession(dir, p.PID)
	if err != nil {
		return nil, err
	}
	if id.ThreadID != "" && s.SessionID != id.ThreadID {
		return nil, fmt.Errorf("the pane's Claude Code session changed from %s to %s", id.ThreadID, s.SessionID)
	}
	end, err := CaptureEnd(dir, s, time.Now())
	if err != nil {
		return nil, err
	}
	a, _, err := ActiveTaskAnchor(end)
	if err != nil {
		return nil, err
	}
	return json.Marshal(a)
}
