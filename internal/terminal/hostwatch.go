package terminal

import (
	"context"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
)

// watchHost is the monitor host as a watch's follower sees it
// (watch.Host): the host's leases, wake-up loop and re-check tick.
type watchHost struct {
	s *Service
	h *hostpkg.Host
}

func (w watchHost) Claim(ctx context.Context, kind, id string) (store.WorkLease, context.Context, func(), error) {
	return w.h.Claim(ctx, kind, id)
}

func (w watchHost) Follow(ctx context.Context, pane agents.Pane, paths []string, id string,
	look func(ctx context.Context, recheck bool) (bool, time.Time, error)) error {
	return w.s.follow(ctx, w.h, pane, paths, "watch_id", id, func(ctx context.Context, wk hostpkg.Wake) (bool, time.Time, error) {
		return look(ctx, wk.Recheck)
	})
}

func (w watchHost) Track(id string, records ...watch.Record) {
	keys := make([]hostpkg.Record, len(records))
	for i, r := range records {
		keys[i] = hostpkg.Record(r)
	}
	w.h.Track(id, keys...)
}

func (w watchHost) Unchanged(r watch.Record, version int64) bool {
	return w.h.Unchanged(hostpkg.Wake{Recheck: true}, hostpkg.Record(r), version)
}
