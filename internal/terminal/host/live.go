package host

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
)

// Role is the process-registry role of a long-lived monitor host (serve,
// mcp, terminal daemon, the terminal module), and the prefix of each one's
// role, as in "terminal host (serve)". Live counts only these: a command
// that follows its own Turn until it ends registers under another role,
// since it stops following when it returns.
const Role = "terminal host"

// liveWithin is how recent a host's heartbeat must be for Live: a
// host beats every third of its lease (10 s by default), so one that
// missed three beats is not counted on.
const liveWithin = 30 * time.Second

// Registered is the part of the store's process registry Live reads.
type Registered interface {
	Processes(ctx context.Context) ([]store.Process, error)
}

// Live returns a long-lived monitor host (Role) in reg whose last
// heartbeat is recent and that is not provably dead, so a command can
// leave its Turn to it; ok is false when there is none. Every host on the
// store follows announced work (store.TerminalWorkFeed), so which one it
// returns does not matter.
func Live(ctx context.Context, reg Registered) (p store.Process, ok bool, err error) {
	ps, err := reg.Processes(ctx)
	if err != nil {
		return store.Process{}, false, fmt.Errorf("read the process registry: %w", err)
	}
	self := owner.Self()
	fresh := time.Now().Add(-liveWithin).UnixMilli()
	for _, p := range ps {
		if strings.HasPrefix(p.Role, Role) && p.HeartbeatAt >= fresh && !self.Dead(p) {
			return p, true, nil
		}
	}
	return store.Process{}, false, nil
}
