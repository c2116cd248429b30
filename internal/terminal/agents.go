package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/proc"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

// DefaultAgents returns the readers of the real Codex and Claude Code TUIs.
func DefaultAgents() map[string]Agent {
	return map[string]Agent{AgentCodex: CodexAgent{}, AgentClaude: ClaudeAgent{}}
}

// evidence is what Accepted stores: the anchor the scans continue from
// (bound or materialized since the send) and the native acceptance.
type evidence struct {
	Anchor     json.RawMessage   `json:"anchor"`
	Acceptance native.Acceptance `json:"acceptance"`
}

// anchorJSON returns the anchor inside raw, which is either an anchor or an
// evidence record.
func anchorJSON(raw json.RawMessage) json.RawMessage {
	var ev evidence
	if json.Unmarshal(raw, &ev) == nil && len(ev.Anchor) > 0 {
		return ev.Anchor
	}
	return raw
}

func toScreen(s screen.Screen) Screen {
	out := Screen{Activity: string(s.Activity), ComposerEmpty: s.Activity == screen.Idle && s.Draft == "", Question: s.Question}
	if a := s.Approval; a != nil {
		out.Approval = &ScreenApproval{Fingerprint: a.Fingerprint, Kind: string(a.Kind), Command: a.Command, Approvable: a.Approvable}
	}
	return out
}

// CodexAgent reads a Codex TUI: its open root rollout (from /proc) and its
// screen. CodexHome is read from the process's environment (default
// ~/.codex of its HOME).
type CodexAgent struct{}

var _ Agent = CodexAgent{}

func codexHome(pid int) string {
	if home := processEnv(pid, "CODEX_HOME"); home != "" {
		return home
	}
	return filepath.Join(homeOf(pid), ".codex")
}

// codexState is what a Codex process holds open: its root rollouts and the
// thread it switched to last (codex.ReadForeground).
type codexState struct {
	inv codex.Inventory
	fg  codex.Foreground
}

func (CodexAgent) state(p Pane) (codexState, error) {
	home := codexHome(p.PID)
	files, err := proc.OpenFiles(p.PID)
	if err != nil {
		return codexState{}, fmt.Errorf("open files of codex pid %d: %w", p.PID, err)
	}
	in := codex.InventoryInput{CodexHome: home, Cwd: p.Cwd}
	type key struct{ dev, ino uint64 }
	seen := map[key]bool{}
	for _, f := range files {
		// Codex may hold one rollout open on two descriptors: one file.
		if k := (key{f.Dev, f.Ino}); f.Regular && seen[k] {
			continue
		} else if f.Regular {
			seen[k] = true
		}
		if f.Regular || f.Deleted {
			path := f.Path
			if f.Deleted {
				path += " (deleted)"
			}
			in.OpenFiles = append(in.OpenFiles, codex.OpenFile{FD: f.FD, Path: path, Dev: f.Dev, Ino: f.Ino})
		}
	}
	inv, err := codex.TakeInventory(in)
	if err != nil {
		return codexState{}, err
	}
	// A sub-agent thread's lock never names the foreground.
	sub := map[string]bool{}
	for _, s := range inv.Skipped {
		sub[codex.ThreadIDFromName(filepath.Base(s.Path))] = true
	}
	fg, err := codex.ReadForeground(home, in.OpenFiles, sub)
	if err != nil {
		return codexState{}, err
	}
	return codexState{inv: inv, fg: fg}, nil
}

func (c CodexAgent) inventory(p Pane) (codex.Inventory, error) {
	st, err := c.state(p)
	return st.inv, err
}

// identity names the foreground thread: the thread of the writer lock
// written last (its rollout, or none yet after /new), else the one open
// root rollout; with several roots open and no lock to tell, none.
func (st codexState) identity() (Identity, error) {
	inv, fg := st.inv, st.fg
	if inv.Status == codex.VerifiedAbsent {
		// No rollout open: a fresh TUI that locked its first thread, or a
		// thread made by /new after the old thread's rollout was closed.
		// The lock names the thread in both cases; only a Session bound
		// to this process can say it is the latter (Service.identify).
		return Identity{Locked: fg.ThreadID}, nil
	}
	if fg.ThreadID != "" {
		for _, r := range inv.Roots {
			if r.ThreadID == fg.ThreadID {
				return Identity{ThreadID: r.ThreadID, File: r.Path}, nil
			}
		}
		// A thread switched to (/new, /clear) whose first prompt has not
		// made its rollout yet.
		return Identity{ThreadID: fg.ThreadID}, nil
	}
	switch inv.Status {
	case codex.Resolved:
		return Identity{ThreadID: inv.Roots[0].ThreadID, File: inv.Roots[0].Path}, nil
	case codex.VerifiedAbsent:
		return Identity{}, nil
	}
	return Identity{}, fmt.Errorf("%w: codex holds %d root rollouts open (%s) and %s; its foreground thread is unknown",
		ErrRefused, len(inv.Roots), inv.Reason, fg.Reason)
}

