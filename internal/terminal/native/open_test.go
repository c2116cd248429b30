package native

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestOpenOwnedRefusesLinksFIFOsAndOpenModes: a session file replaced by
// a symlink or a FIFO is refused, and the FIFO does not block the opener
// (before, opening one with no writer blocked the monitor for good); a
// file with a forbidden permission bit is refused.
func TestOpenOwnedRefusesLinksFIFOsAndOpenModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	regular := filepath.Join(dir, "session.jsonl")
	if err := os.WriteFile(regular, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(dir, "shared.jsonl")
	if err := os.WriteFile(shared, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o620); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(regular, filepath.Join(dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.jsonl"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenOwned(regular, 0o077)
	if err != nil {
		t.Fatalf("regular file refused: %v", err)
	}
	_ = f.Close()
	if f, err := OpenOwned(shared, 0o022); err == nil {
		_ = f.Close()
		t.Errorf("a group-writable file opened")
	}
	for _, name := range []string{"link.jsonl", "fifo.jsonl"} {
		done := make(chan error, 1)
		go func() {
			f, err := OpenOwned(filepath.Join(dir, name), 0o022)
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
