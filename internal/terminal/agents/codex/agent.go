package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/proc"
	"github.com/clawconnect/clawconnect/internal/terminal/request"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
	"github.com/clawconnect/clawconnect/termapi"
)

// Agent reads a Codex TUI for the Turn service: its open root rollout
// (from /proc) and its screen. CodexHome is read from the process's
// environment (default ~/.codex of its HOME).
type Agent struct{}

var (
	_ agents.Agent         = Agent{}
	_ agents.InputResumer  = Agent{}
	_ agents.TaskFinder    = Agent{}
	_ agents.ThreadControl = Agent{}
	_ agents.Inspector     = Agent{}
)

func home(pid int) string {
	if home := proc.Getenv(pid, "CODEX_HOME"); home != "" {
		return home
	}
	return filepath.Join(proc.Home(pid), ".codex")
}

// processState is what a Codex process holds open: its root rollouts and
// the thread it switched to last (ReadForeground).
type processState struct {
	inv Inventory
	fg  Foreground
}

func (Agent) state(p agents.Pane) (processState, error) {
	home := home(p.PID)
	files, err := proc.OpenFiles(p.PID)
	if err != nil {
		return processState{}, fmt.Errorf("open files of codex pid %d: %w", p.PID, err)
	}
	in := InventoryInput{CodexHome: home, Cwd: p.Cwd}
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
			in.OpenFiles = append(in.OpenFiles, OpenFile{FD: f.FD, Path: path, Dev: f.Dev, Ino: f.Ino})
		}
	}
	inv, err := TakeInventory(in)
	if err != nil {
		return processState{}, err
	}
	// A sub-agent thread's lock never names the foreground.
	sub := map[string]bool{}
	for _, s := range inv.Skipped {
		sub[ThreadIDFromName(filepath.Base(s.Path))] = true
	}
	fg, err := ReadForeground(home, in.OpenFiles, sub)
	if err != nil {
		return processState{}, err
	}
	return processState{inv: inv, fg: fg}, nil
}

func (c Agent) inventory(p agents.Pane) (Inventory, error) {
	st, err := c.state(p)
	return st.inv, err
}

// identity names the foreground thread: the thread of the writer lock
// written last (its rollout, or none yet after /new), else the one open
// root rollout; with several roots open and no lock to tell, none.
func (st processState) identity() (agents.Identity, error) {
	inv, fg := st.inv, st.fg
	if inv.Status == VerifiedAbsent {
		// No rollout open: a fresh TUI that locked its first thread, or a
		// thread made by /new after the old thread's rollout was closed.
		// The lock names the thread in both cases; only a Session bound
		// to this process can say it is the latter (the Turn service's
		// identify).
		return agents.Identity{Locked: fg.ThreadID}, nil
	}
	if fg.ThreadID != "" {
		for _, r := range inv.Roots {
			if r.ThreadID == fg.ThreadID {
				return agents.Identity{ThreadID: r.ThreadID, File: r.Path}, nil
			}
		}
		// A thread switched to (/new, /clear) whose first prompt has not
		// made its rollout yet.
		return agents.Identity{ThreadID: fg.ThreadID}, nil
	}
	switch inv.Status {
	case Resolved:
		return agents.Identity{ThreadID: inv.Roots[0].ThreadID, File: inv.Roots[0].Path}, nil
	case VerifiedAbsent:
		return agents.Identity{}, nil
	}
	return agents.Identity{}, fmt.Errorf("%w: codex holds %d root rollouts open (%s) and %s; its foreground thread is unknown",
		termapi.ErrRefused, len(inv.Roots), inv.Reason, fg.Reason)
}

// Identify implements agents.Agent: the foreground thread
// (processState.identity): none for a virgin TUI, an error when the files
// cannot tell.
func (c Agent) Identify(_ context.Context, p agents.Pane) (agents.Identity, error) {
	st, err := c.state(p)
	if err != nil {
		return agents.Identity{}, err
	}
	return st.identity()
}

