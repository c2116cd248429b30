package codex_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
)

const (
	threadA = "01a232d8-346a-7382-8abe-b11e9f99092a"
	threadB = "01a232d8-3710-7fb3-b651-1c8383905180"
)

// lockFile creates a writer lock written at mtime and returns it as the
// process would hold it open.
func lockFile(t *testing.T, home, name string, mtime time.Time) codex.OpenFile {
	t.Helper()
	dir := filepath.Join(home, codex.WriterLocksDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return codex.OpenFile{FD: 40, Path: p, Dev: uint64(st.Dev), Ino: st.Ino}
}

func TestReadForeground(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if fg, err := codex.ReadForeground(home, nil, nil); err != nil || fg.ThreadID != "" || fg.Reason == "" {
		t.Fatalf("no lock directory: %+v, %v", fg, err)
	}
	a := lockFile(t, home, threadA+".lock", t0)
	b := lockFile(t, home, strings.ToUpper(threadB)+".lock", t0.Add(time.Second))
	coord := lockFile(t, home, ".coordination.lock", t0.Add(time.Hour))
	other := codex.OpenFile{FD: 9, Path: filepath.Join(home, "state_5.sqlite")}

	fg, err := codex.ReadForeground(home, []codex.OpenFile{other, b, a, coord, a}, nil)
	if err != nil || fg.ThreadID != threadB || len(fg.Locks) != 2 {
		t.Fatalf("the lock written last names the foreground: %+v, %v", fg, err)
	}
	// A sub-agent thread's lock is left out.
	if fg, err := codex.ReadForeground(home, []codex.OpenFile{b, a}, map[string]bool{threadB: true}); err != nil || fg.ThreadID != threadA || len(fg.Locks) != 1 {
		t.Fatalf("a sub-agent's lock: %+v, %v", fg, err)
	}
	// /resume A recreates A's lock: A is the foreground again.
	// (Made beside it and renamed over it, so it is surely another inode.)
	next := lockFile(t, home, "next", t0.Add(2*time.Second))
	if err := os.Rename(next.Path, a.Path); err != nil {
		t.Fatal(err)
	}
	a2 := next
	a2.Path = a.Path
	if fg, err := codex.ReadForeground(home, []codex.OpenFile{a2, b}, nil); err != nil || fg.ThreadID != threadA {
		t.Fatalf("after a resume: %+v, %v", fg, err)
	}
	// The process still holds the replaced file: no guess.
	if _, err := codex.ReadForeground(home, []codex.OpenFile{a, b}, nil); err == nil {
		t.Fatal("a lock replaced at its path was taken as held")
	}
	if fg, err := codex.ReadForeground(home, []codex.OpenFile{{Path: a2.Path + " (deleted)", Dev: a2.Dev, Ino: a2.Ino}, b}, nil); err != nil || fg.ThreadID != threadB {
		t.Fatalf("a deleted lock counts: %+v, %v", fg, err)
	}
	// Two locks written at the same instant: unknown.
	tie := lockFile(t, home, threadB+".lock", t0.Add(2*time.Second))
	if fg, err := codex.ReadForeground(home, []codex.OpenFile{a2, tie}, nil); err != nil || fg.ThreadID != "" || !strings.Contains(fg.Reason, "same instant") {
		t.Fatalf("a tie: %+v, %v", fg, err)
	}
	// A lock outside the locks directory is not Codex's.
	outside := filepath.Join(home, threadA+".lock")
	if err := os.WriteFile(outside, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if fg, err := codex.ReadForeground(home, []codex.OpenFile{{Path: outside}}, nil); err != nil || fg.ThreadID != "" {
		t.Fatalf("a lock outside the directory: %+v, %v", fg, err)
	}
}

func TestReadStateThreads(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if rows, err := codex.ReadStateThreads(t.Context(), home, cwd); err != nil || rows != nil {
		t.Fatalf("no database: %v, %v", rows, err)
	}
	for _, name := range []string{"state_4.sqlite", "state_5.sqlite"} {
		db, err := sql.Open("sqlite", filepath.Join(home, name))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if _, err := db.ExecContext(ctx, `create table threads (id text primary key, cwd text, rollout_path text, title text,
			first_user_message text, created_at integer, updated_at integer)`); err != nil {
			t.Fatal(err)
		}
		if name == "state_5.sqlite" {
			if _, err := db.ExecContext(ctx, `insert into threads values (?, ?, '/r/a.jsonl', 'remember ALPHA', 'remember ALPHA', 1796149359, 1796149369),
				(?, '/elsewhere', '/r/b.jsonl', 'other', 'other', 1, 2)`, strings.ToUpper(threadA), cwd, threadB); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
	}
	if got := codex.StateDBPath(home); filepath.Base(got) != "state_5.sqlite" {
		t.Fatalf("StateDBPath = %q, want the highest schema number", got)
	}
	rows, err := codex.ReadStateThreads(t.Context(), home, cwd)
	want := codex.StateThread{ID: threadA, RolloutPath: "/r/a.jsonl", Title: "remember ALPHA", FirstPrompt: "remember ALPHA", CreatedAt: 1796149359, UpdatedAt: 1796149369}
	if err != nil || len(rows) != 1 || rows[0] != want {
		t.Fatalf("rows = %+v, %v; want only %+v", rows, err, want)
	}
	if err := os.WriteFile(filepath.Join(home, "state_6.sqlite"), []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := codex.ReadStateThreads(t.Context(), home, cwd); err == nil {
		t.Fatal("a damaged state database read without error")
	}
}
