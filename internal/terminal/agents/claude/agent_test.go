package claude

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
			got, ok := listedThread(p, id, tt.cwd)
			if ok != tt.ok || got.Title != tt.title {
				t.Fatalf("claudeThread = %+v, %v; want ok %v title %q", got, ok, tt.ok, tt.title)
			}
			if ok && (got.CreatedAt >= got.UpdatedAt || got.ID != id) {
				t.Fatalf("times or id: %+v", got)
			}
		})
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
	got, err := listThreads(t.Context(), dir, "/w")
	if err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("threads = %+v, %v; want only %s", got, err, id)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got, err := listThreads(ctx, dir, "/w"); !errors.Is(err, context.Canceled) {
		t.Fatalf("threads after the caller gave up = %+v, %v; want context.Canceled", got, err)
	}
}

// TestThreadListingOpensNeitherFIFOsNorLinks: a transcript swapped for a
// FIFO or a symlink between the directory read and the open is refused at
// once (before, the FIFO blocked the listing for good and the link was
// followed out of the agent's home).
func TestThreadListingOpensNeitherFIFOsNorLinks(t *testing.T) {
	t.Parallel()
	const id = "6f1c2d3e-0000-4000-8000-00000000abcd"
	dir, outside := t.TempDir(), t.TempDir()
	fifo, link := filepath.Join(dir, "fifo.jsonl"), filepath.Join(dir, "link.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(outside, id+".jsonl")
	rec := `{"type":"user","sessionId":"` + id + `","cwd":"/w","timestamp":"2026-12-01T10:00:01Z","message":{"role":"user","content":"hello"}}` + "\n"
	if err := os.WriteFile(target, []byte(rec), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, link} {
		done := make(chan bool, 1)
		go func() { _, ok := listedThread(path, id, "/w"); done <- ok }()
		select {
		case ok := <-done:
			if ok {
				t.Errorf("listedThread read %s", filepath.Base(path))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("listedThread blocked on %s for 10 s", filepath.Base(path))
		}
	}
}
