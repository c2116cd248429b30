package codex

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The foreground thread of a Codex process that has visited several
// threads (measured on Codex 0.171.0 under the fake model):
//
//   - the TUI keeps every thread it visited open: its rollout (once the
//     thread's first prompt materialized it) and its writer lock
//     $CODEX_HOME/thread-writer-locks/<thread id>.lock (flock'ed for
//     writing by the process);
//   - `/new` and `/clear` create the new thread's writer lock at once, before
//     any rollout exists; `/resume <id>` replaces the resumed thread's lock
//     with a new file (new inode, new mtime);
//   - prompts, replies and `/status` leave every lock untouched, and a fresh
//     TUI holds no lock until its first prompt.
//
// Not measured (the fake model starts no sub-agent): whether a sub-agent
// thread takes a writer lock; the locks of sub-agent rollouts are left out,
// and a sub-agent lock before its rollout exists would read as a thread
// switch (a conflict row) until the rollout shows it.
//
// So the thread whose held lock was written last is the thread the process
// switched to last: its foreground thread. The TUI's own `/status` card
// (`Session: <id>`) agreed with this rule after every /new, /clear and
// /resume measured.

// WriterLocksDir is the directory of Codex's thread writer locks under
// $CODEX_HOME.
const WriterLocksDir = "thread-writer-locks"

var lockName = lazyRE(`^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})\.lock$`)

// WriterLock is one thread writer lock a process holds open.
type WriterLock struct {
	// ThreadID is the thread the lock names (lowercase).
	ThreadID string `json:"native_thread_id"`
	Path     string `json:"path"`
	// ModTime is when the lock file was last written (Codex creates it
	// when it switches to the thread).
	ModTime time.Time `json:"mod_time"`
}

// Foreground is the thread a Codex process switched to last, from its held
// writer locks.
type Foreground struct {
	// ThreadID is the foreground thread, "" when the locks cannot tell
	// (see Reason).
	ThreadID string `json:"native_thread_id,omitempty"`
	// Reason says why ThreadID is empty: no lock held, or a tie.
	Reason string `json:"reason,omitempty"`
	// Locks are the held writer locks, in the order of the open files.
	Locks []WriterLock `json:"locks,omitempty"`
}

// ReadForeground finds the writer locks among a process's open files (those
// directly inside realpath($CODEX_HOME/thread-writer-locks), regular, not
// deleted, the file at the path being the open one) and names the thread
// of the one written last. Two locks written at the same instant leave the
// foreground unknown. Files that are not such locks, and the locks of the
// threads in exclude (sub-agent threads, by lowercase id), are ignored.
func ReadForeground(codexHome string, open []OpenFile, exclude map[string]bool) (Foreground, error) {
	var fg Foreground
	dir, err := filepath.EvalSymlinks(filepath.Join(codexHome, WriterLocksDir))
	if err != nil {
		// No lock directory: the process holds no lock.
		fg.Reason = "no thread writer lock held"
		return fg, nil
	}
	seen := map[string]bool{}
	for _, f := range open {
		if strings.HasSuffix(f.Path, " (deleted)") || filepath.Dir(f.Path) != dir {
			continue
		}
		m := lockName().FindStringSubmatch(filepath.Base(f.Path))
		if m == nil || seen[f.Path] || exclude[strings.ToLower(m[1])] {
			continue
		}
		seen[f.Path] = true
		var st syscall.Stat_t
		if err := syscall.Lstat(f.Path, &st); err != nil {
			return Foreground{}, fmt.Errorf("codex writer lock %s: %w", f.Path, err)
		}
		if st.Mode&syscall.S_IFMT != syscall.S_IFREG || uint64(st.Dev) != f.Dev || st.Ino != f.Ino {
			// Replaced since the process opened it: a /resume in progress.
			return Foreground{}, fmt.Errorf("codex writer lock %s at its path is not the file the process holds open", f.Path)
		}
		fg.Locks = append(fg.Locks, WriterLock{ThreadID: strings.ToLower(m[1]), Path: f.Path,
			ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec)})
	}
	if len(fg.Locks) > MaxOpenRollouts {
		return Foreground{}, fmt.Errorf("codex writer locks: the process holds %d open (more than %d)", len(fg.Locks), MaxOpenRollouts)
	}
	var newest *WriterLock
	tie := false
	for i := range fg.Locks {
		l := &fg.Locks[i]
		switch {
		case newest == nil || l.ModTime.After(newest.ModTime):
			newest, tie = l, false
		case l.ModTime.Equal(newest.ModTime) && l.ThreadID != newest.ThreadID:
			tie = true
		}
	}
	switch {
	case newest == nil:
		fg.Reason = "no thread writer lock held"
	case tie:
		fg.Reason = "two thread writer locks were written at the same instant"
	default:
		fg.ThreadID = newest.ThreadID
	}
	return fg, nil
}
