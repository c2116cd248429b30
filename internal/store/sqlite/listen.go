package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
)

// listenerCacheKiB is the page cache of the listener's connection.
const listenerCacheKiB = 256

// keepChanges is how many of the newest task_changes rows writers keep; a
// watcher that fell further behind (it missed rows) wakes every waiter.
const keepChanges = 10000

// listener returns the store's change listener (sqlstore.Dialect.Listen).
//
// How a process learns that another one changed a task: every write of a
// task appends the task's id to the task_changes table in the same
// transaction, and once that transaction has committed the writer writes a
// byte to the signal file beside the database (signal). The listener
// watches that file (inotify, no timer; see watchSignal); each write to the
// signal file makes it read the change rows after the last one it saw, and
// wake the waiters of exactly those tasks. Events that arrive while it
// reads coalesce into one more read. (The WAL's own write events come
// before the commit is visible to readers, so they cannot be the signal.)
//
// Every commit of every process signals every listener, so while nobody
// in this process waits for an announcement (an mcp process follows the
// tasks it starts itself and usually has no such waiter) the listener
// neither reads (with ten processes writing, the reads were a sixth of
// their CPU) nor watches the signal file: each commit woke every idle
// process's listener only to be discarded. When a reader starts watching
// (began), the listener watches the file again and then reads the rows
// after the last one it saw, so a commit made while it did not watch is
// read then, and every later one signals; a reader that starts watching
// reads the store after it registered, so it misses nothing committed
// before.
func listener(path string, busy time.Duration) func(ctx context.Context, changed func(id string), watching func() bool, began <-chan struct{}) error {
	sig := filepath.Base(path) + signalSuffix
	return func(ctx context.Context, changed func(id string), watching func() bool, began <-chan struct{}) error {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return fmt.Errorf("watch store changes: %w", err)
		}
		defer w.Close()
		watched, err := watchSignal(w, path) // the name watched, "" while not
		if err != nil {
			return fmt.Errorf("watch store changes: %w", err)
		}
		// It reads only the newest change rows: a small page cache.
		db, err := sql.Open("sqlite", path+"?"+busyPragma(busy)+connPragmas(listenerCacheKiB)+"&_pragma=query_only(1)")
		if err != nil {
			return fmt.Errorf("watch store changes: %w", err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		var last int64
		if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM task_changes`).Scan(&last); err != nil {
			return fmt.Errorf("watch store changes: %w", err)
		}
		read, err := db.PrepareContext(ctx, `SELECT seq, task_id FROM task_changes WHERE seq > ? ORDER BY seq LIMIT ?`)
		if err != nil {
			return fmt.Errorf("watch store changes: %w", err)
		}
		defer read.Close()
		changed("") // listening: changes made before were not heard
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-w.Errors:
				return fmt.Errorf("watch store changes: %w", err)
			case <-began:
				if watched == "" {
					if watched, err = watchSignal(w, path); err != nil {
						return fmt.Errorf("watch store changes: %w", err)
					}
				}
			case ev, ok := <-w.Events:
				if !ok {
					return errors.New("watch store changes: watcher closed")
				}
				if filepath.Base(ev.Name) != sig || !ev.Has(fsnotify.Write|fsnotify.Create) {
					continue
				}
			}
			// One read covers every event queued so far.
			for drained := false; !drained; {
				select {
				case <-w.Events:
				default:
					drained = true
				}
			}
			if !watching() {
				if watched != "" {
					// Deaf until a reader starts watching (began); a
					// watch the kernel already dropped needs no removal.
					_ = w.Remove(watched)
					watched = ""
				}
				continue
			}
			if last, err = readChanges(ctx, read, last, changed); err != nil {
				return fmt.Errorf("watch store changes: %w", err)
			}
		}
	}
}

// watchSignal watches the signal file of the database at path, or, when it
// cannot (the file is missing), the database's directory for its creation.
// The file itself, not the directory: a directory watch also reports every
// write to the WAL beside it, about fifteen per commit, and each one woke
// the listener of every process on the store to discard it.
// It returns the name it watches.
func watchSignal(w *fsnotify.Watcher, path string) (string, error) {
	if w.Add(path+signalSuffix) == nil {
		return path + signalSuffix, nil
	}
	dir := filepath.Dir(path)
	return dir, w.Add(dir)
}

// readChanges passes on the ids of the change rows after last and returns
// the newest seq; a gap (rows trimmed before this process read them) wakes
// every waiter.
func readChanges(ctx context.Context, read *sql.Stmt, last int64, changed func(id string)) (int64, error) {
	const page = 1000
	for {
		rows, err := read.QueryContext(ctx, last, page)
		if err != nil {
			return last, err
		}
		n := 0
		for rows.Next() {
			var seq int64
			var id string
			if err := rows.Scan(&seq, &id); err != nil {
				rows.Close()
				return last, err
			}
			if n == 0 && seq > last+1 && last > 0 {
				changed("")
			}
			changed(id)
			last, n = seq, n+1
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return last, err
		}
		if n < page {
			return last, nil
		}
	}
}

// hearing returns the store's Dialect.Heard and Dialect.Hear and a func
// that closes their files, or nil funcs (every change announced) when the
// signal file cannot be opened.
//
// Who listens is kept in the kernel: a process while a reader of its own
// waits for announcements holds a shared flock on the signal file (hear,
// taken before that reader re-reads the store), and a writer asks whether
// anyone does by trying for an exclusive one without waiting and letting
// it go at once (heard). A process that dies drops its lock with its
// files, so a killed listener never keeps writers announcing. With ten mcp
// processes that each wait only on the tasks they follow themselves,
// nobody listens, and a task's writes skip their change rows and the
// signal: a row, its pages in the WAL and a file write per commit.
// A build that does not take the shared lock (an older one) is not
// heard: its readers waiting on another process's task then learn of a
// change at their fallback re-read.
func hearing(path string) (heard func() bool, hear func(listening bool), closeFiles func() error) {
	ask, err := os.OpenFile(path+signalSuffix, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, func() error { return nil }
	}
	held, err := os.Open(path + signalSuffix)
	if err != nil {
		_ = ask.Close()
		return nil, nil, func() error { return nil }
	}
	askFd, heldFd := int(ask.Fd()), int(held.Fd())
	heard = func() bool {
		// Two goroutines asking at once share this open file's lock and
		// both get it: both rightly hear nobody. Another process asking
		// at the same moment makes this answer yes, which only writes a
		// row nobody reads.
		if flock(askFd, syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			return true
		}
		_ = flock(askFd, syscall.LOCK_UN)
		return false
	}
	hear = func(listening bool) {
		if listening {
			_ = flock(heldFd, syscall.LOCK_SH) // waits only for an asker's instant
		} else {
			_ = flock(heldFd, syscall.LOCK_UN)
		}
	}
	return heard, hear, func() error { return errors.Join(ask.Close(), held.Close()) }
}

// signalSuffix names the signal file beside the database.
const signalSuffix = "-changed"

// signal returns the store's post-commit signal (sqlstore.Dialect.Committed)
// and a func that closes its file. The write's content does not matter; its
// inotify event does. A signal that cannot be written leaves waiters to
// their fallback re-read.
func signal(path string) (func(), func() error) {
	f, err := os.OpenFile(path+signalSuffix, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return func() {}, func() error { return nil }
	}
	b := []byte{'.'}
	return func() { _, _ = f.WriteAt(b, 0) }, f.Close
}
