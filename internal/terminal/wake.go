package terminal

import (
	"context"
	"errors"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/fswatch"
)

// wake is why a follower looks: a session-file event, the host's
// re-check tick (which read the versions of the follower's records), or
// neither (its first look, pane output, a timeout falling due).
type wake struct{ file, recheck bool }

// outputGap is the shortest time between two looks woken by pane output.
const outputGap = 250 * time.Millisecond

// wakeSources starts a follower's event sources until ctx ends: the
// session files at paths, through HostOptions.Watch (the host's one
// inotify watcher), and the pane's output when the Terminals report it. A
// source that cannot start is logged and left nil: the re-check covers
// it. filesWatched reports whether file events will come.
func (h *Host) wakeSources(ctx context.Context, pane agents.Pane, paths []string, logKey, logID string) (files, output <-chan struct{}, filesWatched bool) {
	s := h.s
	files, err := h.o.Watch(ctx, paths)
	filesWatched = err == nil && len(paths) > 0
	switch {
	case errors.Is(err, fswatch.ErrLimit):
		// The watcher warned once, with the sysctl to raise; doctor
		// reports the exhausted limit too.
		s.log.Debug("watch session files; falling back to the re-check", logKey, logID, "err", err)
	case err != nil:
		s.log.Warn("watch session files; falling back to the re-check", logKey, logID, "err", err)
	}
	if ow, ok := s.o.Terminals.(OutputWatcher); ok {
		if output, err = ow.WatchOutput(ctx, pane); err != nil {
			s.log.Warn("watch pane output", logKey, logID, "err", err)
		}
	}
	return files, output, filesWatched
}
