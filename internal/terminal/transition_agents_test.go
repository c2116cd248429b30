package terminal

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
