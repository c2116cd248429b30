package claude_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
)

func TestProjectDirName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/srv/ccwork-tui":    "-srv-ccwork-tui",
		"/srv/cc_work.dot-x": "-srv-cc-work-dot-x",
		"/home/é/x":          "-home---x",
		"/tmp/\U0001F600/x":  "-tmp----x",
		"/Tmp/A1":            "-Tmp-A1",
	} {
		if got := claude.ProjectDirName(in); got != want {
			t.Errorf("ProjectDirName(%q) = %q, want %q", in, got, want)
		}
	}
	if got, want := claude.TranscriptPath("/c", "/srv/w", session), "/c/projects/-srv-w/"+session+".jsonl"; got != want {
		t.Errorf("TranscriptPath = %q, want %q", got, want)
	}
}

func TestReadLiveSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(pid, body string) {
		_ = os.MkdirAll(filepath.Join(dir, "sessions"), 0o700)
		if err := os.WriteFile(filepath.Join(dir, "sessions", pid+".json"), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("7", `{"pid":7,"sessionId":"`+session+`","cwd":"/srv/w","startedAt":5,"kind":"interactive","status":"idle","extra":{"x":1}}`)
	write("8", `{"pid":9,"sessionId":"`+session+`","cwd":"/srv/w","startedAt":5}`)
	s, err := claude.ReadLiveSession(dir, 7)
	if err != nil || s.PID != 7 || s.SessionID != session || s.Cwd != "/srv/w" || s.StartedAtMs != 5 || s.Status != "idle" || s.StartedAt().UnixMilli() != 5 {
		t.Fatalf("%+v, %v", s, err)
	}
	if _, err := claude.ReadLiveSession(dir, 6); !errors.Is(err, claude.ErrNoLiveSession) {
		t.Errorf("absent pid: %v, want ErrNoLiveSession", err)
	}
	if _, err := claude.ReadLiveSession(dir, 8); err == nil {
		t.Error("a file naming another pid was accepted")
	}
	for _, bad := range []string{`nope`, `{"sessionId":"x","cwd":"/a"}`, `{"pid":1,"cwd":"/a"}`, `{"pid":1,"sessionId":"x","cwd":"rel"}`,
		// The session id names the transcript file: no path out of the
		// project directory (these were accepted before).
		`{"pid":1,"sessionId":"../../../etc/passwd","cwd":"/a"}`, `{"pid":1,"sessionId":"..","cwd":"/a"}`,
		`{"pid":1,"sessionId":"a/b","cwd":"/a"}`, `{"pid":1,"sessionId":"x\n/quit","cwd":"/a"}`} {
		if s, err := claude.ParseLiveSession([]byte(bad)); err == nil {
			t.Errorf("ParseLiveSession(%s) = %+v, want an error", bad, s)
		}
	}
}

func TestReadLiveSessionRefusesFIFOsAndHugeFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A FIFO with no writer blocked the reader for good before.
	if err := syscall.Mkfifo(filepath.Join(dir, "sessions", "7.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := claude.ReadLiveSession(dir, 7); done <- err }()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, claude.ErrNoLiveSession) {
			t.Fatalf("FIFO registry entry: %v, want a read error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ReadLiveSession blocked on a FIFO for 10 s")
	}
	huge := `{"pid":8,"sessionId":"` + session + `","cwd":"/w","pad":"` + strings.Repeat("x", 2<<20) + `"}`
	if err := os.WriteFile(filepath.Join(dir, "sessions", "8.json"), []byte(huge), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := claude.ReadLiveSession(dir, 8); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("2 MiB registry entry: %v, want refused as too large", err)
	}
}
