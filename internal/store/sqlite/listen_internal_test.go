package sqlite

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
)

// TestWatchSignalIgnoresTheWAL: the listener's watch reports writes to the
// signal file and not the WAL's writes beside it (a directory watch woke
// every process's listener about fifteen times per commit, to discard the
// events); without the signal file it watches the directory for it.
func TestWatchSignalIgnoresTheWAL(t *testing.T) {
	t.Parallel()
	for _, withSignal := range []bool{true, false} {
		dir := t.TempDir()
		path := filepath.Join(dir, FileName)
		files := []string{path, path + "-wal"}
		if withSignal {
			files = append(files, path+signalSuffix)
		}
		for _, f := range files {
			if err := os.WriteFile(f, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		w, err := fsnotify.NewWatcher()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := watchSignal(w, path); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+"-wal", []byte("frame"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path+signalSuffix, []byte("."), 0o600); err != nil {
			t.Fatal(err)
		}
		// With the signal file the first event is the signal's; without
		// it the directory watch hears its creation after the WAL's write.
		for heard := false; !heard; {
			select {
			case ev := <-w.Events:
				got := filepath.Base(ev.Name)
				heard = got == FileName+signalSuffix
				if withSignal && !heard {
					t.Fatalf("an event for %s (%v) reached the listener, want only the signal file's", got, ev.Op)
				}
			case err := <-w.Errors:
				t.Fatal(err)
			case <-time.After(10 * time.Second):
				t.Fatal("no event for the signal file")
			}
		}
		_ = w.Close()
	}
}
