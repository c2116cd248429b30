package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/termapi"
)

// ThreadVersion is the Claude Code version the thread plans were measured
// on: `/clear` switches the live-session entry to a new sessionId at once
// (new and clear are the same control), and `/resume <uuid>` switches it
// to that session. A version whose screens the plan was not proven against
// is refused.
const ThreadVersion = "2.1.332"

// ThreadPlan implements agents.ThreadControl.
func (Agent) ThreadPlan(_ context.Context, p agents.Pane, kind, thread string) (string, []string, error) {
	live, err := ReadLiveSession(configDir(p.PID), p.PID)
	if err != nil {
		return "", nil, fmt.Errorf("%w: read the Claude Code live-session entry: %w", termapi.ErrRefused, err)
	}
	if live.Version != ThreadVersion {
		return live.Version, nil, fmt.Errorf("%w: native thread controls are proven on Claude Code %s only; this pane runs %q",
			termapi.ErrRefused, ThreadVersion, live.Version)
	}
	switch kind {
	case store.TransitionNewThread, store.TransitionClearThread:
		return live.Version, []string{"/clear"}, nil
	case store.TransitionResumeThread:
		return live.Version, []string{"/resume " + thread}, nil
	}
	return live.Version, nil, fmt.Errorf("%w: no Claude Code plan for %s", termapi.ErrRefused, kind)
}

// Threads implements agents.ThreadControl: the transcripts of the pane's
// project directory whose records all name the file's session and the
// workspace, with at least one prompt.
func (Agent) Threads(ctx context.Context, p agents.Pane) ([]agents.NativeThread, error) {
	return listThreads(ctx, filepath.Join(configDir(p.PID), "projects", ProjectDirName(p.Cwd)), p.Cwd)
}

// listThreads lists the threads of workspace cwd in its Claude Code
// project directory dir, until ctx ends.
func listThreads(ctx context.Context, dir, cwd string) ([]agents.NativeThread, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the Claude Code project directory: %w", err)
	}
	var out []agents.NativeThread
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read the Claude Code project directory: %w", err)
		}
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || !agents.ValidThreadID(id) || !e.Type().IsRegular() {
			continue
		}
		if t, ok := listedThread(filepath.Join(dir, e.Name()), id, cwd); ok {
			out = append(out, t)
		}
	}
	agents.SortThreads(out)
	return out, nil
}

// listedThread reads the transcript at path of thread id; ok is false when
// it is not one complete thread of workspace cwd with a prompt.
func listedThread(path, id, cwd string) (t agents.NativeThread, ok bool) {
	t = agents.NativeThread{ID: id}
	summary, foreign := "", false
	// A file that cannot be opened or read has no title: nothing to resume.
	_ = agents.ScanListed(path, func(line []byte) bool {
		var r struct {
			Type        string `json:"type"`
			SessionID   string `json:"sessionId"`
			Cwd         string `json:"cwd"`
			Timestamp   string `json:"timestamp"`
			IsSidechain bool   `json:"isSidechain"`
			IsMeta      bool   `json:"isMeta"`
			Summary     string `json:"summary"`
			Message     struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(line, &r) != nil {
			return true // a partial last line
		}
		if r.SessionID != "" && !strings.EqualFold(r.SessionID, id) {
			foreign = true // not one complete thread
			return false
		}
		if r.Cwd != "" && r.Cwd != cwd {
			foreign = true
			return false
		}
		if r.Type == "summary" && r.Summary != "" {
			summary = r.Summary
		}
		if ts, err := time.Parse(time.RFC3339Nano, r.Timestamp); err == nil {
			ms := ts.UnixMilli()
			if t.CreatedAt == 0 || ms < t.CreatedAt {
				t.CreatedAt = ms
			}
			if ms > t.UpdatedAt {
				t.UpdatedAt = ms
			}
		}
		if r.Type != "user" || r.Message.Role != "user" || r.IsSidechain || r.IsMeta || t.Title != "" {
			return true
		}
		var text string
		if json.Unmarshal(r.Message.Content, &text) == nil && text != "" && !strings.HasPrefix(text, "<") {
			t.Title = text
		}
		return true
	})
	if foreign || t.Title == "" {
		return agents.NativeThread{}, false // nothing to resume
	}
	if summary != "" {
		t.Title = summary
	}
	t.Title = agents.ThreadTitle(t.Title)
	return t, true
}
