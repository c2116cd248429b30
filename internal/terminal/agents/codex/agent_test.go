package codex

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/termapi"
)

func TestCodexIdentityFollowsTheNewestWriterLock(t *testing.T) {
	t.Parallel()
	const a, b, c = "01a232d8-346a-7382-8abe-b11e9f99092a", "01a232d8-3710-7fb3-b651-1c8383905180", "01a232d8-4145-7e12-8949-781be138d6ee"
	root := func(id string) Rollout {
		return Rollout{ThreadID: id, Path: "/h/sessions/rollout-x-" + id + ".jsonl"}
	}
	inv := func(roots ...Rollout) Inventory {
		st := map[int]InventoryStatus{0: VerifiedAbsent, 1: Resolved}[len(roots)]
		if st == "" {
			st = Unbound
		}
		return Inventory{Status: st, Roots: roots}
	}
	tests := []struct {
		name    string
		st      processState
		thread  string
		file    bool
		refused bool
		locked  string
	}{
		{"virgin TUI, even with its first lock", processState{inv: inv(), fg: Foreground{ThreadID: a}}, "", false, false, a},
		{"after /new once the old rollout is closed: only the lock names it", processState{inv: inv(), fg: Foreground{ThreadID: b}}, "", false, false, b},
		{"virgin TUI with no lock yet", processState{inv: inv(), fg: Foreground{Reason: "none"}}, "", false, false, ""},
		{"one rollout, no lock (older layout)", processState{inv: inv(root(a)), fg: Foreground{Reason: "none"}}, a, true, false, ""},
		{"after /new: the new thread has no rollout yet", processState{inv: inv(root(a)), fg: Foreground{ThreadID: b}}, b, false, false, ""},
		{"after /new and a prompt: two rollouts, the newest lock picks", processState{inv: inv(root(a), root(b)), fg: Foreground{ThreadID: b}}, b, true, false, ""},
		{"after /resume of the older thread", processState{inv: inv(root(a), root(b), root(c)), fg: Foreground{ThreadID: a}}, a, true, false, ""},
		{"several rollouts and no lock to tell", processState{inv: inv(root(a), root(b)), fg: Foreground{Reason: "tie"}}, "", false, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.st.identity()
			if tt.refused {
				if !errors.Is(err, termapi.ErrRefused) {
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

func TestCodexFirstPromptSkipsContextItems(t *testing.T) {
	t.Parallel()
	got := firstPrompt(filepath.Join("testdata", "rollout-reply.jsonl"))
	if got != "say hello WAIT=1500" {
		t.Fatalf("first prompt = %q", got)
	}
}

func TestCodexThreadsStayInTheSessionsTreeAndStopAtCtxEnd(t *testing.T) {
	t.Parallel()
	const id = "01a23237-ba11-7ba2-b981-780a3f26a857"
	const cwd = "/tmp/codex-golden/work"
	body, err := os.ReadFile(filepath.Join("testdata", "rollout-reply.jsonl"))
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
	got, err := listThreads(t.Context(), home, cwd)
	if err != nil || len(got) != 1 || got[0].ID != id || got[0].Title != "say hello WAIT=1500" {
		t.Fatalf("threads = %+v, %v; want only %s", got, err, id)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got, err := listThreads(ctx, home, cwd); !errors.Is(err, context.Canceled) {
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
	abs, err := filepath.Abs(filepath.Join("testdata", "rollout-reply.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(abs, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, link} {
		for name, read := range map[string]func() bool{
			"firstPrompt":     func() bool { return firstPrompt(path) != "" },
			"ReadSessionMeta": func() bool { _, err := ReadSessionMeta(path); return err == nil },
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
