package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox/outboxtest"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/termapi"
)

// completedTurn sends a request from origin session S and finishes it.
func completedTurn(t testing.TB, r *rig, a *fakeAgent, origin, reply string) (string, *store.Callback) {
	t.Helper()
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "do it", OriginSession: origin})
	if err != nil {
		t.Fatal(err)
	}
	a.finish(reply, false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	cbs, err := r.st.TurnCallbacks(ctx, res.TurnID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if origin == "" {
		if len(cbs) != 0 {
			t.Fatalf("a Turn without origin queued callbacks: %+v", cbs)
		}
		return res.TurnID, nil
	}
	if len(cbs) != 1 {
		t.Fatalf("callbacks = %+v", cbs)
	}
	return res.TurnID, cbs[0]
}

func TestCompletionWritesCallbackInTheClaimTransaction(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 301)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	turnID, cb := completedTurn(t, r, a, "agent:main:s1", "FAKE-REPLY: done OPENAI_API_KEY=sk-abcdefghijklmnop")
	claim, err := r.st.GetCompletionClaim(ctx, turnID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cb.MessageID, "msg-terminal-") || len(cb.MessageID) != len("msg-terminal-")+32 || cb.MessageID != claim.CallbackMessageID {
		t.Fatalf("callback id %s, claim's %s", cb.MessageID, claim.CallbackMessageID)
	}
	if cb.Status != termapi.CallbackPending || cb.SessionKey != "agent:main:s1" || cb.Kind != KindCompletion || cb.Attempts != 0 {
		t.Fatalf("callback = %+v", cb)
	}
	var m outbox.CallbackMessage
	if err := json.Unmarshal(cb.Message, &m); err != nil {
		t.Fatal(err)
	}
	if m.Type != MsgDone || m.To != ActorOpenClaw || m.TurnID != turnID || m.ConversationID != turnID || m.RequiresResponse ||
		m.Body != "FAKE-REPLY: done OPENAI_API_KEY=[REDACTED]" || m.Metadata["completion_fingerprint"] != claim.CompletionFingerprint {
		t.Fatalf("message = %+v", m)
	}
	// The same id is what a repeated claim would compute: deterministic.
	if id := callbackID(turnID, claim.MessageID, claim.CompletionFingerprint, "completed"); id != cb.MessageID {
		t.Fatalf("id %s is not derived from the completion fingerprint (%s)", cb.MessageID, id)
	}
	v, err := r.svc.Status(ctx, turnID)
	if err != nil || v.CallbackDelivery == nil || v.CallbackDelivery.Status != termapi.CallbackPending || v.OriginSession != "agent:main:s1" {
		t.Fatalf("status = %+v, %v", v, err)
	}
	// No origin session, no callback.
	completedTurn(t, r, a, "", "second")
}

func TestSendRefusesABadOriginSession(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 302)
	r := newRig(t, a)
	for _, k := range []string{"agent:main:s 1", "agent:\nmain", strings.Repeat("k", 513)} {
		if _, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x", OriginSession: k}); !errors.Is(err, termapi.ErrBadInput) {
			t.Errorf("origin %q: %v", k, err)
		}
	}
	if len(a.sentKeys()) != 0 {
		t.Fatalf("keys reached the pane: %v", a.sentKeys())
	}
}

// clock is a manual clock for the outbox.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newTestOutbox(st store.Store, gw outbox.Caller, owner string, now func() time.Time) *outbox.Outbox {
	return outbox.New(outbox.Options{Store: st, Owner: owner, Now: now,
		Dial: func(context.Context, string) (outbox.Caller, error) { return gw, nil }})
}

