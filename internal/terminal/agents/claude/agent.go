package claude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/proc"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

// Agent reads a Claude Code TUI for the Turn service: its live-session
// registry entry, its transcript, and its screen. The config directory is
// the process's $CLAUDE_CONFIG_DIR (default ~/.claude of its HOME).
type Agent struct{}

var (
	_ agents.Agent         = Agent{}
	_ agents.InputResumer  = Agent{}
	_ agents.TaskFinder    = Agent{}
	_ agents.ThreadControl = Agent{}
	_ agents.Inspector     = Agent{}
	_ agents.CommandReader = Agent{}
)

func configDir(pid int) string {
	if d := proc.Getenv(pid, "CLAUDE_CONFIG_DIR"); d != "" {
		return d
	}
	return filepath.Join(proc.Home(pid), ".claude")
}

// Identify implements agents.Agent: the registry entry of the pid.
func (Agent) Identify(_ context.Context, p agents.Pane) (agents.Identity, error) {
	dir := configDir(p.PID)
	s, err := ReadLiveSession(dir, p.PID)
	if err != nil {
		return agents.Identity{}, err
	}
	return agents.Identity{ThreadID: s.SessionID, File: TranscriptPath(dir, s.Cwd, s.SessionID)}, nil
}

// Anchor implements agents.Agent: the end of the transcript (which may not
// exist yet).
func (Agent) Anchor(ctx context.Context, p agents.Pane, _ agents.Identity) (json.RawMessage, error) {
	dir := configDir(p.PID)
	for attempt := 0; ; attempt++ {
		s, err := ReadLiveSession(dir, p.PID)
		if err != nil {
			return nil, err
		}
		a, err := CaptureAnchor(dir, s, time.Now())
		if err == nil {
			return json.Marshal(a)
		}
		if attempt >= 20 {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// storedAnchor is the anchor inside raw (an anchor or an agents.Evidence),
// materialized; errNotYet while its transcript does not exist.
func storedAnchor(raw json.RawMessage) (Anchor, error) {
	var a Anchor
	if err := json.Unmarshal(agents.AnchorOf(raw), &a); err != nil {
		return a, fmt.Errorf("claude anchor: %w", err)
	}
	m, err := a.Materialize()
	if errors.Is(err, os.ErrNotExist) {
		return a, errNotYet
	}
	return m, err
}

// errNotYet reports a session file that does not exist yet.
var errNotYet = errors.New("the session file does not exist yet")

// Accepted implements agents.Agent: the exact prompt record after the
// anchor.
func (Agent) Accepted(_ context.Context, _ agents.Pane, raw json.RawMessage, text string) (*agents.Acceptance, error) {
	a, err := storedAnchor(raw)
	if errors.Is(err, errNotYet) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	res, err := ScanAcceptance(a, text)
	if err != nil || !res.Accepted {
		return nil, err
	}
	ab, _ := json.Marshal(a)
	ev, _ := json.Marshal(agents.Evidence{Anchor: ab, Acceptance: res})
	return &agents.Acceptance{NativeTurnID: res.TurnID, ThreadID: a.SessionID, Evidence: ev}, nil
}

// Completion implements agents.Agent: the turn_duration + end_turn chain
// under the prompt, an API error, or an interrupt. It returns no resume
// point: whether the turn ended depends on the records before the last one
// (the chain from the prompt, tool calls still unanswered, the reply's
// text blocks, a second turn_duration), so each check reads from the
// anchor.
func (Agent) Completion(_ context.Context, _ agents.Pane, raw json.RawMessage, acc agents.Acceptance) (*agents.Completion, json.RawMessage, error) {
	if len(acc.Evidence) > 0 {
		raw = acc.Evidence
	}
	a, err := storedAnchor(raw)
	if errors.Is(err, errNotYet) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	res, err := ScanCompletion(a, acc.NativeTurnID)
	if err != nil {
		return nil, nil, err
	}
	switch res.State {
	case native.Completed:
		return &agents.Completion{Outcome: "completed", Text: res.Text, Match: "claude_transcript_turn_duration", ID: acc.NativeTurnID}, nil, nil
	case native.Aborted:
		// "[Request interrupted by user]": Esc in the terminal, not an
		// error of the model.
		return &agents.Completion{Outcome: agents.OutcomeCancelled, Match: "claude_transcript_interrupted", ID: acc.NativeTurnID}, nil, nil
	case native.Failed:
		return &agents.Completion{Outcome: "failed", Text: res.Text, Match: "claude_transcript_api_error", ID: acc.NativeTurnID}, nil, nil
	}
	return nil, nil, nil
}

// UserInputSince implements agents.Agent: a human prompt record after the
// checkpoint, or a replaced or truncated transcript.
func (c Agent) UserInputSince(ctx context.Context, p agents.Pane, raw json.RawMessage) (bool, error) {
	cur, err := c.UserInputFrom(ctx, p, raw, native.Cursor{})
	return cur.Found, err
}

// UserInputFrom implements agents.InputResumer: UserInputSince resumed
// from cur.
func (Agent) UserInputFrom(_ context.Context, _ agents.Pane, raw json.RawMessage, cur native.Cursor) (native.Cursor, error) {
	var a Anchor
	if err := json.Unmarshal(agents.AnchorOf(raw), &a); err != nil {
		return cur, fmt.Errorf("claude checkpoint: %w", err)
	}
	return agents.ChangedIsInput(PromptSince(a, cur))
}

// WatchPaths implements agents.Agent: the transcript and the registry
// entry.
func (Agent) WatchPaths(p agents.Pane, raw json.RawMessage) []string {
	var a Anchor
	_ = json.Unmarshal(agents.AnchorOf(raw), &a)
	out := []string{RegistryPath(configDir(p.PID), p.PID)}
	if a.Path != "" {
		out = append(out, a.Path)
	}
	return out
}

// Screen implements agents.Agent.
func (Agent) Screen(text string) agents.Screen { return agents.ScreenOf(ParseScreen(text)) }

// DraftVisible implements agents.Agent: the idle composer holds exactly
// request. Idle as for Codex: over a completion menu ("@" opens one) Enter
// picks an entry instead of submitting, and while a turn runs it queues
// the text.
func (Agent) DraftVisible(text, request string) bool {
	s := ParseScreen(text)
	return s.Activity == screen.Idle && screen.DraftShows(s.Draft, request)
}

// Keys implements agents.Agent: Enter on the highlighted one-time "Yes";
// Escape interrupts.
func (Agent) Keys() ([]string, []string) {
	return []string{ApproveKey}, []string{InterruptKey}
}

// PendingCommand implements agents.CommandReader: the one Bash call the
// accepted turn waits on, read from the transcript. It is exact only when
// nothing but its command decides what runs and the dialog on the screen
// shows that same command; the errors say which of these failed, never
// the command.
func (Agent) PendingCommand(_ context.Context, _ agents.Pane, raw json.RawMessage, acc agents.Acceptance, text string) (agents.PendingCommand, error) {
	if len(acc.Evidence) > 0 {
		raw = acc.Evidence
	}
	a, err := storedAnchor(raw)
	if errors.Is(err, errNotYet) {
		return agents.PendingCommand{}, fmt.Errorf("%w: the transcript does not exist yet", agents.ErrEvidenceNotYet)
	}
	if err != nil {
		return agents.PendingCommand{}, fmt.Errorf("the transcript cannot be read: %w", err)
	}
	ap, err := PendingApproval(a, acc.NativeTurnID)
	switch {
	case err != nil:
		return agents.PendingCommand{}, fmt.Errorf("the transcript cannot be read: %w", err)
	case ap == nil:
		// Not written yet, or never one call (several at once): the wait
		// is bounded either way.
		return agents.PendingCommand{}, fmt.Errorf("%w: the transcript does not hold exactly one pending Bash call", agents.ErrEvidenceNotYet)
	case !ap.OnlyCommand:
		return agents.PendingCommand{}, errors.New("the Bash call's input holds more than its command (a background run, a sandbox setting, an unknown or repeated field)")
	}
	if shown, ok := DialogCommand(text); !ok || shown != ap.Command {
		return agents.PendingCommand{}, errors.New("the dialog on the screen does not show the transcript's command exactly")
	}
	return agents.PendingCommand{Tool: "Bash", Command: ap.Command, Cwd: ap.Cwd, RequestID: ap.ToolUseID,
		CommandSHA256: ap.CommandSHA256, Evidence: ap.Fingerprint}, nil
}
