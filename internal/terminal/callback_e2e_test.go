package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
	"github.com/clawconnect/clawconnect/plugins/openclaw"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestCallbackIntoRealGateway: the real gateway 2026.9.6 with the
// ClawConnect plugin loaded; a Turn sent from session S completes, the
// outbox delivers its callback through clawconnect.callback and chat.send,
// and S gets exactly one new run whose user message carries the callback
// and the agent's reply. Then: a replay is deduplicated by OpenClaw; bad
// params are refused with CLAWCONNECT_CALLBACK_FAILED; with the gateway
// stopped the delivery fails, is retried after 5 s and delivered once when
// the gateway is back.
func TestCallbackIntoRealGateway(t *testing.T) {
	if os.Getenv("CLAWCONNECT_E2E") != "1" {
		t.Skip("set CLAWCONNECT_E2E=1 to run against the real OpenClaw gateway")
	}
	// A start and a restart each took over three minutes on a loaded
	// 2-core machine (one run took 523 s in all).
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	g, err := realgateway.Start(ctx, realgateway.Options{
		Plugins: []realgateway.Plugin{{ID: "clawconnect", Dir: openclaw.Dir(), Config: map[string]any{"daemon": false}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if !strings.Contains(string(g.Hello()), `"`+outbox.CallbackMethod+`"`) {
		t.Fatalf("hello-ok does not list %s: the plugin did not load\n%s", outbox.CallbackMethod, g.LogTail(60))
	}
	// The outbox's client, kept so that the retries below are spent only
	// once it has reconnected.
	var outboxClient atomic.Pointer[gateway.Client]
	dial := func(ctx context.Context, _ string) (outbox.Caller, error) {
		c, err := gateway.Dial(ctx, gateway.Options{URL: g.URL(), Token: g.Token(), CallTimeout: 5 * time.Second})
		if err == nil {
			outboxClient.Store(c)
		}
		return c, err
	}
	// chat.history was seen taking 34 s on a loaded machine: give reads
	// the test's own budget rather than the client's 30 s default.
	gc, err := gateway.Dial(ctx, gateway.Options{URL: g.URL(), Token: g.Token(), CallTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()

	a := newFakeAgent(termapi.AgentCodex, 401)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	const S = "agent:main:cc-callback-s"
	const other = "agent:main:cc-callback-other"
	turnID, cb := completedTurn(t, r, a, S, "FAKE-REPLY: callback e2e 7f3a")
	c := &clock{now: time.Now()}
	x := outbox.New(outbox.Options{Store: r.st, Owner: "e2e", Now: c.Now, Dial: dial, WaitTimeout: 60 * time.Second})
	defer x.Close()
	if n, err := x.DeliverDue(ctx); err != nil || n != 1 {
		t.Fatalf("deliver: %d, %v", n, err)
	}
	got, _ := r.st.GetCallback(ctx, cb.MessageID)
	if got.Status != termapi.CallbackDelivered || !outbox.Accepted(got.Wake) {
		t.Fatalf("callback %s: %s (injection %s wake %s)", got.MessageID, got.Status, got.Injection, got.Wake)
	}
	var wake struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal(got.Wake, &wake)
	t.Logf("delivered %s: wake %s, observation %s", cb.MessageID, got.Wake, got.RunObservation)
	callbackRuns := func(key, marker string) (n int, text string, err error) {
		h, err := gc.History(ctx, gateway.HistoryRequest{SessionKey: key, Limit: 200})
		if err != nil {
			return 0, "", err
		}
		for _, m := range h.Messages {
			if m.Role == "user" && strings.Contains(m.Text, "[ClawConnect callback]") && strings.Contains(m.Text, marker) {
				n++
				text = m.Text
			}
		}
		return n, text, nil
	}
	// The run's user message is in the history once the run has started.
	waitCallback := func(marker string) (n int, text string) {
		var err error
		if !poll.WithinEvery(60*time.Second, 200*time.Millisecond, func() bool {
			n, text, err = callbackRuns(S, marker)
			return n > 0
		}) {
			t.Logf("chat.history of S has no callback message with %q (last error: %v)", marker, err)
		}
		return n, text
	}
	// noCallbackIn fails the test unless key's history reads and holds no
	// callback message with marker.
	noCallbackIn := func(key, marker string) {
		t.Helper()
		if n, _, err := callbackRuns(key, marker); err != nil || n != 0 {
			t.Fatalf("chat.history of %s: %d callback messages with %q, %v\n%s", key, n, marker, err, g.LogTail(40))
		}
	}
	n, text := waitCallback("FAKE-REPLY: callback e2e 7f3a")
	if n != 1 || !strings.Contains(text, "Turn: "+turnID) || !strings.Contains(text, "Message type: done") {
		t.Fatalf("chat.history of S: %d callback messages, last %q", n, text)
	}
	t.Logf("S received (excerpt): %.400s", text)
	noCallbackIn(other, "callback e2e")
	// A replay with the same ids is deduplicated by OpenClaw.
	raw, err := gc.Call(ctx, outbox.CallbackMethod, outbox.Params(got))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replayed plan: %.600s", raw)
	p, err := outbox.ParsePlan(raw, got)
	if err != nil {
		t.Fatal(err)
	}
	ack, err := gc.Call(ctx, "chat.send", p.ChatSend)
	if err != nil || !strings.Contains(string(ack), wake.RunID) {
		t.Fatalf("replayed chat.send: %s, %v", ack, err)
	}
	if n, _, err := callbackRuns(S, "FAKE-REPLY: callback e2e 7f3a"); err != nil || n != 1 {
		t.Fatalf("after a replay S has %d callback messages (%v)\n%s", n, err, g.LogTail(40))
	}

	// Bad params: CLAWCONNECT_CALLBACK_FAILED, nothing reaches S.
	bad := []map[string]any{
		{"sessionKey": S},
		{"sessionKey": S, "session_id": got.SessionID, "turn_id": got.TurnID, "message": map[string]any{"id": 42}},
		func() map[string]any {
			p := outbox.Params(got)
			p["session_id"] = "session-other"
			return p
		}(),
		func() map[string]any {
			p := outbox.Params(got)
			p["sessionKey"] = other
			return p
		}(),
	}
	for i, params := range bad {
		_, err := gc.Call(ctx, outbox.CallbackMethod, params)
		var re *gateway.RPCError
		if !errors.As(err, &re) || re.Code != "CLAWCONNECT_CALLBACK_FAILED" || re.Message == "" {
			t.Fatalf("bad params %d: %v", i, err)
		}
	}
	noCallbackIn(other, "callback e2e")

	// The gateway is down during delivery: failed, retried, delivered once.
	turn2, cb2 := completedTurn(t, r, a, S, "FAKE-REPLY: after restart 9c1d")
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	c.add(time.Since(c.Now()))
	if n, _ := x.DeliverDue(ctx); n != 1 {
		t.Fatal("no attempt while the gateway is down")
	}
	got2, _ := r.st.GetCallback(ctx, cb2.MessageID)
	if got2.Status != termapi.CallbackFailed || got2.Attempts != 1 || got2.LastError == "" {
		t.Fatalf("with the gateway down: %+v", got2)
	}
	v, _ := r.svc.Status(ctx, turn2)
	t.Logf("status while down: %+v", v.CallbackDelivery)
	if err := g.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	c.add(5 * time.Second)
	for {
		// The retries run on the test's clock, far faster than real time:
		// spend one only once the gateway accepts a handshake and the
		// outbox's client has reconnected (its backoff runs in real time,
		// and a gateway down for long under load stretches it past the
		// attempts the test's clock allows). After ready the gateway may
		// close its listener again for minutes on a loaded machine;
		// WaitReady rides that out, and fails at once, with the gateway's
		// output, if the process ended.
		if err := g.WaitReady(ctx); err != nil {
			t.Fatalf("the restarted gateway does not serve: %v", err)
		}
		if !poll.WithinEvery(2*time.Minute, 100*time.Millisecond, func() bool { return outboxClient.Load().Connected() }) {
			continue // the gateway closed its listener again: wait for it once more
		}
		if _, err := x.DeliverDue(ctx); err != nil {
			t.Fatal(err)
		}
		got2, _ = r.st.GetCallback(ctx, cb2.MessageID)
		if got2.Status != termapi.CallbackFailed {
			break
		}
		c.add(60 * time.Second) // the client reconnects in the background
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	if got2.Status != termapi.CallbackDelivered {
		t.Fatalf("after the gateway came back: %+v\n%s", got2, g.LogTail(60))
	}
	if n, _ := waitCallback("FAKE-REPLY: after restart 9c1d"); n != 1 {
		t.Fatalf("S has %d callback messages for the second Turn\n%s", n, g.LogTail(60))
	}

	// A Session re-bound (generation advanced) before the callback is
	// prepared: the Turn stalls, its callback is refused, and nothing
	// reaches S however long the outbox runs.
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "do it", OriginSession: S})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := r.st.GetTermSession(ctx, res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	nb := *sess.Binding
	nb.BindingID, nb.Generation = "binding-rebound-e2e", sess.Binding.Generation+1
	sess.Binding = &nb
	if err := r.st.SaveTermSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	a.finish("FAKE-REPLY: stale generation 3e8b", false)
	r.waitStatus(res.TurnID, termapi.TurnStalled)
	if cbs, _ := r.st.TurnCallbacks(ctx, res.TurnID, 10); len(cbs) != 0 {
		t.Fatalf("a stale generation queued %+v", cbs)
	}
	c.add(time.Hour)
	if n, err := x.DeliverDue(ctx); err != nil || n != 0 {
		t.Fatalf("the outbox attempted %d callbacks after a stale generation (%v)", n, err)
	}
	if v, _ := r.svc.Status(ctx, res.TurnID); v.CallbackDelivery != nil {
		t.Fatalf("a refused callback shows delivery state %+v", v.CallbackDelivery)
	}
	if h, err := gc.History(ctx, gateway.HistoryRequest{SessionKey: S, Limit: 200}); err != nil {
		t.Fatal(err)
	} else {
		for _, m := range h.Messages {
			if strings.Contains(m.Text, res.TurnID) || strings.Contains(m.Text, "stale generation 3e8b") {
				t.Fatalf("S received the refused callback: %s", m.Text)
			}
		}
	}
}
