package host

import (
	"context"
	"errors"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/fswatch"
)

// Wake is why a follower looks: a session-file event (File), the host's
// re-check tick (Recheck, which read the versions of the follower's
// records), or neither (its first look, pane output, a timeout falling
// due).
type Wake struct{ File, Recheck bool }

// outputGap is the shortest time between two looks woken by pane output.
const outputGap = 250 * time.Millisecond

// watchFiles starts a follower's file events until ctx ends: the session
// files at paths, through Options.Watch (the host's one inotify watcher).
// A watch that cannot start is logged and left nil: the re-check covers
// it. filesWatched reports whether file events will come.
func (h *Host) watchFiles(ctx context.Context, paths []string, logKey, logID string) (files <-chan struct{}, filesWatched bool) {
	files, err := h.o.Watch(ctx, paths)
	filesWatched = err == nil && len(paths) > 0
	switch {
	case errors.Is(err, fswatch.ErrLimit):
		// The watcher warned once, with the sysctl to raise; doctor
		// reports the exhausted limit too.
		h.log.Debug("watch session files; falling back to the re-check", logKey, logID, "err", err)
	case err != nil:
		h.log.Warn("watch session files; falling back to the re-check", logKey, logID, "err", err)
	}
	return files, filesWatched
}