func TestOutboxDeliversOnceAndRecordsEvidence(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 303)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	turnID, cb := completedTurn(t, r, a, "agent:main:s1", "the answer")
	gw := outboxtest.NewGateway()
	x := newTestOutbox(r.st, gw, "o1", time.Now)
	if n, err := x.DeliverDue(ctx); err != nil || n != 1 {
		t.Fatalf("deliver: %d, %v", n, err)
	}
	if n, _ := x.DeliverDue(ctx); n != 0 {
		t.Fatalf("a delivered callback was attempted again (%d)", n)
	}
	got, _ := r.st.GetCallback(ctx, cb.MessageID)
	if got.Status != termapi.CallbackDelivered || got.Attempts != 1 || !outbox.Accepted(got.Injection) || !outbox.Accepted(got.Wake) ||
		!strings.Contains(string(got.RunObservation), `"ok"`) || got.LeaseUntil != 0 {
		t.Fatalf("callback = %+v", got)
	}
	if gw.Count(outbox.CallbackMethod) != 1 || gw.Count("chat.send") != 1 || gw.Runs() != 1 {
		t.Fatalf("calls %v", gw.Calls())
	}
	for k, s := range gw.Injections() {
		if s != "agent:main:s1" || !strings.HasSuffix(k, cb.MessageID) {
			t.Fatalf("injection %s -> %s", k, s)
		}
	}
	v, _ := r.svc.Status(ctx, turnID)
	if v.CallbackDelivery.Status != termapi.CallbackDelivered || v.CallbackDelivery.DeliveredAt == "" {
		t.Fatalf("status %+v", v.CallbackDelivery)
	}
	// A manual retry of a delivered callback changes nothing.
	if v, err := r.svc.RetryCallback(ctx, turnID); err != nil || v.CallbackDelivery.Status != termapi.CallbackDelivered {
		t.Fatalf("retry delivered: %+v, %v", v.CallbackDelivery, err)
	}
}

func TestOutboxRetriesExhaustsAndManualRetryReusesIDs(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 304)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	turnID, cb := completedTurn(t, r, a, "agent:main:s1", "the answer")
	gw := outboxtest.NewGateway()
	gw.SetDown(100)
	c := &clock{now: time.Now()}
	x := newTestOutbox(r.st, gw, "o1", c.Now)
	cs := r.st
	for i, d := range outbox.DefaultCallbackDelays {
		if n, _ := x.DeliverDue(ctx); n != 1 {
			t.Fatalf("attempt %d not made", i+1)
		}
		got, _ := cs.GetCallback(ctx, cb.MessageID)
		if got.Status != termapi.CallbackFailed || got.Attempts != i+1 || got.NextAttemptAt != c.Now().UnixMilli()+d.Milliseconds() ||
			!strings.Contains(got.LastError, "gateway not connected") {
			t.Fatalf("after attempt %d: %+v", i+1, got)
		}
		c.add(d - time.Millisecond)
		if n, _ := x.DeliverDue(ctx); n != 0 {
			t.Fatalf("attempt %d made before its delay", i+2)
		}
		c.add(time.Millisecond)
	}
	if n, _ := x.DeliverDue(ctx); n != 1 {
		t.Fatal("fifth attempt not made")
	}
	got, _ := cs.GetCallback(ctx, cb.MessageID)
	if got.Status != termapi.CallbackExhausted || got.Attempts != 5 {
		t.Fatalf("after five failures: %+v", got)
	}
	c.add(time.Hour)
	if n, _ := x.DeliverDue(ctx); n != 0 {
		t.Fatal("an exhausted callback was attempted")
	}
	v, _ := r.svc.Status(ctx, turnID)
	if v.CallbackDelivery.Status != termapi.CallbackExhausted || v.CallbackDelivery.Attempts != 5 || v.CallbackDelivery.LastError == "" {
		t.Fatalf("status %+v", v.CallbackDelivery)
	}
	// The gateway is back; a manual retry delivers the same message.
	gw.SetDown(0)
	if _, err := r.svc.RetryCallback(ctx, turnID); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.now = time.Now() // the outbox's clock back to the store's
	c.mu.Unlock()
	if n, _ := x.DeliverDue(ctx); n != 1 {
		t.Fatal("manual retry not attempted")
	}
	got, _ = cs.GetCallback(ctx, cb.MessageID)
	if got.Status != termapi.CallbackDelivered || got.ManualRetries != 1 || !sameMessage(got.Message, cb.Message) {
		t.Fatalf("after manual retry: %+v", got)
	}
	if gw.Runs() != 1 {
		t.Fatalf("runs %d", gw.Runs())
	}
	if _, err := r.svc.RetryCallback(ctx, "turn-20260101T000000-00000000"); !errors.Is(err, termapi.ErrNotFound) {
		t.Fatalf("retry of an unknown turn: %v", err)
	}
}

