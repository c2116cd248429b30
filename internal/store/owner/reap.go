package owner

import (
	"context"
	"log/slog"

	"github.com/clawconnect/clawconnect/internal/store"
)

// Registry is the part of the store ReapDead reads and writes: the
// process registry and the release of an owner's leases in every lease
// table.
type Registry interface {
	Processes(ctx context.Context) ([]store.Process, error)
	ReleaseLeases(ctx context.Context, owner string, ids []string) (int, error)
	RemoveProcess(ctx context.Context, id string) error
}

// ReapDead releases every lease of each registered process that id proves
// dead (Dead) or whose last heartbeat is older than stale (Unix ms: a
// process on another host that died holds no live lease any more), then
// removes its row, so its work is claimed at once instead of when its
// leases expire. id itself is never reaped. Failures are logged (nil log
// discards them) and the next process is tried. It returns the registry
// as it read it (so a caller can say who held the work it takes over) and
// how many processes it reaped.
func (id Identity) ReapDead(ctx context.Context, reg Registry, stale int64, log *slog.Logger) ([]store.Process, int) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ps, err := reg.Processes(ctx)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("read the process registry failed", "err", err)
		}
		return nil, 0
	}
	reaped := 0
	for _, p := range ps {
		if p.ID == id.ID || (!id.Dead(p) && p.HeartbeatAt >= stale) {
			continue
		}
		n, err := reg.ReleaseLeases(ctx, p.ID, nil)
		if err != nil {
			log.Warn("release a dead process's leases failed", "owner", p.ID, "err", err)
			continue
		}
		if err := reg.RemoveProcess(ctx, p.ID); err != nil {
			log.Warn("remove a dead process failed", "owner", p.ID, "err", err)
		}
		log.Info("released the leases of a dead process", "owner", p.ID, "pid", p.PID, "leases", n)
		reaped++
	}
	return ps, reaped
}
