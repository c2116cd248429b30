// Package fakehost plays the terminal host of another machine on a shared
// store: it publishes itself as live and answers the host operations
// queued for it, so a front end's send to a pane of that host can be
// tested without the host's panes, tmux or agents.
package fakehost

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// Store is what a fake host uses of the shared store: the directory of
// hosts and their operation queue, and the announcement of terminal work
// that wakes the front end waiting for an operation's answer.
type Store interface {
	store.TerminalHosts
	store.TerminalWorkFeed
}

// Host is a fake terminal host; Ops lists what it was asked.
type Host struct {
	name   string
	st     Store
	answer func(op *store.HostOp) any
	mu     sync.Mutex
	ops    []store.HostOp
}

// Start publishes host name on st (live for an hour) and answers each
// operation queued for it with answer's result until the test ends.
func Start(t testing.TB, st Store, name string, answer func(op *store.HostOp) any) *Host {
	t.Helper()
	h := &Host{name: name, st: st, answer: answer}
	err := st.PublishTerminalHost(t.Context(), store.TerminalHost{Host: name, Owner: name + "/1/fake", PublishedAt: time.Now().UnixMilli(),
		Panes: json.RawMessage(`{"lease_ms":3600000,"terminals":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

// Ops returns the operations the host ran, in order.
func (h *Host) Ops() []store.HostOp {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]store.HostOp(nil), h.ops...)
}

func (h *Host) run(ctx context.Context) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now().UnixMilli()
		ops, err := h.st.PendingHostOps(ctx, h.name, now, 16)
		if err != nil {
			continue
		}
		for _, op := range ops {
			if h.st.ClaimHostOp(ctx, op.OpID, "fake-"+h.name, now, now+60_000) != nil {
				continue
			}
			op.Result, _ = json.Marshal(h.answer(op))
			op.DoneAt = time.Now().UnixMilli()
			h.mu.Lock()
			h.ops = append(h.ops, *op)
			h.mu.Unlock()
			if h.st.FinishHostOp(ctx, op, "fake-"+h.name) != nil {
				continue
			}
			h.st.AnnounceTerminalWork(ctx)
		}
	}
}

// Accept answers a send as its host does when the agent took the request:
// the Turn turnID of Session sessionID.
func Accept(turnID, sessionID string) func(op *store.HostOp) any {
	return func(*store.HostOp) any {
		return termapi.SendResult{TurnID: turnID, SessionID: sessionID, SubmissionOutcome: termapi.OutcomeAccepted}
	}
}

// Sent returns the send request an operation carried ("" fields for
// another operation).
func Sent(op store.HostOp) termapi.SendRequest {
	var a struct {
		Send termapi.SendRequest `json:"send"`
	}
	_ = json.Unmarshal(op.Args, &a)
	return a.Send
}
