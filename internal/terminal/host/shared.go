package host

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// Terminal hosts on several machines. A host whose service names this
// machine (Shared) publishes the machine's panes with its heartbeat, so
// the other hosts can list them and tell whether it is live, and runs the
// operations they queue in the store for its panes (store.HostOp): only a
// pane's own host types into it.

// Shared is the Turn service's part in a named host's work for the other
// hosts on the store.
type Shared interface {
	// HostName is this machine's host name; "" on a single machine, whose
	// host shares nothing.
	HostName() string
	// List returns the machine's panes, as the host publishes them.
	List(ctx context.Context) (termapi.ListResult, error)
	// RunOp runs an operation another host queued for this one; its
	// result and error go back to that host (OpError).
	RunOp(ctx context.Context, op *store.HostOp) (any, error)
}

// opTTL bounds one operation on its host (a send types, waits for the
// draft and for acceptance, well under it); a host that dies running one
// leaves it to another process of the same host after it.
const opTTL = 2 * time.Minute

// publication is what a host publishes about itself (the Panes of its
// store.TerminalHost row).
type publication struct {
	// LeaseMS is the host's lease: it publishes at least three times per
	// lease, so a publication older than the lease means it is away.
	LeaseMS   int64                 `json:"lease_ms"`
	Terminals []termapi.TerminalRow `json:"terminals"`
}

// View is one terminal host as the store last heard from it.
type View struct {
	Host string `json:"host"`
	// Live says the host published within its lease.
	Live bool `json:"live"`
	// LastHeartbeat is its last publication (RFC 3339).
	LastHeartbeat string `json:"last_heartbeat"`
	// Self marks the host this process runs on.
	Self      bool                  `json:"self,omitempty"`
	Terminals []termapi.TerminalRow `json:"terminals"`
}

// Views reads the store's host rows as of now; self names this machine's
// host ("" for none).
func Views(list []store.TerminalHost, self string, now time.Time) []View {
	out := make([]View, 0, len(list))
	for _, h := range list {
		var pub publication
		_ = json.Unmarshal(h.Panes, &pub) // an unreadable row lists no panes
		out = append(out, View{Host: h.Host, Live: fresh(h, pub, now.UnixMilli()), Self: self != "" && h.Host == self,
			LastHeartbeat: time.UnixMilli(h.PublishedAt).UTC().Format(time.RFC3339), Terminals: pub.Terminals})
	}
	return out
}

func fresh(h store.TerminalHost, pub publication, now int64) bool {
	lease := pub.LeaseMS
	if lease <= 0 {
		lease = liveWithin.Milliseconds()
	}
	return h.PublishedAt+lease >= now
}

// Published reports whether host published within its lease, and when it
// last did (0: never).
func Published(ctx context.Context, st store.TerminalHosts, host string) (live bool, last int64, err error) {
	list, err := st.TerminalHostList(ctx)
	if err != nil {
		return false, 0, err
	}
	for _, h := range list {
		if h.Host == host {
			var pub publication
			_ = json.Unmarshal(h.Panes, &pub)
			return fresh(h, pub, time.Now().UnixMilli()), h.PublishedAt, nil
		}
	}
	return false, 0, nil
}

// Serves reports whether h runs its machine's shared work: publishing its
// panes and running operations for other hosts (a long-lived host of a
// named machine; not a command following its own Turn).
func (h *Host) Serves() bool {
	return h.shared != nil && strings.HasPrefix(h.o.Role, Role)
}

// publish writes the host's panes and heartbeat to the store.
func (h *Host) publish(ctx context.Context) {
	if !h.Serves() {
		return
	}
	res, err := h.shared.List(ctx)
	if err != nil && ctx.Err() == nil {
		h.log.Warn("list panes to publish", "err", err)
	}
	b, _ := json.Marshal(publication{LeaseMS: h.o.LeaseTTL.Milliseconds(), Terminals: res.Terminals})
	err = h.o.Store.PublishTerminalHost(ctx, store.TerminalHost{Host: h.shared.HostName(), Owner: h.o.Owner, PublishedAt: time.Now().UnixMilli(), Panes: b})
	if err != nil && ctx.Err() == nil {
		h.log.Warn("publish terminal host", "err", err)
	}
}

// runHostOps claims and starts each pending operation addressed to this
// host that it does not run yet.
func (h *Host) runHostOps(ctx context.Context) {
	if !h.Serves() {
		return
	}
	now := time.Now()
	ops, err := h.o.Store.PendingHostOps(ctx, h.shared.HostName(), now.UnixMilli(), 16)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("read host operations", "err", err)
		}
		return
	}
	for _, op := range ops {
		if err := h.o.Store.ClaimHostOp(ctx, op.OpID, h.o.Owner, now.UnixMilli(), now.Add(opTTL).UnixMilli()); err != nil {
			continue // another process of this host runs it, or it is done
		}
		h.mu.Lock()
		if h.ctx == nil {
			h.mu.Unlock()
			return
		}
		h.wg.Add(1)
		h.mu.Unlock()
		go func() {
			defer h.wg.Done()
			h.runHostOp(ctx, op)
		}()
	}
}

func (h *Host) runHostOp(ctx context.Context, op *store.HostOp) {
	octx, cancel := context.WithTimeout(ctx, opTTL-10*time.Second)
	defer cancel()
	out, err := h.shared.RunOp(octx, op)
	op.Result, _ = json.Marshal(out)
	if err != nil {
		op.ErrorKind, op.Error = errorKind(err), err.Error()
	}
	op.DoneAt = time.Now().UnixMilli()
	if err := h.o.Store.FinishHostOp(context.WithoutCancel(ctx), op, h.o.Owner); err != nil {
		h.log.Warn("finish host operation", "op_id", op.OpID, "err", err)
	}
	h.log.Info("ran host operation", "op_id", op.OpID, "op", op.Op, "requested_by", op.RequestedBy, "error_kind", op.ErrorKind)
	h.o.Store.AnnounceTerminalWork(context.WithoutCancel(ctx))
}

// wakeOutbox makes the host's outbox look for due callbacks now, when
// another host announced work (a callback it queued among it).
func (h *Host) wakeOutbox() {
	if x := h.o.Outbox; x != nil && h.shared != nil {
		x.Kick()
	}
}

// opError is an error a host operation reported: its text as the host
// wrote it, and the sentinel it wrapped.
type opError struct {
	kind error
	msg  string
}

func (e *opError) Error() string { return e.msg }
func (e *opError) Unwrap() error { return e.kind }

// errorKinds are the sentinels a host operation's error keeps across hosts
// (store.HostOp.ErrorKind).
var errorKinds = map[string]error{"bad_input": termapi.ErrBadInput, "not_found": termapi.ErrNotFound, "refused": termapi.ErrRefused,
	"input_not_sent": termapi.ErrInputNotSent, "outcome_uncertain": termapi.ErrOutcomeUncertain}

func errorKind(err error) string {
	for k, e := range errorKinds {
		if errors.Is(err, e) {
			return k
		}
	}
	return "failed"
}

// OpError is the error a finished host operation reported, as its host
// recorded it (store.HostOp's ErrorKind and Error): errors.Is finds the
// termapi sentinel it wrapped there.
func OpError(kind, msg string) error {
	return &opError{kind: errorKinds[kind], msg: msg}
}
