package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox/outboxtest"
	"github.com/clawconnect/clawconnect/termapi"
)

// memCallbacks is an in-memory CallbackStore, so the outbox loop can run
// in a synctest bubble (a database pool may not be shared with goroutines
// outside it).
type memCallbacks struct {
	mu  sync.Mutex
	cbs map[string]store.Callback
}

func (m *memCallbacks) GetCallback(_ context.Context, id string) (*store.Callback, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cb, ok := m.cbs[id]
	if !ok {
		return nil, store.ErrNotFound
	}
	return &cb, nil
}

func (m *memCallbacks) TurnCallbacks(context.Context, string, int) ([]*store.Callback, error) {
	return nil, errors.New("not used")
}

func (m *memCallbacks) DueCallbacks(_ context.Context, now int64, _ int) ([]*store.Callback, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*store.Callback
	for _, cb := range m.cbs {
		if (cb.Status == termapi.CallbackPending || cb.Status == termapi.CallbackFailed) && cb.NextAttemptAt <= now && cb.LeaseUntil < now {
			out = append(out, &cb)
		}
	}
	return out, nil
}

func (m *memCallbacks) ClaimCallback(_ context.Context, id, owner string, now, until int64) (*store.Callback, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cb := m.cbs[id]
	if (cb.Status != termapi.CallbackPending && cb.Status != termapi.CallbackFailed) || (cb.LeaseOwner != owner && cb.LeaseUntil >= now) {
		return nil, store.ErrLeaseLost
	}
	cb.LeaseOwner, cb.LeaseToken, cb.LeaseUntil = owner, cb.LeaseToken+1, until
	m.cbs[id] = cb
	return &cb, nil
}

func (m *memCallbacks) SaveCallback(_ context.Context, cb *store.Callback) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.cbs[cb.MessageID]; cur.LeaseOwner != cb.LeaseOwner || cur.LeaseToken != cb.LeaseToken {
		return store.ErrLeaseLost
	}
	m.cbs[cb.MessageID] = *cb
	return nil
}

func (m *memCallbacks) RearmCallback(context.Context, string, int64) (*store.Callback, error) {
	return nil, errors.New("not used")
}

// TestOutboxRunRetriesOnSchedule runs the outbox loop in a synctest
// bubble: the gateway is down for two attempts; the third, 5 s + 15 s
// later, delivers.
func TestOutboxRunRetriesOnSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		id := "msg-terminal-x"
		cs := &memCallbacks{cbs: map[string]store.Callback{id: {MessageID: id, TurnID: "turn-20260101T000000-00000000",
			SessionID: "session-x", SessionKey: "agent:main:s1", Status: termapi.CallbackPending, NextAttemptAt: time.Now().UnixMilli(),
			Message: json.RawMessage(`{"id":"` + id + `","type":"done","body":"x","session_id":"session-x","turn_id":"turn-20260101T000000-00000000"}`)}}}
		gw := outboxtest.NewGateway()
		gw.SetDown(2)
		x := New(Options{Store: cs, Owner: "bubble", Poll: time.Second,
			Dial: func(context.Context, string) (Caller, error) { return gw, nil }})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		start := time.Now()
		go func() { _ = x.Run(ctx); close(done) }()
		var deliveredAfter time.Duration
		for range 60 {
			time.Sleep(time.Second)
			if got, _ := cs.GetCallback(ctx, id); got.Status == termapi.CallbackDelivered {
				deliveredAfter = time.Since(start)
				break
			}
		}
		cancel()
		<-done
		if deliveredAfter < 20*time.Second || deliveredAfter > 22*time.Second {
			t.Fatalf("delivered after %s, want 5 s + 15 s after the first attempt (calls %v)", deliveredAfter, gw.Calls())
		}
		if gw.Count(CallbackMethod) != 3 || gw.Runs() != 1 {
			t.Fatalf("calls %v", gw.Calls())
		}
	})
}

