package terminal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
)

func TestClaudeThreadIsOneCompleteVerifiedTranscript(t *testing.T) {
	t.Parallel()
	const id = "6f1c2d3e-0000-4000-8000-00000000abcd"
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rec := func(extra string) string {
		return `{"type":"user","sessionId":"` + id + `","cwd":"/w","timestamp":"2026-12-01T10:00:0` + extra
	}
	good := rec(`1Z","isMeta":true,"message":{"role":"user","content":"<local-command-caveat>x</local-command-caveat>"}}`) + "\n" +
		rec(`2Z","message":{"role":"user","content":"fix the bug OPENAI_API_KEY=sk-abcdefghijklmnop please"}}`) + "\n" +
		rec(`3Z","message":{"role":"user","content":"second prompt"}}`) + "\n" + `{"type":"assistant","sessionId":"` + id + `","cwd":"/w","timestamp":"2026-12-01T10:00:09Z"}` + "\n" + `{"partial`
	tests := []struct {
		name, body, cwd string
		ok              bool
		title           string
	}{
		{"first real prompt, redacted", good, "/w", true, "fix the bug OPENAI_API_KEY=[REDACTED] please"},
		{"another workspace", good, "/other", false, ""},
		{"a record of another session", good + "\n" + `{"type":"user","sessionId":"00000000-0000-4000-8000-000000000000","cwd":"/w"}` + "\n", "/w", false, ""},
		{"no prompt", `{"type":"summary","summary":"s"}` + "\n", "/w", false, ""},
		{"summary wins", `{"type":"summary","summary":"Fix the parser"}` + "\n" + good, "/w", true, "Fix the parser"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := write(strings.Repeat("x", i+1)+".jsonl", tt.body)
			got, ok := claudeThread(p, id, tt.cwd)
			if ok != tt.ok || got.Title != tt.title {
				t.Fatalf("claudeThread = %+v, %v; want ok %v title %q", got, ok, tt.ok, tt.title)
			}
			if ok && (got.CreatedAt >= got.UpdatedAt || got.ID != id) {
				t.Fatalf("times or id: %+v", got)
			}
		})
	}
}

func TestCodexFirstPromptSkipsContextItems(t *testing.T) {
	t.Parallel()
	got := codexFirstPrompt(filepath.Join("codex", "testdata", "rollout-reply.jsonl"))
	if got != "say hello WAIT=1500" {
		t.Fatalf("first prompt = %q", got)
	}
}

func TestCodexIdentityFollowsTheNewestWriterLock(t *testing.T) {
	t.Parallel()
	const a, b, c = "01a232d8-346a-7382-8abe-b11e9f99092a", "01a232d8-3710-7fb3-b651-1c8383905180", "01a232d8-4145-7e12-8949-781be138d6ee"
	root := func(id string) codex.Rollout {
		return codex.Rollout{ThreadID: id, Path: "/h/sessions/rollout-x-" + id + ".jsonl"}
	}
	inv := func(roots ...codex.Rollout) codex.Inventory {
		st := map[int]codex.InventoryStatus{0: codex.VerifiedAbsent, 1: codex.Resolved}[len(roots)]
		if st == "" {
			st = codex.Unbound
		}
		return codex.Inventory{Status: st, Roots: roots}
	}
	tests := []struct {
		name    string
		st      codexState
		thread  string
		file    bool
		refused bool
		locked  string
	}{
		{"virgin TUI, even with its first lock", codexState{inv: inv(), fg: codex.Foreground{ThreadID: a}}, "", false, false, a},
		{"after /new once the old rollout is closed: only the lock names it", codexState{inv: inv(), fg: codex.Foreground{ThreadID: b}}, "", false, false, b},
		{"virgin TUI with no lock yet", codexState{inv: inv(), fg: codex.Foreground{Reason: "none"}}, "", false, false, ""},
		{"one rollout, no lock (older layout)", codexState{inv: inv(root(a)), fg: codex.Foreground{Reason: "none"}}, a, true, false, ""},
		{"after /new: the new thread has no rollout yet", codexState{inv: inv(root(a)), fg: codex.Foreground{ThreadID: b}}, b, false, false, ""},
		{"after /new and a prompt: two rollouts, the newest lock picks", codexState{inv: inv(root(a), root(b)), fg: codex.Foreground{ThreadID: b}}, b, true, false, ""},
		{"after /resume of the older thread", codexState{inv: inv(root(a), root(b), root(c)), fg: codex.Foreground{ThreadID: a}}, a, true, false, ""},
		{"several rollouts and no lock to tell", codexState{inv: inv(root(a), root(b)), fg: codex.Foreground{Reason: "tie"}}, "", false, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.st.identity()
			if tt.refused {
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("identity = %+v, %v; want refused", id, err)
				}
				return
			}
			if err != nil || id.ThreadID != tt.thread || (id.File != "") != tt.file || id.Locked != tt.locked {
				t.Fatalf("identity = %+v, %v; want thread %q (file %v, locked %q)", id, err, tt.thread, tt.file, tt.locked)
			}
			if tt.file && !strings.Contains(id.File, tt.thread) {
				t.Fatalf("identity file %s is not the thread's rollout", id.File)
			}
		})
	}
}

