package terminal

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox/outboxtest"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestOutboxLeavesCallbacksOfAnotherGateway: on several machines, a host
// whose outbox is not configured with a callback's gateway never claims
// it (no attempt spent, no dial), and of two hosts configured with that
// gateway exactly one delivers it.
func TestOutboxLeavesCallbacksOfAnotherGateway(t *testing.T) {
	t.Parallel()
	const gw = "ws://gateway.example:18789"
	a := newFakeAgent(termapi.AgentCodex, 311)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "do it", OriginSession: "agent:main:s1", GatewayURL: gw})
	if err != nil {
		t.Fatal(err)
	}
	a.finish("the answer", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	cs := r.st
	cbs, err := cs.TurnCallbacks(ctx, res.TurnID, 10)
	if err != nil || len(cbs) != 1 || cbs[0].GatewayURL != gw {
		t.Fatalf("callbacks = %+v, %v", cbs, err)
	}
	id := cbs[0].MessageID

	// A host configured with another gateway only: it must not dial, claim
	// or spend an attempt.
	var strayDials atomic.Int32
	stray := outbox.New(outbox.Options{Store: cs, Owner: "host-without-the-gateway",
		Delivers: func(u string) bool { return u == "ws://elsewhere.example:18789" },
		Dial: func(context.Context, string) (outbox.Caller, error) {
			strayDials.Add(1)
			return nil, errors.New("no route to the gateway")
		}})
	if n, err := stray.DeliverDue(ctx); err != nil || n != 0 {
		t.Fatalf("a host without the gateway attempted %d callbacks (%v)", n, err)
	}
	got, err := cs.GetCallback(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != termapi.CallbackPending || got.Attempts != 0 || got.LastError != "" || strayDials.Load() != 0 {
		t.Fatalf("after the stray host: status %s, attempts %d, last error %q, dials %d", got.Status, got.Attempts, got.LastError, strayDials.Load())
	}

	// Two hosts configured with the gateway try at once: one delivers.
	open := outboxtest.NewGateway()
	var total atomic.Int32
	var wg sync.WaitGroup
	for _, name := range []string{"gateway-host", "host-configured-with-it"} {
		x := outbox.New(outbox.Options{Store: cs, Owner: name, Delivers: func(u string) bool { return u == gw },
			Dial: func(context.Context, string) (outbox.Caller, error) { return open, nil }})
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := x.DeliverDue(ctx)
			if err != nil {
				t.Error(err)
			}
			total.Add(int32(n))
		}()
	}
	wg.Wait()
	got, err = cs.GetCallback(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if total.Load() != 1 || got.Status != termapi.CallbackDelivered || got.Attempts != 1 ||
		open.Count(outbox.CallbackMethod) != 1 || open.Runs() != 1 {
		t.Fatalf("delivered %d times: status %s, attempts %d, calls %v", total.Load(), got.Status, got.Attempts, open.Calls())
	}
	if n, _ := stray.DeliverDue(ctx); n != 0 || strayDials.Load() != 0 {
		t.Fatalf("the stray host touched a delivered callback (%d, dials %d)", n, strayDials.Load())
	}
}

// TestCallbackOfAnotherHostsTurnIsDeliveredAtOnce: a Turn on host B's
// pane completes; host A, the one configured with the origin's gateway,
// starts the callback run at once (B announces the callback it queued),
// not at its outbox's next poll.
func TestCallbackOfAnotherHostsTurnIsDeliveredAtOnce(t *testing.T) {
	t.Parallel()
	const gw = "ws://gateway.example:18789"
	r := newRig(t)
	a := addHost(t, r, "hosta", 521, "key-a")
	b := addHost(t, r, "hostb", 522, "key-b")
	open := outboxtest.NewGateway()
	open.Ran = make(chan string, 1)
	dial := func(context.Context, string) (outbox.Caller, error) { return open, nil }
	cs := r.st
	// A polls only hourly: the callback must come from the announcement.
	a.outbox = outbox.New(outbox.Options{Store: cs, Dial: dial, Poll: time.Hour, Delivers: func(u string) bool { return u == gw }})
	b.outbox = outbox.New(outbox.Options{Store: cs, Dial: dial, Delivers: func(string) bool { return false }})
	a.run(t, r)
	b.run(t, r)
	ctx := t.Context()
	res, err := a.svc.Send(ctx, termapi.SendRequest{TerminalID: b.agent.pane.TerminalID, Request: "do it", OriginSession: "agent:main:s1", GatewayURL: gw})
	if err != nil {
		t.Fatal(err)
	}
	// The first look of A's outbox (as it starts) is past; from here only
	// a wake-up finds the callback.
	b.agent.finish("the answer", false)
	select {
	case <-open.Ran:
	case <-time.After(20 * time.Second):
		t.Fatalf("no callback run of turn %s within 20 s: host A was not told of B's callback", res.TurnID)
	}
	if open.Runs() != 1 {
		t.Fatalf("%d callback runs, want 1", open.Runs())
	}
}