func sameMessage(a, b json.RawMessage) bool {
	var x, y any
	_ = json.Unmarshal(a, &x)
	_ = json.Unmarshal(b, &y)
	ea, _ := json.Marshal(x)
	eb, _ := json.Marshal(y)
	return string(ea) == string(eb)
}

// TestOutboxAttemptLeaseFences: a second outbox cannot attempt a callback
// whose lease is live, and a writer whose lease was taken over cannot
// settle it.
func TestOutboxAttemptLeaseFences(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 305)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	_, cb := completedTurn(t, r, a, "agent:main:s1", "the answer")
	cs := r.st
	now := time.Now().UnixMilli()
	held, err := cs.ClaimCallback(ctx, cb.MessageID, "dead-host", now, now+120_000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ClaimCallback(ctx, cb.MessageID, "other", now, now+120_000); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("second claim of a live lease: %v", err)
	}
	gw := outboxtest.NewGateway()
	c := &clock{now: time.Now()}
	x := newTestOutbox(r.st, gw, "o2", c.Now)
	if n, _ := x.DeliverDue(ctx); n != 0 {
		t.Fatal("attempted under another host's live lease")
	}
	// The lease expires (its host was killed): o2 takes over and delivers.
	c.add(2*time.Minute + time.Second)
	if n, _ := x.DeliverDue(ctx); n != 1 {
		t.Fatal("expired lease not taken over")
	}
	held.Status, held.LastError = termapi.CallbackFailed, "late"
	if err := cs.SaveCallback(ctx, held); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a stale lease holder settled the callback: %v", err)
	}
	got, _ := cs.GetCallback(ctx, cb.MessageID)
	if got.Status != termapi.CallbackDelivered || gw.Runs() != 1 {
		t.Fatalf("callback %+v, runs %d", got, gw.Runs())
	}
}

// TestOutboxSettlesAcceptedEvidenceWithoutResending: a host killed after the
// wake was accepted but before settling leaves the evidence; the next
// attempt settles delivered without calling the gateway again.
func TestOutboxSettlesAcceptedEvidenceWithoutResending(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 306)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	_, cb := completedTurn(t, r, a, "agent:main:s1", "the answer")
	cs := r.st
	now := time.Now().UnixMilli()
	held, _ := cs.ClaimCallback(ctx, cb.MessageID, "killed", now, now+1)
	held.Attempts = 1
	held.Wake = json.RawMessage(`{"status":"accepted","run_id":"clawconnect-callback:x"}`)
	if err := cs.SaveCallback(ctx, held); err != nil {
		t.Fatal(err)
	}
	gw := outboxtest.NewGateway()
	c := &clock{now: time.Now().Add(time.Second)}
	x := newTestOutbox(r.st, gw, "o3", c.Now)
	if n, _ := x.DeliverDue(ctx); n != 1 {
		t.Fatal("not picked up")
	}
	got, _ := cs.GetCallback(ctx, cb.MessageID)
	if got.Status != termapi.CallbackDelivered || len(gw.Calls()) != 0 {
		t.Fatalf("callback %+v, calls %v", got, gw.Calls())
	}
}

