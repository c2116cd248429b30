package terminal

import (
	"context"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
)

// The Service as its monitor host drives it (host.Service): the host
// decides when and under which lease a Turn or watch is followed; the
// Service looks at it.

// Attach makes h the host this Service hands new work to (startMonitor)
// and tells of every change (notify).
func (s *Service) Attach(h *hostpkg.Host) {
	s.mu.Lock()
	s.host = h
	s.mu.Unlock()
}

// Follow follows the Turn, or the terminal watch of a "watch-" id, for h
// until it needs no follower, h loses its lease, or ctx ends.
func (s *Service) Follow(ctx context.Context, h *hostpkg.Host, id string) error {
	if watch.IsID(id) {
		// A watch of another host's pane is that host's to follow: this
		// machine would capture its own tmux and read its own disk at
		// the pane's names, and hold the lease the owner needs.
		w, err := s.o.Store.GetWatch(ctx, id)
		if err != nil {
			return err
		}
		if _, ok := s.foreign(w.TerminalID); ok {
			return nil
		}
		return s.watches.Follow(ctx, id, watchHost{s, h})
	}
	return (&monitor{h: h, s: s, turnID: id}).run(ctx)
}

// Recover finishes what stopped processes left half-done: the thread
// transitions they held, and, on a host that serves its machine, the
// Turns another host stalled host_lost while this one was away.
func (s *Service) Recover(ctx context.Context, h *hostpkg.Host) {
	if _, err := s.RecoverTransitions(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("recover transitions", "err", err)
	}
	if h.Serves() {
		s.resumeHostLost(ctx)
	}
}

// follow runs h's wake-up loop for a follower of pane: its session files
// (paths) and, when the Terminals report it, the pane's output wake check.
func (s *Service) follow(ctx context.Context, h *hostpkg.Host, pane agents.Pane, paths []string, logKey, logID string,
	check func(ctx context.Context, w hostpkg.Wake) (stop bool, next time.Time, err error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the output watch ends with the loop
	var output <-chan struct{}
	if ow, ok := s.o.Terminals.(OutputWatcher); ok {
		var err error
		if output, err = ow.WatchOutput(ctx, pane); err != nil {
			s.log.Warn("watch pane output", logKey, logID, "err", err)
		}
	}
	return h.Loop(ctx, hostpkg.Sources{Paths: paths, Output: output, LogKey: logKey, LogID: logID}, check)
}

// reuse returns held when the follower woke for a re-check tick that read
// held's record at held's version (version(held)); otherwise it reads the
// record afresh.
func reuse[T any](h *hostpkg.Host, w hostpkg.Wake, key hostpkg.Record, held *T, version func(*T) int64, read func() (*T, error)) (*T, error) {
	if held != nil && h.Unchanged(w, key, version(held)) {
		return held, nil
	}
	return read()
}

func turnVersion(t *store.Turn) int64           { return t.Version }
func sessionVersion(s *store.TermSession) int64 { return s.Revision }
