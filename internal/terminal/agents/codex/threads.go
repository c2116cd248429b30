package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/termapi"
)

// ThreadVersion is the Codex version the thread plans were measured on:
// `/new` and `/clear` switch to a new thread, `/resume <uuid>` to that
// thread. Codex keeps every thread it visited open (rollout and writer
// lock), so the foreground thread is proven by the writer lock written
// last (ReadForeground), which the TUI's /status card agreed with. A
// version whose screens the plan was not proven against is refused.
const ThreadVersion = "0.171.0"

// ThreadPlan implements agents.ThreadControl: `/new`, `/clear` or
// `/resume <uuid>` on Codex ThreadVersion. A TUI that never had a prompt
// has no thread to leave (its first send starts one), and a process whose
// foreground thread its files cannot name is refused.
func (c Agent) ThreadPlan(_ context.Context, p agents.Pane, kind, thread string) (string, []string, error) {
	version, err := c.Version(p)
	if err != nil {
		return "", nil, fmt.Errorf("%w: read the Codex version: %w", termapi.ErrRefused, err)
	}
	if version != ThreadVersion {
		return version, nil, fmt.Errorf("%w: native thread controls are proven on Codex %s only; this pane runs %q",
			termapi.ErrRefused, ThreadVersion, version)
	}
	st, err := c.state(p)
	if err != nil {
		return version, nil, fmt.Errorf("%w: read Codex's open files: %w", termapi.ErrRefused, err)
	}
	id, err := st.identity()
	if err != nil {
		return version, nil, err
	}
	if id.ThreadID == "" {
		return version, nil, fmt.Errorf("%w: this Codex has no thread yet (no prompt was sent); the first send starts one", termapi.ErrRefused)
	}
	switch kind {
	case store.TransitionNewThread:
		return version, []string{"/new"}, nil
	case store.TransitionClearThread:
		return version, []string{"/clear"}, nil
	case store.TransitionResumeThread:
		return version, []string{"/resume " + thread}, nil
	}
	return version, nil, fmt.Errorf("%w: no Codex plan for %s", termapi.ErrRefused, kind)
}

// Threads implements agents.ThreadControl: the TUI rollouts under the
// sessions tree whose session_meta names the pane's workspace, with the
// title and last update of the thread's row in Codex's state database when
// it has one (a row without such a rollout is not offered: the rollout is
// what a resume is verified against).
func (Agent) Threads(ctx context.Context, p agents.Pane) ([]agents.NativeThread, error) {
	return listThreads(ctx, home(p.PID), p.Cwd)
}

// listThreads lists the threads of workspace cwd under Codex home. It
// stops at ctx's end: a sessions tree holds every rollout of every
// workspace, and each one's first line is read.
func listThreads(ctx context.Context, home, cwd string) ([]agents.NativeThread, error) {
	rows, err := ReadStateThreads(ctx, home, cwd)
	if err != nil {
		rows = nil // the rollouts alone still list the threads
	}
	byID := map[string]StateThread{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	var out []agents.NativeThread
	root := filepath.Join(home, "sessions")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && path == root {
				return filepath.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() || !strings.HasPrefix(name, "rollout-") || !strings.HasSuffix(name, ".jsonl") || !d.Type().IsRegular() {
			return nil
		}
		meta, err := ReadSessionMeta(path)
		if err != nil || meta.Subagent || meta.Cwd != cwd || meta.Originator != "codex-tui" ||
			!strings.HasSuffix(strings.TrimSuffix(name, ".jsonl"), meta.ID) || !agents.ValidThreadID(meta.ID) {
			return nil
		}
		t := agents.NativeThread{ID: meta.ID, CreatedAt: meta.Timestamp.UnixMilli()}
		if info, err := d.Info(); err == nil {
			t.UpdatedAt = info.ModTime().UnixMilli()
		}
		t.Title = firstPrompt(path)
		if row, ok := byID[strings.ToLower(meta.ID)]; ok && t.Title != "" {
			if row.Title != "" {
				t.Title = agents.ThreadTitle(row.Title)
			}
			t.UpdatedAt = max(t.UpdatedAt, row.UpdatedAt*1000)
		}
		if t.Title != "" {
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the Codex sessions tree: %w", err)
	}
	agents.SortThreads(out)
	return out, nil
}

// firstPrompt is the title of the rollout at path: its first request, ""
// for none.
func firstPrompt(path string) string {
	title := ""
	_ = agents.ScanListed(path, func(line []byte) bool {
		var r struct {
			Type    string `json:"type"`
			Payload struct {
				Type    string `json:"type"`
				Role    string `json:"role"`
				Message string `json:"message"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"payload"`
		}
		if json.Unmarshal(line, &r) != nil {
			return true
		}
		// The user's request: a user message item (Codex 0.171.0), or the
		// older user_message event; context items start with "<".
		if r.Type == "event_msg" && r.Payload.Type == "user_message" && r.Payload.Message != "" {
			title = agents.ThreadTitle(r.Payload.Message)
			return false
		}
		if r.Type == "response_item" && r.Payload.Type == "message" && r.Payload.Role == "user" {
			for _, c := range r.Payload.Content {
				if c.Type == "input_text" && c.Text != "" && !strings.HasPrefix(c.Text, "<") {
					title = agents.ThreadTitle(c.Text)
					return false
				}
			}
		}
		return true
	})
	return title
}
