package codex

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOpenNoFollowRefusesLinksAndFIFOs: a rollout path replaced by a
// symlink or a FIFO is refused, and the FIFO does not block the opener
// (before, opening one with no writer blocked the monitor for good).
func TestOpenNoFollowRefusesLinksAndFIFOs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	regular := filepath.Join(dir, "rollout.jsonl")
	if err := os.WriteFile(regular, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(regular, filepath.Join(dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := openNoFollow(regular)
	if err != nil {
		t.Fatalf("regular file refused: %v", err)
	}
	_ = f.Close()
	for _, name := range []string{"link.jsonl", "fifo.jsonl"} {
		done := make(chan error, 1)
		go func() {
			f, err := openNoFollow(filepath.Join(dir, name))
			if err == nil {
				_ = f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s opened", name)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("opening %s blocked for 10 s", name)
		}
	}
}
