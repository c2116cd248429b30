package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
)

// fakeOpenClaw answers clawconnect.callback, chat.send and agent.wait the
// way the plugin and the gateway do: injections and runs are deduplicated
// by their idempotency keys.
type fakeOpenClaw struct {
	mu         sync.Mutex
	down       int // the next down calls fail as if the gateway were stopped
	calls      []string
	injections map[string]string // idempotency key -> session key
	runs       map[string]string // run id -> message
	noEnqueue  bool
	ran        chan string // receives each new run's id, when set
}

func newFakeOpenClaw() *fakeOpenClaw {
	return &fakeOpenClaw{injections: map[string]string{}, runs: map[string]string{}}
}

func (f *fakeOpenClaw) Call(_ context.Context, method string, params any) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method)
	if f.down > 0 {
		f.down--
		return nil, errors.New("gateway not connected")
	}
	b, _ := json.Marshal(params)
	switch method {
	case CallbackMethod:
		var p struct {
			SessionKey string `json:"sessionKey"`
			SessionID  string `json:"session_id"`
			TurnID     string `json:"turn_id"`
			Message    struct {
				ID        string `json:"id"`
				Type      string `json:"type"`
				Body      string `json:"body"`
				SessionID string `json:"session_id"`
				TurnID    string `json:"turn_id"`
			} `json:"message"`
		}
		if err := json.Unmarshal(b, &p); err != nil || p.SessionKey == "" || p.Message.ID == "" ||
			p.Message.SessionID != p.SessionID || p.Message.TurnID != p.TurnID {
			return nil, fmt.Errorf("CLAWCONNECT_CALLBACK_FAILED: bad params %s", b)
		}
		key := "clawconnect:" + p.SessionID + ":" + p.TurnID + ":" + p.Message.ID
		f.injections[key] = p.SessionKey
		out := map[string]any{"ok": true, "enqueued": !f.noEnqueue, "delivery_required": true, "delivery_mode": "chat.send",
			"injection_id": key, "session_key": p.SessionKey, "message_id": p.Message.ID, "message_type": p.Message.Type,
			"chat_send": map[string]any{"sessionKey": p.SessionKey, "message": "[ClawConnect callback]\n" + p.Message.Body,
				"idempotencyKey": "clawconnect-callback:" + p.SessionID + ":" + p.TurnID + ":" + p.Message.ID, "deliver": true}}
		return json.Marshal(out)
	case "chat.send":
		var c chatSend
		_ = json.Unmarshal(b, &c)
		status := "started"
		if _, ok := f.runs[c.IdempotencyKey]; ok {
			status = "ok"
		} else {
			f.runs[c.IdempotencyKey] = c.Message
			if f.ran != nil {
				f.ran <- c.IdempotencyKey
			}
		}
		return json.Marshal(map[string]any{"runId": c.IdempotencyKey, "status": status})
	case "agent.wait":
		return json.RawMessage(`{"status":"ok"}`), nil
	}
	return nil, fmt.Errorf("unknown method %s", method)
}

func (f *fakeOpenClaw) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == method {
			n++
		}
	}
	return n
}

func (f *fakeOpenClaw) runCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.runs)
}

// completedTurn sends a request from origin session S and finishes it.
func completedTurn(t testing.TB, r *rig, a *fakeAgent, origin, reply string) (string, *store.Callback) {
	t.Helper()
	ctx := t.Context()
	res, err := r.svc.Send(ctx, SendRequest{TerminalID: a.pane.TerminalID, Request: "do it", OriginSession: origin})
	if err != nil {
		t.Fatal(err)
	}
	a.finish(reply, false)
	r.waitStatus(res.TurnID, store.TurnIdle)
	cbs, err := r.st.(store.CallbackStore).TurnCallbacks(ctx, res.TurnID, 10)
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
	a := newFakeAgent(AgentCodex, 301)
	r := newRig(t, a)
	r.start(r.svc, HostOptions{})
	ctx := t.Context()
	turnID, cb := completedTurn(t, r, a, "agent:main:s1", "FAKE-REPLY: done OPENAI_API_KEY=sk-abcdefghijklmnop")
	claim, err := r.st.GetCompletionClaim(ctx, turnID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cb.MessageID, "msg-terminal-") || len(cb.MessageID) != len("msg-terminal-")+32 || cb.MessageID != claim.CallbackMessageID {
		t.Fatalf("callback id %s, claim's %s", cb.MessageID, claim.CallbackMessageID)
	}
	if cb.Status != store.CallbackPending || cb.SessionKey != "agent:main:s1" || cb.Kind != KindCompletion || cb.Attempts != 0 {
		t.Fatalf("callback = %+v", cb)
	}
	var m CallbackMessage
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
	if err != nil || v.CallbackDelivery == nil || v.CallbackDelivery.Status != store.CallbackPending || v.OriginSession != "agent:main:s1" {
		t.Fatalf("status = %+v, %v", v, err)
	}
	// No origin session, no callback.
	completedTurn(t, r, a, "", "second")
}