func TestCodexThreadsStayInTheSessionsTreeAndStopAtCtxEnd(t *testing.T) {
	t.Parallel()
	const id = "01a23237-ba11-7ba2-b981-780a3f26a857"
	const cwd = "/tmp/codex-golden/work"
	body, err := os.ReadFile(filepath.Join("codex", "testdata", "rollout-reply.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	home, outside := t.TempDir(), t.TempDir()
	day := filepath.Join(home, "sessions", "2026", "12", "01")
	if err := os.MkdirAll(day, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(day, "rollout-2026-12-01T15-27-22-"+id+".jsonl"), body, 0o600); err != nil {
		t.Fatal(err)
	}
	// A rollout outside the tree, reached by a symlinked file and a
	// symlinked directory, and a FIFO that would block a reader: none is
	// opened or listed.
	const other = "01a23237-ba11-7ba2-b981-780a3f26a858"
	foreign := filepath.Join(outside, "rollout-2026-12-01T15-27-22-"+other+".jsonl")
	if err := os.WriteFile(foreign, []byte(strings.ReplaceAll(string(body), id, other)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(foreign, filepath.Join(day, filepath.Base(foreign))); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(home, "sessions", "2026", "11")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(day, "rollout-2026-12-01T15-27-23-01a23237-ba11-7ba2-b981-780a3f26a859.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := codexThreads(t.Context(), home, cwd)
	if err != nil || len(got) != 1 || got[0].ID != id || got[0].Title != "say hello WAIT=1500" {
		t.Fatalf("threads = %+v, %v; want only %s", got, err, id)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got, err := codexThreads(ctx, home, cwd); !errors.Is(err, context.Canceled) {
		t.Fatalf("threads after the caller gave up = %+v, %v; want context.Canceled", got, err)
	}
}

func TestClaudeThreadsSkipLinksAndFIFOsAndStopAtCtxEnd(t *testing.T) {
	t.Parallel()
	const id, other, fifo = "6f1c2d3e-0000-4000-8000-00000000abcd", "6f1c2d3e-0000-4000-8000-00000000abce", "6f1c2d3e-0000-4000-8000-00000000abcf"
	rec := func(id string) string {
		return `{"type":"user","sessionId":"` + id + `","cwd":"/w","timestamp":"2026-12-01T10:00:01Z","message":{"role":"user","content":"hello"}}` + "\n"
	}
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), []byte(rec(id)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, other+".jsonl"), []byte(rec(other)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, other+".jsonl"), filepath.Join(dir, other+".jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, fifo+".jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := claudeThreads(t.Context(), dir, "/w")
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("threads = %+v, %v; want only %s", got, err, id)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got, err := claudeThreads(ctx, dir, "/w"); !errors.Is(err, context.Canceled) {
		t.Fatalf("threads after the caller gave up = %+v, %v; want context.Canceled", got, err)
	}
}

// TestThreadListingOpensNeitherFIFOsNorLinks: a session file swapped for
// a FIFO or a symlink between the directory read and the open is refused
// at once (before, the FIFO blocked the listing for good and the link was
// followed out of the agent's home).
func TestThreadListingOpensNeitherFIFOsNorLinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo, link := filepath.Join(dir, "fifo.jsonl"), filepath.Join(dir, "link.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(filepath.Join("codex", "testdata", "rollout-reply.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, link} {
		for name, read := range map[string]func() bool{
			"claudeThread":     func() bool { _, ok := claudeThread(path, "6f1c2d3e-0000-4000-8000-00000000abcd", "/w"); return ok },
			"codexFirstPrompt": func() bool { return codexFirstPrompt(path) != "" },
			"ReadSessionMeta":  func() bool { _, err := codex.ReadSessionMeta(path); return err == nil },
		} {
			done := make(chan bool, 1)
			go func() { done <- read() }()
			select {
			case ok := <-done:
				if ok {
					t.Errorf("%s read %s", name, filepath.Base(path))
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s blocked on %s for 10 s", name, filepath.Base(path))
			}
		}
	}
}
