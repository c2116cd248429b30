package store

import (
	"context"
	"encoding/json"
	"github.com/clawconnect/clawconnect/termapi"
)

// Terminal hosts on several machines: each machine's terminal host
// publishes the panes it can see (its heartbeat), and an operation on a
// pane of another machine (a send, an approve, a cancel…) is queued for
// that pane's own host, which alone runs it and writes its outcome.

// TerminalHost is one machine's terminal host as it last published itself.
type TerminalHost struct {
	// Host is the host name terminal ids of version 3 carry.
	Host string `json:"host"`
	// Owner is the process registry id of the process that published.
	Owner string `json:"owner"`
	// PublishedAt is the publication time (Unix ms): the host's heartbeat.
	PublishedAt int64 `json:"published_at"`
	// Panes are the host's pane rows as JSON (the terminal package's list).
	Panes json.RawMessage `json:"panes"`
}

// Host operation statuses.
const (
	HostOpPending = "pending"
	HostOpDone    = "done"
)

// HostOp is an operation on a pane queued for the pane's own host.
type HostOp struct {
	OpID string `json:"op_id"`
	// Host is the host that must run it (the one its terminal id names).
	Host string `json:"host"`
	// Op names the operation ("send", "approve", …) and Args its input.
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
	// RequestedBy is the process registry id of the requester.
	RequestedBy string `json:"requested_by"`
	Status      string `json:"status"`
	// Result is the operation's output; ErrorKind ("bad_input",
	// "not_found", "refused", …) and Error its failure.
	Result    json.RawMessage `json:"result,omitempty"`
	ErrorKind string          `json:"error_kind,omitempty"`
	Error     string          `json:"error,omitempty"`
	CreatedAt int64           `json:"created_at"`
	DoneAt    int64           `json:"done_at,omitempty"`
}

// TerminalHosts is the store's directory of terminal hosts and the queue
// of operations each must run. Implementations are safe for concurrent
// use.
type TerminalHosts interface {
	// PublishTerminalHost inserts or replaces h's row (keyed by Host).
	PublishTerminalHost(ctx context.Context, h TerminalHost) error
	// TerminalHostList returns every published host, by host name.
	TerminalHostList(ctx context.Context) ([]TerminalHost, error)
	// PutHostOp queues op (Status pending); an existing id is ErrConflict.
	PutHostOp(ctx context.Context, op *HostOp) error
	// PendingHostOps returns up to limit pending operations of host whose
	// claim is free at now, oldest first.
	PendingHostOps(ctx context.Context, host string, now int64, limit int) ([]*HostOp, error)
	// ClaimHostOp takes the pending operation for owner until `until`,
	// unless another owner's claim lasts past now (ErrLeaseLost) or it is
	// done (ErrConflict).
	ClaimHostOp(ctx context.Context, id, owner string, now, until int64) error
	// FinishHostOp records the outcome of a pending operation owner
	// claimed; one done already, or claimed by another since, is
	// ErrConflict.
	FinishHostOp(ctx context.Context, op *HostOp, owner string) error
	// GetHostOp returns the operation or ErrNotFound.
	GetHostOp(ctx context.Context, id string) (*HostOp, error)
	// TurnIDsWithStatus returns the ids of up to limit Turns in status, by
	// id (a returning host looks for its Turns stalled while it was away).
	TurnIDsWithStatus(ctx context.Context, status termapi.TurnStatus, limit int) ([]string, error)
}
