package sqlite_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

// TestListenerDeafWhileNobodyWatches: a process with no reader waiting for
// an announcement stops watching the change signal (every commit of every
// process used to wake its listener only to be discarded), and watches it
// again as soon as a reader starts watching, which is then woken by
// another open's writes as before.
func TestListenerDeafWhileNobodyWatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), sqlite.FileName)
	writer, reader := open(t, path), open(t, path)
	ctx := t.Context()
	var st syscall.Stat_t
	if err := syscall.Stat(path+"-changed", &st); err != nil {
		t.Fatal(err)
	}
	watches := func() int { return inotifyWatches(t, st.Ino) }
	await := func(what string, want int) {
		t.Helper()
		// The kernel's view cannot signal: poll it.
		if !poll.Within(10*time.Second, func() bool { return watches() == want }) {
			t.Fatalf("%s: %d inotify watches on the change signal, want %d", what, watches(), want)
		}
	}
	task := storetest.Task("deaf", "main", "k", 1)
	if err := writer.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	await("after a commit nobody waits for", 0)

	changed, stop := reader.WatchTask(task.ID)
	await("once a reader watches", 1)
	if err := writer.AppendLogs(ctx, task.ID, 1, []store.LogEntry{{Seq: 1, Type: "x", Text: "progress"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("a log entry written by another open did not wake the watcher")
	}
	stop()
	task.Status, task.Summary = store.StatusCompleted, "done"
	if err := writer.UpdateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	await("once the reader stopped watching", 0)
}

// inotifyWatches counts this process's inotify watches on inode ino (the
// kernel lists them in the fdinfo of each inotify descriptor).
func inotifyWatches(t *testing.T, ino uint64) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc:", err)
	}
	n := 0
	for _, fd := range fds {
		if target, _ := os.Readlink("/proc/self/fd/" + fd.Name()); target != "anon_inode:inotify" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + fd.Name())
		if err != nil {
			continue // closed meanwhile
		}
		for line := range strings.Lines(string(info)) {
			for f := range strings.FieldsSeq(line) {
				if v, ok := strings.CutPrefix(f, "ino:"); ok {
					if i, err := strconv.ParseUint(v, 16, 64); err == nil && i == ino {
						n++
					}
				}
			}
		}
	}
	return n
}
