package sqlite

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHearing: a writer hears a listener of any open of the store, its own
// process's included, only while that listener holds on, and a listener
// that goes away (its files closed, as when it is killed) is heard no more.
func TestHearing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	heard, _, closeWriter := hearing(path)
	_, hear, closeListener := hearing(path)
	defer closeWriter()
	if heard == nil || hear == nil {
		t.Fatal("hearing could not open the signal file")
	}
	if heard() {
		t.Fatal("a writer heard a listener before anyone listened")
	}
	hear(true)
	for range 2 { // asking lets go of what it took
		if !heard() {
			t.Fatal("a writer did not hear a listener that holds on")
		}
	}
	hear(false)
	if heard() {
		t.Fatal("a writer heard a listener that let go")
	}
	hear(true)
	if err := closeListener(); err != nil {
		t.Fatal(err)
	}
	if heard() {
		t.Fatal("a writer heard a listener whose files are closed")
	}
}
