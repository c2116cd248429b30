package store

import "context"

// Process is one clawconnect process registered in the store while it
// follows work (running tasks, and later Turn monitors and deliveries):
// its lease owner id, where it runs, and its last heartbeat. The identity
// fields let another process on the same host prove it dead (pid gone, or
// the pid reused by a process that started at another time) and take its
// leases over at once instead of waiting for them to expire.
type Process struct {
	// ID is the lease owner id the process writes into every lease it
	// holds (Task.Owner).
	ID string
	// Host identifies the host and pid namespace; pids are comparable only
	// between processes with the same Host.
	Host string
	// PID is the operating-system process id.
	PID int64
	// Start identifies this incarnation of PID (boot id and start time), so
	// a reused pid is not mistaken for the registered process.
	Start string
	// Role is the command that runs ("serve", "mcp", "run", ...).
	Role string
	// StartedAt and HeartbeatAt are Unix milliseconds; a process refreshes
	// HeartbeatAt at least once per lease period while it lives.
	StartedAt   int64
	HeartbeatAt int64
	// Tasks are the ids of running tasks whose lease the process holds
	// (at most MaxPage), filled in by Processes.
	Tasks []string
}

// ProcessRegistry is the store's table of live processes: who shares the
// store, and what each follows.
type ProcessRegistry interface {
	// Heartbeat inserts p or refreshes its row (every field but StartedAt
	// of an existing row, which stays). It is idempotent.
	Heartbeat(ctx context.Context, p Process) error
	// Processes returns every registered process, oldest first, each with
	// the running tasks it holds leases on.
	Processes(ctx context.Context) ([]Process, error)
	// RemoveProcess deletes the process's row (a clean exit, or one proven
	// dead); an unknown id is not an error.
	RemoveProcess(ctx context.Context, id string) error
}