// Identify implements Agent: the foreground thread (codexState.identity):
// none for a virgin TUI, an error when the files cannot tell.
func (c CodexAgent) Identify(_ context.Context, p Pane) (Identity, error) {
	st, err := c.state(p)
	if err != nil {
		return Identity{}, err
	}
	return st.identity()
}

// Anchor implements Agent.
func (c CodexAgent) Anchor(ctx context.Context, p Pane, id Identity) (json.RawMessage, error) {
	if id.File == "" {
		// No rollout yet: a fresh TUI, or a thread made by /new whose id
		// the binding of the rollout must then match.
		a := codex.VirginAnchor(time.Now())
		a.ThreadID = id.ThreadID
		return json.Marshal(a)
	}
	for attempt := 0; ; attempt++ {
		inv, err := c.inventory(p)
		if err != nil {
			return nil, err
		}
		var a codex.Anchor
		err = fmt.Errorf("the rollout %s is no longer open", id.File)
		for _, r := range inv.Roots {
			if r.Path == id.File {
				a, err = codex.CaptureAnchor(r, time.Now())
			}
		}
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

// Accepted implements Agent: task_started + the user response_item with the
// request's hash after the anchor; a virgin anchor is bound to the rollout
// the process opened since.
func (c CodexAgent) Accepted(_ context.Context, p Pane, raw json.RawMessage, text string) (*Acceptance, error) {
	var a codex.Anchor
	if err := json.Unmarshal(anchorJSON(raw), &a); err != nil {
		return nil, fmt.Errorf("codex anchor: %w", err)
	}
	if !a.Bound() {
		st, err := c.state(p)
		if err != nil {
			return nil, err
		}
		id, err := st.identity()
		if err != nil || id.File == "" {
			return nil, nil // not materialized yet
		}
		for _, r := range st.inv.Roots {
			if r.Path == id.File {
				if a, err = a.Bind(r); err != nil {
					return nil, err
				}
			}
		}
		if !a.Bound() {
			return nil, nil
		}
	}
	res, err := codex.ScanAcceptance(a, hashOf(text))
	if err != nil || !res.Accepted {
		return nil, err
	}
	ab, _ := json.Marshal(a)
	ev, _ := json.Marshal(evidence{Anchor: ab, Acceptance: res})
	return &Acceptance{NativeTurnID: res.TurnID, ThreadID: a.ThreadID, Evidence: ev}, nil
}

// Completion implements Agent: task_complete (or turn_aborted) of the
// accepted turn in the exact rollout.
func (CodexAgent) Completion(_ context.Context, _ Pane, raw json.RawMessage, acc Acceptance) (*Completion, error) {
	if len(acc.Evidence) > 0 {
		raw = acc.Evidence
	}
	var a codex.Anchor
	if err := json.Unmarshal(anchorJSON(raw), &a); err != nil {
		return nil, fmt.Errorf("codex anchor: %w", err)
	}
	if !a.Bound() {
		return nil, nil
	}
	res, err := codex.ScanCompletion(a, acc.NativeTurnID)
	if err != nil {
		return nil, err
	}
	switch res.State {
	case native.Completed:
		return &Completion{Outcome: "completed", Text: res.Text, Match: "codex_task_complete", ID: acc.NativeTurnID}, nil
	case native.Aborted, native.Failed:
		if res.State == native.Aborted && res.Reason == "interrupted" {
			return &Completion{Outcome: OutcomeCancelled, Match: "codex_turn_interrupted", ID: acc.NativeTurnID}, nil
		}
		return &Completion{Outcome: "failed", Text: "the agent's turn ended without a reply (" + res.Reason + ")", Match: "codex_turn_aborted", ID: acc.NativeTurnID}, nil
	}
	return nil, nil
}

// UserInputSince implements Agent: a native turn started after the
// checkpoint (it is asked before a send, so no such turn is
// ClawConnect's); a replaced or truncated rollout counts as changed.
func (c CodexAgent) UserInputSince(ctx context.Context, p Pane, raw json.RawMessage) (bool, error) {
	cur, err := c.UserInputFrom(ctx, p, raw, native.Cursor{})
	return cur.Found, err
}

// UserInputFrom implements inputResumer: UserInputSince resumed from cur.
func (CodexAgent) UserInputFrom(_ context.Context, _ Pane, raw json.RawMessage, cur native.Cursor) (native.Cursor, error) {
	var a codex.Anchor
	if err := json.Unmarshal(anchorJSON(raw), &a); err != nil {
		return cur, fmt.Errorf("codex checkpoint: %w", err)
	}
	return changedIsInput(codex.TurnStartedSince(a, cur))
}

// changedIsInput turns a session file replaced or truncated since the
// checkpoint into found input (the context the checkpoint named is gone),
// final like any other answer of the cursor.
func changedIsInput(cur native.Cursor, err error) (native.Cursor, error) {
	if changedFile(err) {
		cur.Found, cur.Err = true, nil
		return cur, nil
	}
	return cur, err
}

// changedFile reports a session file that was replaced or truncated since
// its anchor: the context the anchor named is gone.
func changedFile(err error) bool {
	var se *native.ScanError
	return errors.As(err, &se) && (se.Code == native.CodeIdentityMismatch || se.Code == native.CodeTruncated)
}

// WatchPaths implements Agent: the rollout, or the sessions tree's day
// directory of a virgin TUI.
func (CodexAgent) WatchPaths(p Pane, raw json.RawMessage) []string {
	var a codex.Anchor
	if json.Unmarshal(anchorJSON(raw), &a) == nil && a.Bound() {
		return []string{a.Path}
	}
	home := processEnv(p.PID, "CODEX_HOME")
	if home == "" {
		home = filepath.Join(homeOf(p.PID), ".codex")
	}
	return []string{filepath.Join(home, "sessions", time.Now().Format("2006/01/02"))}
}

// Screen implements Agent.
func (CodexAgent) Screen(text string) Screen { return toScreen(codex.ParseScreen(text)) }

// DraftVisible implements Agent: the idle composer holds exactly request.
func (CodexAgent) DraftVisible(text, request string) bool {
	s := codex.ParseScreen(text)
	return s.Activity == screen.Idle && screen.DraftShows(s.Draft, request)
}

// Keys implements Agent: "y" approves once; Escape interrupts (never C-c,
// which exits Codex when it lands on an idle composer).
func (CodexAgent) Keys() ([]string, []string) {
	return []string{codex.ApproveKey}, []string{codex.InterruptKey}
}

// ClaudeAgent reads a Claude Code TUI: its live-session registry entry, its
// transcript, and its screen. The config directory is the process's
// $CLAUDE_CONFIG_DIR (default ~/.claude of its HOME).
type ClaudeAgent struct{}

var _ Agent = ClaudeAgent{}

func claudeDir(pid int) string {
	if d := processEnv(pid, "CLAUDE_CONFIG_DIR"); d != "" {
		return d
	}
	return filepath.Join(homeOf(pid), ".claude")
}

// Identify implements Agent: the registry entry of the pid.
func (ClaudeAgent) Identify(_ context.Context, p Pane) (Identity, error) {
	dir := claudeDir(p.PID)
	s, err := claude.ReadLiveSession(dir, p.PID)
	if err != nil {
		return Identity{}, err
	}
	return Identity{ThreadID: s.SessionID, File: claude.TranscriptPath(dir, s.Cwd, s.SessionID)}, nil
}

// Anchor implements Agent: the end of the transcript (which may not exist
// yet).
func (ClaudeAgent) Anchor(ctx context.Context, p Pane, _ Identity) (json.RawMessage, error) {
	dir := claudeDir(p.PID)
	for attempt := 0; ; attempt++ {
		s, err := claude.ReadLiveSession(dir, p.PID)
		if err != nil {
			return nil, err
		}
		a, err := claude.CaptureAnchor(dir, s, time.Now())
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

func claudeAnchor(raw json.RawMessage) (claude.Anchor, error) {
	var a claude.Anchor
	if err := json.Unmarshal(anchorJSON(raw), &a); err != nil {
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

// Accepted implements Agent: the exact prompt record after the anchor.
func (ClaudeAgent) Accepted(_ context.Context, _ Pane, raw json.RawMessage, text string) (*Acceptance, error) {
	a, err := claudeAnchor(raw)
	if errors.Is(err, errNotYet) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	res, err := claude.ScanAcceptance(a, text)
	if err != nil || !res.Accepted {
		return nil, err
	}
	ab, _ := json.Marshal(a)
	ev, _ := json.Marshal(evidence{Anchor: ab, Acceptance: res})
	return &Acceptance{NativeTurnID: res.TurnID, ThreadID: a.SessionID, Evidence: ev}, nil
}

// Completion implements Agent: the turn_duration + end_turn chain under the
// prompt, an API error, or an interrupt.
func (ClaudeAgent) Completion(_ context.Context, _ Pane, raw json.RawMessage, acc Acceptance) (*Completion, error) {
	if len(acc.Evidence) > 0 {
		raw = acc.Evidence
	}
	a, err := claudeAnchor(raw)
	if errors.Is(err, errNotYet) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	res, err := claude.ScanCompletion(a, acc.NativeTurnID)
	if err != nil {
		return nil, err
	}
	switch res.State {
	case native.Completed:
		return &Completion{Outcome: "completed", Text: res.Text, Match: "claude_transcript_turn_duration", ID: acc.NativeTurnID}, nil
	case native.Aborted:
		// "[Request interrupted by user]": Esc in the terminal, not an
		// error of the model.
		return &Completion{Outcome: OutcomeCancelled, Match: "claude_transcript_interrupted", ID: acc.NativeTurnID}, nil
	case native.Failed:
		return &Completion{Outcome: "failed", Text: res.Text, Match: "claude_transcript_api_error", ID: acc.NativeTurnID}, nil
	}
	return nil, nil
}

// UserInputSince implements Agent: a human prompt record after the
// checkpoint, or a replaced or truncated transcript.
func (c ClaudeAgent) UserInputSince(ctx context.Context, p Pane, raw json.RawMessage) (bool, error) {
	cur, err := c.UserInputFrom(ctx, p, raw, native.Cursor{})
	return cur.Found, err
}

// UserInputFrom implements inputResumer: UserInputSince resumed from cur.
func (ClaudeAgent) UserInputFrom(_ context.Context, _ Pane, raw json.RawMessage, cur native.Cursor) (native.Cursor, error) {
	var a claude.Anchor
	if err := json.Unmarshal(anchorJSON(raw), &a); err != nil {
		return cur, fmt.Errorf("claude checkpoint: %w", err)
	}
	return changedIsInput(claude.PromptSince(a, cur))
}

// WatchPaths implements Agent: the transcript and the registry entry.
func (ClaudeAgent) WatchPaths(p Pane, raw json.RawMessage) []string {
	var a claude.Anchor
	_ = json.Unmarshal(anchorJSON(raw), &a)
	out := []string{claude.RegistryPath(claudeDir(p.PID), p.PID)}
	if a.Path != "" {
		out = append(out, a.Path)
	}
	return out
}

// Screen implements Agent.
func (ClaudeAgent) Screen(text string) Screen { return toScreen(claude.ParseScreen(text)) }

// DraftVisible implements Agent: the idle composer holds exactly request.
// Idle as for Codex: over a completion menu ("@" opens one) Enter picks an
// entry instead of submitting, and while a turn runs it queues the text.
func (ClaudeAgent) DraftVisible(text, request string) bool {
	s := claude.ParseScreen(text)
	return s.Activity == screen.Idle && screen.DraftShows(s.Draft, request)
}

// Keys implements Agent: Enter on the highlighted one-time "Yes"; Escape
// interrupts.
func (ClaudeAgent) Keys() ([]string, []string) {
	return []string{claude.ApproveKey}, []string{claude.InterruptKey}
}

var _ commandReader = ClaudeAgent{}

// PendingCommand implements commandReader: the one Bash call the accepted
// turn waits on, read from the transcript. It is exact only when nothing
// but its command decides what runs and the dialog on the screen shows
// that same command; the errors say which of these failed, never the
// command.
func (ClaudeAgent) PendingCommand(_ context.Context, _ Pane, raw json.RawMessage, acc Acceptance, text string) (PendingCommand, error) {
	if len(acc.Evidence) > 0 {
		raw = acc.Evidence
	}
	a, err := claudeAnchor(raw)
	if errors.Is(err, errNotYet) {
		return PendingCommand{}, fmt.Errorf("%w: the transcript does not exist yet", errEvidenceNotYet)
	}
	if err != nil {
		return PendingCommand{}, fmt.Errorf("the transcript cannot be read: %w", err)
	}
	ap, err := claude.PendingApproval(a, acc.NativeTurnID)
	switch {
	case err != nil:
		return PendingCommand{}, fmt.Errorf("the transcript cannot be read: %w", err)
	case ap == nil:
		// Not written yet, or never one call (several at once): the wait
		// is bounded either way.
		return PendingCommand{}, fmt.Errorf("%w: the transcript does not hold exactly one pending Bash call", errEvidenceNotYet)
	case !ap.OnlyCommand:
		return PendingCommand{}, errors.New("the Bash call's input holds more than its command (a background run, a sandbox setting, an unknown or repeated field)")
	}
	if shown, ok := claude.DialogCommand(text); !ok || shown != ap.Command {
		return PendingCommand{}, errors.New("the dialog on the screen does not show the transcript's command exactly")
	}
	return PendingCommand{Tool: "Bash", Command: ap.Command, Cwd: ap.Cwd, RequestID: ap.ToolUseID,
		CommandSHA256: ap.CommandSHA256, Evidence: ap.Fingerprint}, nil
}