// TestOutboxWarmConnectsBeforeTheFirstCallback: with WarmURL, Run connects
// to that gateway at once, and the first delivery reuses that client.
func TestOutboxWarmConnectsBeforeTheFirstCallback(t *testing.T) {
	t.Parallel()
	dialed := make(chan string, 2)
	const url = "ws://127.0.0.1:18789"
	x := New(Options{Store: &memCallbacks{cbs: map[string]store.Callback{}}, WarmURL: url, Poll: time.Hour,
		Dial: func(_ context.Context, url string) (Caller, error) {
			dialed <- url
			return outboxtest.NewGateway(), nil
		}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	select {
	case got := <-dialed:
		if got != url {
			t.Fatalf("warmed %q, want %q", got, url)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not connect ahead of the first callback")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := x.caller(t.Context(), url); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-dialed:
		t.Fatalf("dialed %q again instead of reusing the warm client", got)
	default:
	}
}

// blackHole is a gateway address that accepts TCP connections and never
// answers the WebSocket handshake, as a frozen gateway does.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "ws://" + ln.Addr().String()
}

// TestDeadGatewayDoesNotDelayAnotherGatewaysCallback: while the dial of a
// black-holed gateway URL hangs (the warm-up connect, as serve starts),
// a callback to another gateway is delivered.
func TestDeadGatewayDoesNotDelayAnotherGatewaysCallback(t *testing.T) {
	t.Parallel()
	dead := blackHole(t)
	const live = "ws://127.0.0.1:1"
	id := "msg-terminal-y"
	cs := &memCallbacks{cbs: map[string]store.Callback{id: {MessageID: id, TurnID: "turn-20260101T000000-00000001",
		SessionID: "session-y", SessionKey: "agent:main:s2", GatewayURL: live, Status: termapi.CallbackPending, NextAttemptAt: time.Now().UnixMilli(),
		Message: json.RawMessage(`{"id":"` + id + `","type":"done","body":"y","session_id":"session-y","turn_id":"turn-20260101T000000-00000001"}`)}}}
	gw := outboxtest.NewGateway()
	dialing := make(chan struct{})
	x := New(Options{Store: cs, Owner: "o-iso", Poll: time.Hour,
		Dial: func(ctx context.Context, url string) (Caller, error) {
			if url == dead {
				close(dialing)
				return gateway.Dial(ctx, gateway.Options{URL: url, HandshakeTimeout: time.Hour})
			}
			return gw, nil
		}})
	ctx, cancel := context.WithCancel(t.Context())
	deadDone := make(chan error, 1)
	go func() { _, err := x.caller(ctx, dead); deadDone <- err }()
	<-dialing

	delivered := make(chan int, 1)
	go func() { n, _ := x.DeliverDue(ctx); delivered <- n }()
	select {
	case n := <-delivered:
		if n != 1 {
			t.Fatalf("attempted %d callbacks, want 1", n)
		}
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("the callback to a live gateway waited on the dial of a dead one")
	}
	if got, _ := cs.GetCallback(ctx, id); got.Status != termapi.CallbackDelivered {
		t.Fatalf("callback = %+v", got)
	}
	cancel()
	if err := <-deadDone; err == nil {
		t.Fatal("the dead gateway's dial succeeded")
	}
	_ = x.Close()
}

// TestRunDeliversPastACallbackStuckOnADeadGateway: Run keeps looking for
// due callbacks while an attempt hangs on the dial of a black-holed
// gateway, so a callback to another gateway that falls due meanwhile is
// delivered; more callbacks of the dead gateway wait for its one dial.
func TestRunDeliversPastACallbackStuckOnADeadGateway(t *testing.T) {
	t.Parallel()
	dead := blackHole(t)
	const live = "ws://127.0.0.1:1"
	cb := func(n, url string) store.Callback {
		id := "msg-terminal-z" + n
		return store.Callback{MessageID: id, TurnID: "turn-20260101T000000-00000002", SessionID: "session-z", SessionKey: "agent:main:s3",
			GatewayURL: url, Status: termapi.CallbackPending, NextAttemptAt: time.Now().UnixMilli(),
			Message: json.RawMessage(`{"id":"` + id + `","type":"done","body":"z","session_id":"session-z","turn_id":"turn-20260101T000000-00000002"}`)}
	}
	stuck, stuck2, later := cb("1", dead), cb("2", dead), cb("3", live)
	cs := &memCallbacks{cbs: map[string]store.Callback{stuck.MessageID: stuck}}
	gw := outboxtest.NewGateway()
	gw.Ran = make(chan string, 1)
	dialing := make(chan struct{})
	var dials atomic.Int32
	x := New(Options{Store: cs, Owner: "o-run", Poll: time.Hour,
		Dial: func(ctx context.Context, url string) (Caller, error) {
			if url == dead {
				if dials.Add(1) == 1 {
					close(dialing)
				}
				return gateway.Dial(ctx, gateway.Options{URL: url, HandshakeTimeout: time.Hour})
			}
			return gw, nil
		}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- x.Run(ctx) }()
	<-dialing
	cs.mu.Lock()
	cs.cbs[stuck2.MessageID], cs.cbs[later.MessageID] = stuck2, later
	cs.mu.Unlock()
	x.Kick()
	select {
	case <-gw.Ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a callback to a live gateway waited for an attempt stuck on a dead one")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, c := range []store.Callback{stuck, stuck2} {
		if got, _ := cs.GetCallback(t.Context(), c.MessageID); got.Status == termapi.CallbackDelivered {
			t.Fatalf("a callback of the dead gateway was delivered: %+v", got)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("the dead gateway was dialled %d times while Run ran, want 1 (its callbacks wait for one dial)", n)
	}
}
