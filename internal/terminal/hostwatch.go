package terminal

import (
	"context"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
)

// The host's side of watches: it resumes the active ones and runs each
// watch's follower (package watch) under its leases and re-check tick.

// rescanWatches starts a follower for every active watch no live host
// follows (a restarted host resumes them here).
func (h *Host) rescanWatches(ctx context.Context) {
	ids, err := h.s.o.Store.ActiveWatchIDs(ctx, store.MaxPage)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("scan active watches", "err", err)
		}
		return
	}
	h.watchUnfollowed(ctx, store.LeaseWatch, ids)
}

// followWatch runs the follower of the watch id until it stops.
func (h *Host) followWatch(ctx context.Context, id string) error {
	return h.s.watches.Follow(ctx, id, watchHost{h})
}

// watchHost is the Host as a watch's follower sees it (watch.Host).
type watchHost struct{ h *Host }

func (w watchHost) Claim(ctx context.Context, kind, id string) (store.WorkLease, context.Context, func(), error) {
	return w.h.claim(ctx, kind, id)
}

func (w watchHost) Follow(ctx context.Context, pane agents.Pane, paths []string, id string,
	look func(ctx context.Context, recheck bool) (bool, time.Time, error)) error {
	return w.h.follow(ctx, pane, paths, "watch_id", id, func(ctx context.Context, wk wake) (bool, time.Time, error) {
		return look(ctx, wk.recheck)
	})
}

func (w watchHost) Track(id string, records ...watch.Record) {
	keys := make([]recordKey, len(records))
	for i, r := range records {
		keys[i] = recordKey{r.Kind, r.ID}
	}
	w.h.clock.track(id, keys...)
}

func (w watchHost) Unchanged(r watch.Record, version int64) bool {
	return w.h.clock.unchanged(recordKey{r.Kind, r.ID}, version)
}
