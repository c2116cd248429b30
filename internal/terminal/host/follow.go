package host

import (
	"context"
	"errors"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
)

// Sources are what wakes a follower besides its re-check tick and its
// timeouts.
type Sources struct {
	// Paths are the agent's session files (or their directories), watched
	// through Options.Watch.
	Paths []string
	// Output receives a value when the pane draws (nil: no such source);
	// it is closed when its watch ends.
	Output <-chan struct{}
	// LogKey and LogID name what is followed in warnings ("turn_id" and
	// the Turn's id); LogID is also the follower's id at the re-check
	// clock (Track).
	LogKey, LogID string
}

// Loop calls check whenever the agent's session files or the pane's output
// change (src), at every re-check tick and when check's next timeout falls
// due. It returns when check says stop, the lease is lost (check's write
// fails with store.ErrLeaseLost, or the host's renewal ends ctx), or ctx
// ends.
func (h *Host) Loop(ctx context.Context, src Sources,
	check func(ctx context.Context, w Wake) (stop bool, next time.Time, err error)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logKey, logID, output := src.LogKey, src.LogID, src.Output
	files, filesWatched := h.watchFiles(wctx, src.Paths, logKey, logID)
	recheck, unsubscribe := h.clock.subscribe(logID)
	defer unsubscribe()
	h.clock.cover(logID, filesWatched && output != nil)
	deadline := time.NewTimer(time.Hour)
	defer deadline.Stop()
	var w Wake
	for {
		stop, next, err := check(ctx, w)
		fileEvent := w.File
		lastCheck := time.Now()
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, store.ErrLeaseLost) {
				return nil
			}
			h.log.Warn("terminal follower check", logKey, logID, "err", err)
		}
		if stop {
			return nil
		}
		if fileEvent {
			// The screen often follows the file (an approval prompt is
			// drawn after the tool call is written): look again soon.
			if soon := time.Now().Add(300 * time.Millisecond); soon.Before(next) {
				next = soon
			}
		}
		w = Wake{}
		deadline.Reset(max(time.Until(next), 10*time.Millisecond))
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-files:
				w.File = true
				break wait
			case _, ok := <-output:
				if !ok {
					output = nil // the control client ended; the re-check remains
					h.clock.cover(logID, false)
					continue
				}
				// A redrawing pane writes many times a second: one look
				// per outputGap at most.
				if gap := outputGap - time.Since(lastCheck); gap > 0 {
					deadline.Reset(gap)
					continue
				}
				break wait
			case <-recheck:
				w.Recheck = true
				break wait
			case <-deadline.C:
				break wait
			}
		}
	}
}