// Anchor implements agents.Agent.
func (c Agent) Anchor(ctx context.Context, p agents.Pane, id agents.Identity) (json.RawMessage, error) {
	if id.File == "" {
		// No rollout yet: a fresh TUI, or a thread made by /new whose id
		// the binding of the rollout must then match.
		a := VirginAnchor(time.Now())
		a.ThreadID = id.ThreadID
		return json.Marshal(a)
	}
	for attempt := 0; ; attempt++ {
		inv, err := c.inventory(p)
		if err != nil {
			return nil, err
		}
		var a Anchor
		err = fmt.Errorf("the rollout %s is no longer open", id.File)
		for _, r := range inv.Roots {
			if r.Path == id.File {
				a, err = CaptureAnchor(r, time.Now())
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

// Accepted implements agents.Agent: task_started + the user response_item
// with the request's hash after the anchor; a virgin anchor is bound to the
// rollout the process opened since.
func (c Agent) Accepted(_ context.Context, p agents.Pane, raw json.RawMessage, text string) (*agents.Acceptance, error) {
	var a Anchor
	if err := json.Unmarshal(agents.AnchorOf(raw), &a); err != nil {
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
	res, err := ScanAcceptance(a, request.Hash(text))
	if err != nil || !res.Accepted {
		return nil, err
	}
	ab, _ := json.Marshal(a)
	ev, _ := json.Marshal(agents.Evidence{Anchor: ab, Acceptance: res})
	return &agents.Acceptance{NativeTurnID: res.TurnID, ThreadID: a.ThreadID, Evidence: ev}, nil
}

// Completion implements agents.Agent: task_complete (or turn_aborted) of
// the accepted turn in the exact rollout. A pending check returns where the
// next may resume (ScanCompletionFrom); acc.Resume is used only when it
// names the same rollout, anchor and turn.
func (Agent) Completion(_ context.Context, _ agents.Pane, raw json.RawMessage, acc agents.Acceptance) (*agents.Completion, json.RawMessage, error) {
	if len(acc.Evidence) > 0 {
		raw = acc.Evidence
	}
	var a Anchor
	if err := json.Unmarshal(agents.AnchorOf(raw), &a); err != nil {
		return nil, nil, fmt.Errorf("codex anchor: %w", err)
	}
	if !a.Bound() {
		return nil, nil, nil
	}
	from := a.Offset
	if r, ok := resumeOf(acc.Resume, a, acc.NativeTurnID); ok {
		from = r.Offset
	}
	res, err := ScanCompletionFrom(a, acc.NativeTurnID, from)
	if err != nil {
		return nil, nil, err
	}
	switch res.State {
	case native.Completed:
		return &agents.Completion{Outcome: "completed", Text: res.Text, Match: "codex_task_complete", ID: acc.NativeTurnID}, nil, nil
	case native.Aborted, native.Failed:
		if res.State == native.Aborted && res.Reason == "interrupted" {
			return &agents.Completion{Outcome: agents.OutcomeCancelled, Match: "codex_turn_interrupted", ID: acc.NativeTurnID}, nil, nil
		}
		return &agents.Completion{Outcome: "failed", Text: "the agent's turn ended without a reply (" + res.Reason + ")", Match: "codex_turn_aborted", ID: acc.NativeTurnID}, nil, nil
	}
	next := a
	next.Offset = res.EndOffset
	out, _ := json.Marshal(resumePoint{Anchor: next, From: a.Offset, TurnID: strings.ToLower(acc.NativeTurnID)})
	return nil, out, nil
}

// resumePoint is where a pending completion check stopped: the Turn's
// anchor with Offset at the end of the last complete line read, the
// anchor's own offset and the turn scanned for, which it must match to be
// used.
type resumePoint struct {
	Anchor
	From   int64  `json:"from_offset_bytes"`
	TurnID string `json:"native_turn_id"`
}

// resumeOf decodes raw and reports whether it resumes a scan of anchor a
// for turnID: the same rollout (path, device, inode), mode and thread, the
// same start and turn, and an offset not before the start.
func resumeOf(raw json.RawMessage, a Anchor, turnID string) (resumePoint, bool) {
	var r resumePoint
	if len(raw) == 0 || json.Unmarshal(raw, &r) != nil {
		return r, false
	}
	ok := r.Mode == a.Mode && r.ThreadID == a.ThreadID && r.Path == a.Path && r.Dev == a.Dev && r.Ino == a.Ino &&
		r.From == a.Offset && r.Offset >= a.Offset && r.TurnID == strings.ToLower(turnID)
	return r, ok
}

// UserInputSince implements agents.Agent: a native turn started after the
// checkpoint (it is asked before a send, so no such turn is
// ClawConnect's); a replaced or truncated rollout counts as changed.
func (c Agent) UserInputSince(ctx context.Context, p agents.Pane, raw json.RawMessage) (bool, error) {
	cur, err := c.UserInputFrom(ctx, p, raw, native.Cursor{})
	return cur.Found, err
}

// UserInputFrom implements agents.InputResumer: UserInputSince resumed
// from cur.
func (Agent) UserInputFrom(_ context.Context, _ agents.Pane, raw json.RawMessage, cur native.Cursor) (native.Cursor, error) {
	var a Anchor
	if err := json.Unmarshal(agents.AnchorOf(raw), &a); err != nil {
		return cur, fmt.Errorf("codex checkpoint: %w", err)
	}
	return agents.ChangedIsInput(TurnStartedSince(a, cur))
}

// WatchPaths implements agents.Agent: the rollout, or the sessions tree's
// day directory of a virgin TUI.
func (Agent) WatchPaths(p agents.Pane, raw json.RawMessage) []string {
	var a Anchor
	if json.Unmarshal(agents.AnchorOf(raw), &a) == nil && a.Bound() {
		return []string{a.Path}
	}
	return []string{filepath.Join(home(p.PID), "sessions", time.Now().Format("2006/01/02"))}
}

// Screen implements agents.Agent.
func (Agent) Screen(text string) agents.Screen { return agents.ScreenOf(ParseScreen(text)) }

// DraftVisible implements agents.Agent: the idle composer holds exactly
// request.
func (Agent) DraftVisible(text, request string) bool {
	s := ParseScreen(text)
	return s.Activity == screen.Idle && screen.DraftShows(s.Draft, request)
}

// Keys implements agents.Agent: "y" approves once; Escape interrupts
// (never C-c, which exits Codex when it lands on an idle composer).
func (Agent) Keys() ([]string, []string) {
	return []string{ApproveKey}, []string{InterruptKey}
}
