package terminal

import (
	"context"
	"errors"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
)

// follow calls check whenever the agent's session files (paths) or the
// pane's output change, at every re-check tick and when check's next
// timeout falls due. It returns when check says stop, the lease is lost
// (check's write fails with store.ErrLeaseLost, or the host's renewal
// ends ctx), or ctx ends; logKey and logID name what is followed in
// warnings.
func (h *Host) follow(ctx context.Context, pane agents.Pane, paths []string, logKey, logID string,
	check func(ctx context.Context, w wake) (stop bool, next time.Time, err error)) error {
	s := h.s
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	files, output, filesWatched := h.wakeSources(wctx, pane, paths, logKey, logID)
	recheck, unsubscribe := h.clock.subscribe(logID)
	defer unsubscribe()
	h.clock.cover(logID, filesWatched && output != nil)
	deadline := time.NewTimer(time.Hour)
	defer deadline.Stop()
	var w wake
	for {
		stop, next, err := check(ctx, w)
		fileEvent := w.file
		lastCheck := time.Now()
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, store.ErrLeaseLost) {
				return nil
			}
			s.log.Warn("terminal follower check", logKey, logID, "err", err)
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
		w = wake{}
		deadline.Reset(max(time.Until(next), 10*time.Millisecond))
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-files:
				w.file = true
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
				w.recheck = true
				break wait
			case <-deadline.C:
				break wait
			}
		}
	}
}