// TestKill9BetweenClaimAndDelivery: the completion is claimed and the
// host dies before any delivery; a new process over the reopened store
// delivers exactly one callback.
func TestKill9BetweenClaimAndDelivery(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, sqlite.FileName)
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	a := newFakeAgent(termapi.AgentCodex, 307)
	ft := &fakeTerminals{agents: []*fakeAgent{a}}
	r := &rig{t: t, st: st, ft: ft}
	r.svc = r.service()
	r.start(r.svc, hostpkg.Options{})
	_, cb := completedTurn(t, r, a, "agent:main:s1", "the answer")
	r.stop()
	<-r.done
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	gw := outboxtest.NewGateway()
	for _, owner := range []string{"restarted", "another"} {
		x := newTestOutbox(st2, gw, owner, time.Now)
		if _, err := x.DeliverDue(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := st2.GetCallback(t.Context(), cb.MessageID)
	if got.Status != termapi.CallbackDelivered || gw.Count(outbox.CallbackMethod) != 1 || gw.Runs() != 1 {
		t.Fatalf("callback %+v, calls %v", got, gw.Calls())
	}
}

// TestHostFreesADeadHostsCallbackAttempt: a host killed during a delivery
// attempt leaves its 2-minute attempt lease; the next host proves it dead
// through the process registry and delivers at once, exactly one run.
func TestHostFreesADeadHostsCallbackAttempt(t *testing.T) {
	self := owner.Self()
	if self.Host == "" {
		t.Skip("proving a process dead needs /proc")
	}
	a := newFakeAgent(termapi.AgentCodex, 309)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	_, cb := completedTurn(t, r, a, "agent:main:s1", "the answer")
	r.stop()
	<-r.done
	reg := r.st
	dead := self.Process("terminal host", 1)
	dead.ID, dead.Start = "killed-daemon", "another-boot:1" // our pid, another incarnation
	if err := reg.Heartbeat(ctx, dead); err != nil {
		t.Fatal(err)
	}
	cs := r.st
	now := time.Now()
	if _, err := cs.ClaimCallback(ctx, cb.MessageID, dead.ID, now.UnixMilli(), now.Add(2*time.Minute).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	gw := outboxtest.NewGateway()
	gw.Ran = make(chan string, 4)
	x := outbox.New(outbox.Options{Store: cs, Dial: func(context.Context, string) (outbox.Caller, error) { return gw, nil }})
	h := r.start(r.svc, hostpkg.Options{Rescan: time.Hour, LeaseTTL: time.Hour, Outbox: x})
	if x.Owner() != h.Owner() {
		t.Fatalf("outbox owner %q, host owner %q: a host proven dead would keep its attempts", x.Owner(), h.Owner())
	}
	select {
	case <-gw.Ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the dead host's attempt was not taken over (its lease has 2 minutes left)")
	}
	var got *store.Callback
	var err error
	if !poll.WithinEvery(10*time.Second, 20*time.Millisecond, func() bool {
		got, err = cs.GetCallback(ctx, cb.MessageID)
		return err == nil && got.Status == termapi.CallbackDelivered
	}) {
		t.Fatalf("callback = %+v, %v", got, err)
	}
	if got.LeaseOwner != h.Owner() || got.Attempts != 1 {
		t.Fatalf("delivered by %q after %d attempts", got.LeaseOwner, got.Attempts)
	}
	if gw.Runs() != 1 || gw.Count(outbox.CallbackMethod) != 1 {
		t.Fatalf("calls %v", gw.Calls())
	}
}

// TestStaleGenerationRefusesTheCallback: a Session re-bound while its Turn
// runs: the Turn either stalls (the monitor saw the new binding first) or
// completes (a check that read the old binding found the reply), and
// either callback is refused inside its write's transaction: nothing is
// queued for the origin session.
func TestStaleGenerationRefusesTheCallback(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 308)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "do it", OriginSession: "agent:main:s1"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := r.st.GetTermSession(ctx, res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	nb := *sess.Binding
	nb.BindingID, nb.Generation = "binding-rebound", sess.Binding.Generation+1
	sess.Binding = &nb
	if err := r.st.SaveTermSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	a.finish("late reply", false)
	r.until("the Turn stalls or completes", func() bool {
		v, err := r.svc.Status(ctx, res.TurnID)
		return err == nil && (v.Status == termapi.TurnStalled || v.Status == termapi.TurnIdle)
	})
	cbs, _ := r.st.TurnCallbacks(ctx, res.TurnID, 10)
	if len(cbs) != 0 {
		t.Fatalf("a stale generation queued %+v", cbs)
	}
	evs, _ := r.st.TurnEvents(ctx, res.TurnID, 0, 100)
	refused := false
	for _, e := range evs {
		refused = refused || e.Type == "callback_refused"
	}
	if !refused {
		t.Fatal("no callback_refused event")
	}
}
