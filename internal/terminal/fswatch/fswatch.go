// Package fswatch shares one inotify instance among every follower of
// files in a process: the Turn monitors and terminal watches of a host each
// subscribe to a few session files or directories, and the Watcher watches
// each directory once, counts its subscribers, and wakes only those whose
// files changed. The kernel allows a user few inotify instances (128 by
// default) and many more watches, so an instance per follower ran out at a
// few dozen followers; one per process does not.
package fswatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/fsnotify/fsnotify"
)

// ErrLimit means the kernel refused an inotify instance or watch because
// the user's limit is reached; the error says which sysctl raises it.
// Callers fall back to their slow re-check, which the Watcher has logged.
var ErrLimit = errors.New("fswatch: inotify limit reached")

// Options configures a Watcher. The zero value is usable.
type Options struct {
	// Logger receives the one warning per exhausted limit; nil discards.
	Logger *slog.Logger
}

// Watcher wakes subscribers when files they follow change, over one
// inotify instance that exists while at least one subscription does. It is
// safe for concurrent use.
type Watcher struct {
	log *slog.Logger

	mu     sync.Mutex
	fw     *fsnotify.Watcher // nil while nobody subscribes
	dirs   map[string]int    // watched directory → subscriptions using it
	gone   map[string]bool   // watched directories removed since (the kernel dropped their watch)
	byDir  map[string]map[*sub]struct{}
	warned map[string]bool // limits already logged
	done   chan struct{}   // closed when the current reader ends

	released func() // tests: called after a subscription ended
}

// sub is one Watch call: the files it names (woken by events on exactly
// them) and the directories it names (woken by any event inside).
type sub struct {
	files map[string]bool
	dirs  map[string]bool // asked directories
	watch []string        // directories this sub holds a reference on
	out   chan struct{}
}

// New returns a Watcher; it opens no inotify instance until the first
// Watch.
func New(o Options) *Watcher {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Watcher{log: o.Logger, dirs: map[string]int{}, gone: map[string]bool{}, byDir: map[string]map[*sub]struct{}{}, warned: map[string]bool{}}
}

// Watch wakes on changes of paths until ctx ends. A file is watched
// through its directory (it may not exist yet, and agents replace files),
// and only events on the named files wake; a directory path wakes on any
// change inside it. The channel has capacity one, coalesces wake-ups, and
// is never closed. An exhausted kernel limit is an error wrapping ErrLimit.
func (w *Watcher) Watch(ctx context.Context, paths []string) (<-chan struct{}, error) {
	s := &sub{files: map[string]bool{}, dirs: map[string]bool{}, out: make(chan struct{}, 1)}
	need := map[string]bool{}
	for _, p := range paths {
		p = filepath.Clean(p)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			s.dirs[p], need[p] = true, true
			continue
		}
		s.files[p], need[filepath.Dir(p)] = true, true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("watch files: %w", err)
	}
	if w.fw == nil {
		fw, err := fsnotify.NewWatcher()
		if err != nil {
			return nil, w.limit(fmt.Errorf("watch files: %w", err))
		}
		w.fw, w.done = fw, make(chan struct{})
		go w.read(fw, w.done)
	}
	for d := range need {
		if w.dirs[d] == 0 || w.gone[d] {
			if err := w.fw.Add(d); err != nil {
				w.release(s)
				return nil, w.limit(fmt.Errorf("watch %s: %w", d, err))
			}
			delete(w.gone, d)
		}
		w.dirs[d]++
		s.watch = append(s.watch, d)
		if w.byDir[d] == nil {
			w.byDir[d] = map[*sub]struct{}{}
		}
		w.byDir[d][s] = struct{}{}
	}
	released := w.released
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		w.release(s)
		w.mu.Unlock()
		if released != nil {
			released()
		}
	})
	return s.out, nil
}

// release drops s's directory references, unwatching directories nobody
// needs and closing the instance once nobody subscribes. w.mu is held.
func (w *Watcher) release(s *sub) {
	for _, d := range s.watch {
		if _, ok := w.byDir[d][s]; !ok {
			continue // Close dropped it already
		}
		delete(w.byDir[d], s)
		if w.dirs[d]--; w.dirs[d] > 0 {
			continue
		}
		delete(w.dirs, d)
		delete(w.byDir, d)
		delete(w.gone, d)
		if w.fw != nil {
			_ = w.fw.Remove(d) // a removed directory is unwatched already
		}
	}
	s.watch = nil
	if len(w.dirs) == 0 && w.fw != nil {
		_ = w.fw.Close() // the reader ends when its channels close
		w.fw = nil
	}
}

// read fans the instance's events out until it is closed.
func (w *Watcher) read(fw *fsnotify.Watcher, done chan struct{}) {
	defer close(done)
	for {
		select {
		case ev, ok := <-fw.Events:
			if !ok {
				return
			}
			dir := filepath.Dir(ev.Name)
			w.mu.Lock()
			if w.dirs[ev.Name] > 0 && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				// A watched directory went: its watch went with it. The
				// next Watch that needs it watches it again, and its
				// subscribers look now (their files went too).
				w.gone[ev.Name] = true
				for s := range w.byDir[ev.Name] {
					wake(s.out)
				}
			}
			for s := range w.byDir[dir] {
				if s.files[ev.Name] || s.dirs[dir] {
					wake(s.out)
				}
			}
			w.mu.Unlock()
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				// Events were dropped: anyone's file may have changed.
				w.mu.Lock()
				for _, set := range w.byDir {
					for s := range set {
						wake(s.out)
					}
				}
				w.mu.Unlock()
			}
		}
	}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// limit wraps err with ErrLimit when the kernel refused for lack of
// instances or watches, and logs that once per limit with the sysctl that
// raises it. w.mu is held.
func (w *Watcher) limit(err error) error {
	var name string
	switch {
	case errors.Is(err, syscall.EMFILE):
		name = InstancesSysctl
	case errors.Is(err, syscall.ENOSPC):
		name = WatchesSysctl
	default:
		return err
	}
	if !w.warned[name] {
		w.warned[name] = true
		w.log.Warn("inotify limit reached: followers fall back to their slow re-check until it is raised",
			"limit", name, "fix", "sysctl -w "+name+"=<higher>", "err", err)
	}
	return fmt.Errorf("%w (%s): %w", ErrLimit, name, err)
}

// The sysctls that bound a user's inotify instances and watches.
const (
	InstancesSysctl = "fs.inotify.max_user_instances"
	WatchesSysctl   = "fs.inotify.max_user_watches"
)

// Stats says what a Watcher holds now.
type Stats struct {
	// Instances is 1 while anyone subscribes, else 0.
	Instances int
	// Dirs is how many directories are watched.
	Dirs int
}

// Stats returns what w holds now.
func (w *Watcher) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := Stats{Dirs: len(w.dirs)}
	if w.fw != nil {
		st.Instances = 1
	}
	return st
}

// Close ends every subscription and closes the instance, and waits for its
// reader to end. Watch may be called again after.
func (w *Watcher) Close() error {
	w.mu.Lock()
	fw, done := w.fw, w.done
	w.fw = nil
	w.dirs, w.gone, w.byDir = map[string]int{}, map[string]bool{}, map[string]map[*sub]struct{}{}
	w.mu.Unlock()
	if fw == nil {
		return nil
	}
	err := fw.Close()
	<-done
	return err
}
