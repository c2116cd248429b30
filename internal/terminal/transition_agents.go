package terminal

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
)

// Native thread plans, measured on the agent versions the project tests
// with. A version whose screens the plan was not proven against is refused.

// ClaudeThreadVersion is the Claude Code version the thread plans were
// measured on: `/clear` switches the live-session entry to a new sessionId
// at once (new and clear are the same control), and `/resume <uuid>`
// switches it to that session.
const ClaudeThreadVersion = "2.1.332"

// CodexThreadVersion is the Codex version the thread plans were measured
// on: `/new` and `/clear` switch to a new thread, `/resume <uuid>` to that
// thread. Codex keeps every thread it visited open (rollout and writer
// lock), so the foreground thread is proven by the writer lock written
// last (codex.ReadForeground), which the TUI's /status card agreed with.
const CodexThreadVersion = "0.171.0"

var (
	_ ThreadControl = ClaudeAgent{}
	_ ThreadControl = CodexAgent{}
)

// ThreadPlan implements ThreadControl.
func (ClaudeAgent) ThreadPlan(_ context.Context, p Pane, kind, thread string) (string, []string, error) {
	live, err := claude.ReadLiveSession(claudeDir(p.PID), p.PID)
	if err != nil {
		return "", nil, fmt.Errorf("%w: read the Claude Code live-session entry: %w", ErrRefused, err)
	}
	if live.Version != ClaudeThreadVersion {
		return live.Version, nil, fmt.Errorf("%w: native thread controls are proven on Claude Code %s only; this pane runs %q",
			ErrRefused, ClaudeThreadVersion, live.Version)
	}
	switch kind {
	case store.TransitionNewThread, store.TransitionClearThread:
		return live.Version, []string{"/clear"}, nil
	case store.TransitionResumeThread:
		return live.Version, []string{"/resume " + thread}, nil
	}
	return live.Version, nil, fmt.Errorf("%w: no Claude Code plan for %s", ErrRefused, kind)
}

// maxThreadFile bounds how much of one session file a thread listing reads.
const maxThreadFile = 8 << 20

// Threads implements ThreadControl: the transcripts of the pane's project
// directory whose records all name the file's session and the workspace,
// with at least one prompt.
func (ClaudeAgent) Threads(ctx context.Context, p Pane) ([]NativeThread, error) {
	return claudeThreads(ctx, filepath.Join(claudeDir(p.PID), "projects", claude.ProjectDirName(p.Cwd)), p.Cwd)
}

// claudeThreads lists the threads of workspace cwd in its Claude Code
// project directory dir, until ctx ends.
func claudeThreads(ctx context.Context, dir, cwd string) ([]NativeThread, error) {
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the Claude Code project directory: %w", err)
	}
	var out []NativeThread
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read the Claude Code project directory: %w", err)
		}
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || !threadIDPattern().MatchString(id) || !e.Type().IsRegular() {
			continue
		}
		if t, ok := claudeThread(filepath.Join(dir, e.Name()), id, cwd); ok {
			out = append(out, t)
		}
	}
	sortThreads(out)
	return out, nil
}

func claudeThread(path, id, cwd string) (NativeThread, bool) {
	f, err := openListed(path)
	if err != nil {
		return NativeThread{}, false
	}
	defer f.Close()
	t := NativeThread{ID: id}
	sc := bufio.NewScanner(&limitedReader{f: f, n: maxThreadFile})
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	summary := ""
	for sc.Scan() {
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
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue // a partial last line
		}
		if r.SessionID != "" && !strings.EqualFold(r.SessionID, id) {
			return NativeThread{}, false // not one complete thread
		}
		if r.Cwd != "" && r.Cwd != cwd {
			return NativeThread{}, false
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
			continue
		}
		var text string
		if json.Unmarshal(r.Message.Content, &text) == nil && text != "" && !strings.HasPrefix(text, "<") {
			t.Title = text
		}
	}
	if t.Title == "" {
		return NativeThread{}, false // nothing to resume
	}
	if summary != "" {
		t.Title = summary
	}
	t.Title = threadTitle(t.Title)
	return t, true
}