func TestSendRefusesABadOriginSession(t *testing.T) {
	a := newFakeAgent(AgentCodex, 302)
	r := newRig(t, a)
	for _, k := range []string{"agent:main:s 1", "agent:\nmain", strings.Repeat("k", 513)} {
		if _, err := r.svc.Send(t.Context(), SendRequest{TerminalID: a.pane.TerminalID, Request: "x", OriginSession: k}); !errors.Is(err, ErrBadInput) {
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

func newTestOutbox(st store.TerminalStore, gw Caller, owner string, now func() time.Time) *Outbox {
	return NewOutbox(OutboxOptions{Store: st.(store.CallbackStore), Owner: owner, Now: now,
		Dial: func(context.Context, string) (Caller, error) { return gw, nil }})
}

func TestOutboxDeliversOnceAndRecordsEvidence(t *testing.T) {
	a := newFakeAgent(AgentCodex, 303)
	r := newRig(t, a)
	r.start(r.svc, HostOptions{})
	ctx := t.Context()
	turnID, cb := completedTurn(t, r, a, "agent:main:s1", "the answer")
	gw := newFakeOpenClaw()
	x := newTestOutbox(r.st, gw, "o1", time.Now)
	if n, err := x.DeliverDue(ctx); err != nil || n != 1 {
		t.Fatalf("deliver: %d, %v", n, err)
	}
	if n, _ := x.DeliverDue(ctx); n != 0 {
		t.Fatalf("a delivered callback was attempted again (%d)", n)
	}
	got, _ := r.st.(store.CallbackStore).GetCallback(ctx, cb.MessageID)
	if got.Status != store.CallbackDelivered || got.Attempts != 1 || !accepted(got.Injection) || !accepted(got.Wake) ||
		!strings.Contains(string(got.RunObservation), `"ok"`) || got.LeaseUntil != 0 {
		t.Fatalf("callback = %+v", got)
	}
	if gw.count(CallbackMethod) != 1 || gw.count("chat.send") != 1 || gw.runCount() != 1 {
		t.Fatalf("calls %v", gw.calls)
	}
	for k, s := range gw.injections {
		if s != "agent:main:s1" || !strings.HasSuffix(k, cb.MessageID) {
			t.Fatalf("injection %s -> %s", k, s)
		}
	}
	v, _ := r.svc.Status(ctx, turnID)
	if v.CallbackDelivery.Status != store.CallbackDelivered || v.CallbackDelivery.DeliveredAt == "" {
		t.Fatalf("status %+v", v.CallbackDelivery)
	}
	// A manual retry of a delivered callback changes nothing.
	if v, err := r.svc.RetryCallback(ctx, turnID); err != nil || v.CallbackDelivery.Status != store.CallbackDelivered {
		t.Fatalf("retry delivered: %+v, %v", v.CallbackDelivery, err)
	}
}

func TestOutboxRetriesExhaustsAndManualRetryReusesIDs(t *testing.T) {
	a := newFakeAgent(AgentCodex, 304)
	r := newRig(t, a)
	r.start(r.svc, HostOptions{})
	ctx := t.Context()
	turnID, cb := completedTurn(t, r, a, "agent:main:s1", "the answer")
	gw := newFakeOpenClaw()
	gw.down = 100
	c := &clock{now: time.Now()}
	x := newTestOutbox(r.st, gw, "o1", c.Now)
	cs := r.st.(store.CallbackStore)
	for i, d := range DefaultCallbackDelays {
		if n, _ := x.DeliverDue(ctx); n != 1 {
			t.Fatalf("attempt %d not made", i+1)
		}
		got, _ := cs.GetCallback(ctx, cb.MessageID)
		if got.Status != store.CallbackFailed || got.Attempts != i+1 || got.NextAttemptAt != c.Now().UnixMilli()+d.Milliseconds() ||
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
	if got.Status != store.CallbackExhausted || got.Attempts != 5 {
		t.Fatalf("after five failures: %+v", got)
	}
	c.add(time.Hour)
	if n, _ := x.DeliverDue(ctx); n != 0 {
		t.Fatal("an exhausted callback was attempted")
	}
	v, _ := r.svc.Status(ctx, turnID)
	if v.CallbackDelivery.Status != store.CallbackExhausted || v.CallbackDelivery.Attempts != 5 || v.CallbackDelivery.LastError == "" {
		t.Fatalf("status %+v", v.CallbackDelivery)
	}
	// The gateway is back; a manual retry delivers the same message.
	gw.mu.Lock()
	gw.down = 0
	gw.mu.Unlock()
	if _, err := r.svc.RetryCallback(ctx, turnID); err != nil {
		t.Fatal(err)
	}
	x.o.Now = time.Now
	if n, _ := x.DeliverDue(ctx); n != 1 {
		t.Fatal("manual retry not attempted")
	}
	got, _ = cs.GetCallback(ctx, cb.MessageID)
	if got.Status != store.CallbackDelivered || got.ManualRetries != 1 || !sameMessage(got.Message, cb.Message) {
		t.Fatalf("after manual retry: %+v", got)
	}
	if gw.runCount() != 1 {
		t.Fatalf("runs %d", gw.runCount())
	}
	if _, err := r.svc.RetryCallback(ctx, "turn-20260101T000000-00000000"); !errors.Is(err, ErrNotFound) {
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
	a := newFakeAgent(AgentCodex, 305)
	r := newRig(t, a)
	r.start(r.svc, HostOptions{})
	ctx := t.Context()
	_, cb := completedTurn(t, r, a, "agent:main:s1", "the answer")
	cs := r.st.(store.CallbackStore)
	now := time.Now().UnixMilli()
	held, err := cs.ClaimCallback(ctx, cb.MessageID, "dead-host", now, now+120_000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ClaimCallback(ctx, cb.MessageID, "other", now, now+120_000); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("second claim of a live lease: %v", err)
	}
	gw := newFakeOpenClaw()
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
	held.Status, held.LastError = store.CallbackFailed, "late"
	if err := cs.SaveCallback(ctx, held); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("a stale lease holder settled the callback: %v", err)
	}
	got, _ := cs.GetCallback(ctx, cb.MessageID)
	if got.Status != store.CallbackDelivered || gw.runCount() != 1 {
		t.Fatalf("callback %+v, runs %d", got, gw.runCount())
	}
}

// TestOutboxSettlesAcceptedEvidenceWithoutResending: a host killed after the
// wake was accepted but before settling leaves the evidence; the next
// attempt settles delivered without calling the gateway again.
func TestOutboxSettlesAcceptedEvidenceWithoutResending(t *testing.T) {
	a := newFakeAgent(AgentCodex, 306)
	r := newRig(t, a)
	r.start(r.svc, HostOptions{})
	ctx := t.Context()
	_, cb := completedTurn(t, r, a, "agent:main:s1", "the answer")
	cs := r.st.(store.CallbackStore)
	now := time.Now().UnixMilli()
	held, _ := cs.ClaimCallback(ctx, cb.MessageID, "killed", now, now+1)
	held.Attempts = 1
	held.Wake = json.RawMessage(`{"status":"accepted","run_id":"clawconnect-callback:x"}`)
	if err := cs.SaveCallback(ctx, held); err != nil {
		t.Fatal(err)
	}
	gw := newFakeOpenClaw()
	c := &clock{now: time.Now().Add(time.Second)}
	x := newTestOutbox(r.st, gw, "o3", c.Now)
	if n, _ := x.DeliverDue(ctx); n != 1 {
		t.Fatal("not picked up")
	}
	got, _ := cs.GetCallback(ctx, cb.MessageID)
	if got.Status != store.CallbackDelivered || len(gw.calls) != 0 {
		t.Fatalf("callback %+v, calls %v", got, gw.calls)
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
	a := newFakeAgent(AgentCodex, 307)
	ft := &fakeTerminals{agents: []*fakeAgent{a}}
	r := &rig{t: t, st: st, ft: ft}
	r.svc = r.service()
	r.start(r.svc, HostOptions{})
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
	gw := newFakeOpenClaw()
	for _, owner := range []string{"restarted", "another"} {
		x := newTestOutbox(st2, gw, owner, time.Now)
		if _, err := x.DeliverDue(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := st2.GetCallback(t.Context(), cb.MessageID)
	if got.Status != store.CallbackDelivered || gw.count(CallbackMethod) != 1 || gw.runCount() != 1 {
		t.Fatalf("callback %+v, calls %v", got, gw.calls)
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
	a := newFakeAgent(AgentCodex, 309)
	r := newRig(t, a)
	r.start(r.svc, HostOptions{})
	ctx := t.Context()
	_, cb := completedTurn(t, r, a, "agent:main:s1", "the answer")
	r.stop()
	<-r.done
	reg := r.st.(registry)
	dead := self.Process("terminal host", 1)
	dead.ID, dead.Start = "killed-daemon", "another-boot:1" // our pid, another incarnation
	if err := reg.Heartbeat(ctx, dead); err != nil {
		t.Fatal(err)
	}
	cs := r.st.(store.CallbackStore)
	now := time.Now()
	if _, err := cs.ClaimCallback(ctx, cb.MessageID, dead.ID, now.UnixMilli(), now.Add(2*time.Minute).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	gw := newFakeOpenClaw()
	gw.ran = make(chan string, 4)
	x := NewOutbox(OutboxOptions{Store: cs, Dial: func(context.Context, string) (Caller, error) { return gw, nil }})
	h := r.start(r.svc, HostOptions{Rescan: time.Hour, LeaseTTL: time.Hour, Outbox: x})
	if x.Owner() != h.Owner() {
		t.Fatalf("outbox owner %q, host owner %q: a host proven dead would keep its attempts", x.Owner(), h.Owner())
	}
	select {
	case <-gw.ran:
	case <-time.After(30 * time.Second):
		t.Fatal("the dead host's attempt was not taken over (its lease has 2 minutes left)")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := cs.GetCallback(ctx, cb.MessageID)
		if err == nil && got.Status == store.CallbackDelivered {
			if got.LeaseOwner != h.Owner() || got.Attempts != 1 {
				t.Fatalf("delivered by %q after %d attempts", got.LeaseOwner, got.Attempts)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("callback = %+v, %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if gw.runCount() != 1 || gw.count(CallbackMethod) != 1 {
		t.Fatalf("calls %v", gw.calls)
	}
}

// TestStaleGenerationRefusesTheCallback: a Session re-bound while its Turn
// runs: the Turn either stalls (the monitor saw the new binding first) or
// completes (a check that read the old binding found the reply), and
// either callback is refused inside its write's transaction: nothing is
// queued for the origin session.
func TestStaleGenerationRefusesTheCallback(t *testing.T) {
	a := newFakeAgent(AgentCodex, 308)
	r := newRig(t, a)
	r.start(r.svc, HostOptions{})
	ctx := t.Context()
	res, err := r.svc.Send(ctx, SendRequest{TerminalID: a.pane.TerminalID, Request: "do it", OriginSession: "agent:main:s1"})
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
		return err == nil && (v.Status == store.TurnStalled || v.Status == store.TurnIdle)
	})
	cbs, _ := r.st.(store.CallbackStore).TurnCallbacks(ctx, res.TurnID, 10)
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
		if (cb.Status == store.CallbackPending || cb.Status == store.CallbackFailed) && cb.NextAttemptAt <= now && cb.LeaseUntil < now {
			out = append(out, &cb)
		}
	}
	return out, nil
}

func (m *memCallbacks) ClaimCallback(_ context.Context, id, owner string, now, until int64) (*store.Callback, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cb := m.cbs[id]
	if (cb.Status != store.CallbackPending && cb.Status != store.CallbackFailed) || (cb.LeaseOwner != owner && cb.LeaseUntil >= now) {
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
		id := callbackID("turn-x", "msg-x", "fp", "completed")
		cs := &memCallbacks{cbs: map[string]store.Callback{id: {MessageID: id, TurnID: "turn-20260101T000000-00000000",
			SessionID: "session-x", SessionKey: "agent:main:s1", Status: store.CallbackPending, NextAttemptAt: time.Now().UnixMilli(),
			Message: json.RawMessage(`{"id":"` + id + `","type":"done","body":"x","session_id":"session-x","turn_id":"turn-20260101T000000-00000000"}`)}}}
		gw := newFakeOpenClaw()
		gw.down = 2
		x := NewOutbox(OutboxOptions{Store: cs, Owner: "bubble", Poll: time.Second,
			Dial: func(context.Context, string) (Caller, error) { return gw, nil }})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		start := time.Now()
		go func() { _ = x.Run(ctx); close(done) }()
		var deliveredAfter time.Duration
		for range 60 {
			time.Sleep(time.Second)
			if got, _ := cs.GetCallback(ctx, id); got.Status == store.CallbackDelivered {
				deliveredAfter = time.Since(start)
				break
			}
		}
		cancel()
		<-done
		if deliveredAfter < 20*time.Second || deliveredAfter > 22*time.Second {
			t.Fatalf("delivered after %s, want 5 s + 15 s after the first attempt (calls %v)", deliveredAfter, gw.calls)
		}
		if gw.count(CallbackMethod) != 3 || gw.runCount() != 1 {
			t.Fatalf("calls %v", gw.calls)
		}
	})
}

// TestOutboxWarmConnectsBeforeTheFirstCallback: with WarmURL, Run connects
// to that gateway at once, and the first delivery reuses that client.
func TestOutboxWarmConnectsBeforeTheFirstCallback(t *testing.T) {
	t.Parallel()
	dialed := make(chan string, 2)
	const url = "ws://127.0.0.1:18789"
	x := NewOutbox(OutboxOptions{Store: &memCallbacks{cbs: map[string]store.Callback{}}, WarmURL: url, Poll: time.Hour,
		Dial: func(_ context.Context, url string) (Caller, error) { dialed <- url; return newFakeOpenClaw(), nil }})
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
	id := callbackID("turn-y", "msg-y", "fp", "completed")
	cs := &memCallbacks{cbs: map[string]store.Callback{id: {MessageID: id, TurnID: "turn-20260101T000000-00000001",
		SessionID: "session-y", SessionKey: "agent:main:s2", GatewayURL: live, Status: store.CallbackPending, NextAttemptAt: time.Now().UnixMilli(),
		Message: json.RawMessage(`{"id":"` + id + `","type":"done","body":"y","session_id":"session-y","turn_id":"turn-20260101T000000-00000001"}`)}}}
	gw := newFakeOpenClaw()
	dialing := make(chan struct{})
	x := NewOutbox(OutboxOptions{Store: cs, Owner: "o-iso", Poll: time.Hour,
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
	if got, _ := cs.GetCallback(ctx, id); got.Status != store.CallbackDelivered {
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
		id := callbackID("turn-z", n)
		return store.Callback{MessageID: id, TurnID: "turn-20260101T000000-00000002", SessionID: "session-z", SessionKey: "agent:main:s3",
			GatewayURL: url, Status: store.CallbackPending, NextAttemptAt: time.Now().UnixMilli(),
			Message: json.RawMessage(`{"id":"` + id + `","type":"done","body":"z","session_id":"session-z","turn_id":"turn-20260101T000000-00000002"}`)}
	}
	stuck, stuck2, later := cb("1", dead), cb("2", dead), cb("3", live)
	cs := &memCallbacks{cbs: map[string]store.Callback{stuck.MessageID: stuck}}
	gw := newFakeOpenClaw()
	gw.ran = make(chan string, 1)
	dialing := make(chan struct{})
	var dials atomic.Int32
	x := NewOutbox(OutboxOptions{Store: cs, Owner: "o-run", Poll: time.Hour,
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
	case <-gw.ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a callback to a live gateway waited for an attempt stuck on a dead one")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, c := range []store.Callback{stuck, stuck2} {
		if got, _ := cs.GetCallback(t.Context(), c.MessageID); got.Status == store.CallbackDelivered {
			t.Fatalf("a callback of the dead gateway was delivered: %+v", got)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("the dead gateway was dialled %d times while Run ran, want 1 (its callbacks wait for one dial)", n)
	}
}
