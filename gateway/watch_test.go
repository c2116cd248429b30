package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

// runEvents counts the chat and agent events a client receives, by run id.
type runEvents struct {
	mu     sync.Mutex
	byRun  map[string]int
	finals map[string]bool // chat final seen
}

func countRunEvents(c *gateway.Client) *runEvents {
	e := &runEvents{byRun: map[string]int{}, finals: map[string]bool{}}
	c.Subscribe(func(ev gateway.Event) {
		var p struct {
			RunID string `json:"runId"`
			State string `json:"state"`
		}
		_ = json.Unmarshal(ev.Payload, &p)
		e.mu.Lock()
		e.byRun[p.RunID]++
		if ev.Name == "chat" && p.State == "final" {
			e.finals[p.RunID] = true
		}
		e.mu.Unlock()
	}, "chat", "agent")
	return e
}

func (e *runEvents) final(runID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.finals[runID]
}

func (e *runEvents) of(runID string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byRun[runID]
}

// runToEnd follows a run of req on c to its outcome and returns it with
// the kinds of the events the run saw.
func runToEnd(ctx context.Context, t *testing.T, c *gateway.Client, req gateway.RunRequest) (gateway.Outcome, []gateway.EventKind) {
	t.Helper()
	var mu sync.Mutex
	var kinds []gateway.EventKind
	req.OnEvent = func(e gateway.RunEvent) { mu.Lock(); kinds = append(kinds, e.Kind); mu.Unlock() }
	run, err := c.StartRun(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	got, err := run.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return got, kinds
}

// echoRun runs "hi" in session key on the fake gateway and checks its
// answer.
func echoRun(ctx context.Context, t *testing.T, c *gateway.Client, key, idem string) []gateway.EventKind {
	t.Helper()
	got, kinds := runToEnd(ctx, t, c, gateway.RunRequest{SessionKey: key, Message: "hi", IdempotencyKey: idem})
	if got.Status != gateway.StatusOK || got.Text != "FAKE-REPLY: hi" {
		t.Fatalf("outcome = %+v", got)
	}
	return kinds
}

// wantRunEvents checks that a run saw lifecycle and assistant events.
func wantRunEvents(t *testing.T, what string, kinds []gateway.EventKind) {
	t.Helper()
	for _, k := range []gateway.EventKind{gateway.EventLifecycle, gateway.EventAssistant} {
		if !containsKind(kinds, k) {
			t.Errorf("%s: no %s event among %v", what, k, kinds)
		}
	}
}

// drained returns once c has handled every frame the gateway sent it for
// run id: agent.wait answers only after the run's last event went out to
// every connection, and frames are handled in order.
func drained(ctx context.Context, t *testing.T, c *gateway.Client, id string) {
	t.Helper()
	if _, err := c.WaitRun(ctx, id, 0); err != nil {
		t.Fatal(err)
	}
}

func TestRunEventsOnlyReachTheFollowingClient(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		unscoped bool     // the gateway predates session-scoped events
		caps     []string // the bystander's caps; nil is the default
		scoped   bool     // the bystander is expected not to see the run
	}{
		{name: "session-scoped gateway", scoped: true},
		{name: "bystander without the cap", caps: []string{gateway.CapToolEvents}},
		{name: "gateway without session scoping", unscoped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gw := fakegateway.New(t, fakegateway.Options{Token: fakegateway.Token, Unscoped: tc.unscoped})
			ctx := waitCtx(t)
			a := dial(t, gw)
			b := dial(t, gw, func(o *gateway.Options) { o.Caps = tc.caps })
			seen := countRunEvents(b)
			for i := range 3 {
				id := fmt.Sprint("idem-", i)
				wantRunEvents(t, id, echoRun(ctx, t, a, "shared", id))
				drained(ctx, t, b, id)
				if n := seen.of(id); (n == 0) != tc.scoped {
					t.Errorf("run %d: the other client received %d of its events; want none: %v", i, n, tc.scoped)
				}
			}
			if a.SessionScoped() == tc.unscoped {
				t.Errorf("SessionScoped() = %v on a gateway with session scoping %v", a.SessionScoped(), !tc.unscoped)
			}
			if tc.unscoped && gw.CountRequests("sessions.messages.subscribe") != 0 {
				t.Errorf("subscribed %d times on a gateway that does not offer it", gw.CountRequests("sessions.messages.subscribe"))
			}
			// The last run's end drops its session subscription.
			poll.Until(t, 10*time.Second, "unsubscribe after the runs", func() bool { return gw.Subscribed("shared") == 0 })
		})
	}
}