// ThreadPlan implements ThreadControl: `/new`, `/clear` or `/resume <uuid>`
// on Codex CodexThreadVersion. A TUI that never had a prompt has no thread
// to leave (its first send starts one), and a process whose foreground
// thread its files cannot name is refused.
func (c CodexAgent) ThreadPlan(_ context.Context, p Pane, kind, thread string) (string, []string, error) {
	version, err := c.Version(p)
	if err != nil {
		return "", nil, fmt.Errorf("%w: read the Codex version: %w", ErrRefused, err)
	}
	if version != CodexThreadVersion {
		return version, nil, fmt.Errorf("%w: native thread controls are proven on Codex %s only; this pane runs %q",
			ErrRefused, CodexThreadVersion, version)
	}
	st, err := c.state(p)
	if err != nil {
		return version, nil, fmt.Errorf("%w: read Codex's open files: %w", ErrRefused, err)
	}
	id, err := st.identity()
	if err != nil {
		return version, nil, err
	}
	if id.ThreadID == "" {
		return version, nil, fmt.Errorf("%w: this Codex has no thread yet (no prompt was sent); the first send starts one", ErrRefused)
	}
	switch kind {
	case store.TransitionNewThread:
		return version, []string{"/new"}, nil
	case store.TransitionClearThread:
		return version, []string{"/clear"}, nil
	case store.TransitionResumeThread:
		return version, []string{"/resume " + thread}, nil
	}
	return version, nil, fmt.Errorf("%w: no Codex plan for %s", ErrRefused, kind)
}

// Threads implements ThreadControl: the TUI rollouts under the sessions
// tree whose session_meta names the pane's workspace, with the title and
// last update of the thread's row in Codex's state database when it has
// one (a row without such a rollout is not offered: the rollout is what
// a resume is verified against).
func (CodexAgent) Threads(ctx context.Context, p Pane) ([]NativeThread, error) {
	return codexThreads(ctx, codexHome(p.PID), p.Cwd)
}

// codexThreads lists the threads of workspace cwd under Codex home. It
// stops at ctx's end: a sessions tree holds every rollout of every
// workspace, and each one's first line is read.
func codexThreads(ctx context.Context, home, cwd string) ([]NativeThread, error) {
	rows, err := codex.ReadStateThreads(ctx, home, cwd)
	if err != nil {
		rows = nil // the rollouts alone still list the threads
	}
	byID := map[string]codex.StateThread{}
	for _, r := range rows {
		byID[r.ID] = r
	}
	var out []NativeThread
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
		meta, err := codex.ReadSessionMeta(path)
		if err != nil || meta.Subagent || meta.Cwd != cwd || meta.Originator != "codex-tui" ||
			!strings.HasSuffix(strings.TrimSuffix(name, ".jsonl"), meta.ID) || !threadIDPattern().MatchString(meta.ID) {
			return nil
		}
		t := NativeThread{ID: meta.ID, CreatedAt: meta.Timestamp.UnixMilli()}
		if info, err := d.Info(); err == nil {
			t.UpdatedAt = info.ModTime().UnixMilli()
		}
		t.Title = codexFirstPrompt(path)
		if row, ok := byID[strings.ToLower(meta.ID)]; ok && t.Title != "" {
			if row.Title != "" {
				t.Title = threadTitle(row.Title)
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
	sortThreads(out)
	return out, nil
}

func codexFirstPrompt(path string) string {
	f, err := openListed(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(&limitedReader{f: f, n: maxThreadFile})
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
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
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			continue
		}
		// The user's request: a user message item (Codex 0.171.0), or the
		// older user_message event; context items start with "<".
		if r.Type == "event_msg" && r.Payload.Type == "user_message" && r.Payload.Message != "" {
			return threadTitle(r.Payload.Message)
		}
		if r.Type == "response_item" && r.Payload.Type == "message" && r.Payload.Role == "user" {
			for _, c := range r.Payload.Content {
				if c.Type == "input_text" && c.Text != "" && !strings.HasPrefix(c.Text, "<") {
					return threadTitle(c.Text)
				}
			}
		}
	}
	return ""
}

func threadTitle(s string) string {
	s = strings.Join(strings.Fields(Redact(s)), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}

func sortThreads(ts []NativeThread) {
	sort.SliceStable(ts, func(i, j int) bool {
		if ts[i].UpdatedAt != ts[j].UpdatedAt {
			return ts[i].UpdatedAt > ts[j].UpdatedAt
		}
		return ts[i].ID < ts[j].ID
	})
}

type limitedReader struct {
	f *os.File
	n int64
}

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, fmt.Errorf("session file larger than %d bytes", maxThreadFile)
	}
	if int64(len(b)) > l.n {
		b = b[:l.n]
	}
	n, err := l.f.Read(b)
	l.n -= int64(n)
	return n, err
}

// openListed opens a session file a thread listing found: not through a
// symlink, and non-blocking, so a file swapped for a link or a FIFO after
// the directory was read is refused rather than followed or waited on.
func openListed(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("open %s: not a regular file", path)
	}
	return f, nil
}
