package task

import (
	"context"
	"fmt"
)

// logHandoff is the log entry type a process writes into each task it
// still follows when it exits, just before it releases the lease, so the
// process that takes the task over can tell an exit from a crash.
const logHandoff = "handoff"

// predecessor is the task's previous follower as the process registry
// showed it just before this process claimed the task.
type predecessor struct {
	// known is false when no registered process held the task: its
	// follower had left the registry (an exit, or another process proved
	// it dead and removed it).
	known bool
	// self is this very owner id (a restart that kept its owner id).
	self bool
	role string
	pid  int64
	// dead: the process is provably gone (its pid gone or reused).
	dead bool
	// silent: the process has not beaten for ten leases.
	silent bool
}

// describeSelf names this process for the task log.
func (m *Manager) describeSelf() string {
	return fmt.Sprintf("clawconnect %s (pid %d)", m.o.Role, m.self.PID)
}

// takeoverText is the log entry of a takeover: which process follows the
// task now, and why the previous follower stopped. An exit is read from
// the handoff entry the exiting process wrote last; a crash or a lapsed
// lease from the registry as prev shows it.
func (m *Manager) takeoverText(ctx context.Context, l *live, prev predecessor) string {
	const again = "; observing the OpenClaw run again."
	if prev.self {
		return "Resumed after a restart" + again
	}
	if tail, err := m.st.TailLogs(ctx, l.id, 1); err == nil && len(tail) == 1 && tail[0].Type == logHandoff {
		return fmt.Sprintf("Taken over by %s after the previous follower exited and released it%s", m.describeSelf(), again)
	}
	who := fmt.Sprintf("the previous follower, clawconnect %s (pid %d),", prev.role, prev.pid)
	var why string
	switch {
	case !prev.known:
		return fmt.Sprintf("Taken over by %s: the previous follower had left the process registry without releasing it (killed, or stopped by another process)%s", m.describeSelf(), again)
	case prev.dead:
		why = who + " was killed (its process is gone)"
	case prev.silent:
		why = who + " stopped renewing its lease and its heartbeat"
	default:
		why = who + " lost its lease (it did not renew it in time)"
	}
	return fmt.Sprintf("Taken over by %s: %s%s", m.describeSelf(), why, again)
}