func TestWatchSessionNests(t *testing.T) {
	t.Parallel()
	gw := newGW(t, nil)
	c := dial(t, gw)
	ctx := waitCtx(t)
	r1, err := c.WatchSession(ctx, "nest")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.WatchSession(ctx, "agent:main:nest")
	if err != nil {
		t.Fatal(err)
	}
	if n := gw.CountRequests("sessions.messages.subscribe"); n != 1 || gw.Subscribed("nest") != 1 {
		t.Fatalf("two watches of one session: %d subscribe calls, %d subscribers; want 1, 1", n, gw.Subscribed("nest"))
	}
	r1()
	r1() // idempotent
	// A run in the session still gets its events while r2 holds it, and
	// its end does not drop r2's subscription.
	wantRunEvents(t, "run in a watched session", echoRun(ctx, t, c, "nest", "idem-nest"))
	drained(ctx, t, c, "idem-nest")
	if _, err := c.Call(ctx, "health", nil); err != nil { // after any unsubscribe
		t.Fatal(err)
	}
	if gw.Subscribed("nest") != 1 {
		t.Errorf("subscription dropped while watched")
	}
	r2()
	poll.Until(t, 10*time.Second, "unsubscribe after the last release", func() bool { return gw.Subscribed("nest") == 0 })
	gw.DisconnectAll()
	poll.Until(t, 10*time.Second, "reconnect", func() bool { return c.Stats().Reconnects >= 1 && c.Connected() })
	if _, err := c.Call(ctx, "health", nil); err != nil {
		t.Fatal(err)
	}
	if n := gw.CountRequests("sessions.messages.subscribe"); n != 1 {
		t.Errorf("%d subscribe calls; want 1 (the run shares the watch's), none renewed for a released session", n)
	}
}

// TestSessionSubscriptionLingers: a session's subscription outlives its
// last run by Options.SessionLinger, so the next run there (a client
// continuing its thread) needs no subscribe call; it is dropped once the
// linger has passed, at once with a negative linger, and a Client closing
// with a linger pending does not wait for it.
func TestSessionSubscriptionLingers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		linger     time.Duration
		subscribes int
	}{
		{name: "kept for the next run", linger: time.Hour, subscribes: 1},
		{name: "dropped at once", linger: -1, subscribes: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gw := newGW(t, nil)
			c := dial(t, gw, func(o *gateway.Options) { o.SessionLinger = tc.linger })
			ctx := waitCtx(t)
			for i := range 2 {
				id := fmt.Sprint("idem-linger-", i)
				wantRunEvents(t, "a run in the session", echoRun(ctx, t, c, "linger", id))
				drained(ctx, t, c, id)
				if tc.linger < 0 {
					poll.Until(t, 10*time.Second, "unsubscribe after the run", func() bool { return gw.Subscribed("linger") == 0 })
				}
			}
			if n := gw.CountRequests("sessions.messages.subscribe"); n != tc.subscribes {
				t.Errorf("two runs in one session one after the other: %d subscribe calls; want %d", n, tc.subscribes)
			}
		})
	}
	t.Run("dropped after the linger", func(t *testing.T) {
		t.Parallel()
		gw := newGW(t, nil)
		c := dial(t, gw, func(o *gateway.Options) { o.SessionLinger = 20 * time.Millisecond })
		ctx := waitCtx(t)
		wantRunEvents(t, "a run in the session", echoRun(ctx, t, c, "linger", "idem-linger"))
		drained(ctx, t, c, "idem-linger")
		poll.Until(t, 10*time.Second, "unsubscribe after the linger", func() bool { return gw.Subscribed("linger") == 0 })
		if n := gw.CountRequests("sessions.messages.unsubscribe"); n != 1 {
			t.Errorf("%d unsubscribe calls; want 1", n)
		}
	})
}

// TestPrepareSessionSubscribesAhead: PrepareSession subscribes to the
// session without waiting, a run there then makes no subscribe call of
// its own and gets its events, and the subscription ends with the last of
// the two interests; released without a run, it ends too.
func TestPrepareSessionSubscribesAhead(t *testing.T) {
	t.Parallel()
	gw := newGW(t, nil)
	c := dial(t, gw, func(o *gateway.Options) { o.SessionLinger = -1 })
	ctx := waitCtx(t)
	release := c.PrepareSession("prep")
	poll.Until(t, 10*time.Second, "the prepared subscription", func() bool { return gw.Subscribed("prep") == 1 })
	run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "prep", Message: "hi", IdempotencyKey: "idem-prep"})
	if err != nil {
		t.Fatal(err)
	}
	release()
	release() // idempotent
	got, err := run.Wait(ctx)
	run.Close()
	if err != nil || got.Status != gateway.StatusOK || got.Text != "FAKE-REPLY: hi" {
		t.Fatalf("the run in a prepared session: %+v, %v", got, err)
	}
	if n := gw.CountRequests("sessions.messages.subscribe"); n != 1 {
		t.Errorf("a prepared session and a run there: %d subscribe calls; want 1", n)
	}
	poll.Until(t, 10*time.Second, "unsubscribe after the run and the release", func() bool { return gw.Subscribed("prep") == 0 })

	release = c.PrepareSession("unused")
	poll.Until(t, 10*time.Second, "the second prepared subscription", func() bool { return gw.Subscribed("unused") == 1 })
	release()
	poll.Until(t, 10*time.Second, "unsubscribe of a prepared session without a run", func() bool { return gw.Subscribed("unused") == 0 })
}

// TestCloseEndsAPreparedSessionsWait: a session prepared while the gateway
// is down waits for a connection, and Close ends that wait at once rather
// than after the handshake timeout.
func TestCloseEndsAPreparedSessionsWait(t *testing.T) {
	t.Parallel()
	gw := newGW(t, nil)
	c := dial(t, gw, func(o *gateway.Options) { o.HandshakeTimeout = time.Hour })
	gw.Close()
	poll.Until(t, 10*time.Second, "the client to lose its gateway", func() bool { return !c.Connected() })
	release := c.PrepareSession("down")
	defer release()
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute): // the bound of a hang, an hour short of the timeout
		t.Fatal("Close waited for the prepared session's connection")
	}
}
