package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
	"github.com/google/go-cmp/cmp"
)

// TestE2ERealGateway drives the client against a real openclaw@2026.9.6
// gateway (CLAWCONNECT_E2E=1). Subtests run in order and share one gateway;
// the restart subtest runs last.
func TestE2ERealGateway(t *testing.T) {
	g := realgateway.Shared(t)
	nonce := fmt.Sprintf("%x", time.Now().UnixNano())
	key := func(name string) string { return "agent:main:e2e-" + name + "-" + nonce }
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	c, err := gateway.Dial(ctx, gateway.Options{URL: g.HTTPURL(), Token: g.Token(),
		MinReconnectDelay: 250 * time.Millisecond, MaxReconnectDelay: 2 * time.Second,
		// The real gateway re-runs the interrupted turn itself after a
		// restart (slowly on a busy machine); never race it with a resubmit.
		RestartGrace: 15 * time.Minute,
		// Shared CI machines run several real gateways at once; give calls room.
		CallTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer c.Close()

	t.Run("handshake with token", func(t *testing.T) {
		h := c.Hello()
		want := []string{gateway.ScopeRead, gateway.ScopeWrite, gateway.ScopeAdmin}
		if diff := cmp.Diff(want, h.Scopes); diff != "" {
			t.Errorf("granted scopes (-want +got):\n%s", diff)
		}
		if h.Protocol != gateway.Protocol || h.Role != "operator" || h.BootID == "" || h.DefaultAgentID != "main" {
			t.Errorf("hello = %+v", h)
		}
		for _, m := range []string{"agent", "agent.wait", "chat.history", "sessions.abort", realgateway.EchoMethod} {
			if !h.HasMethod(m) {
				t.Errorf("gateway does not offer %s", m)
			}
		}
		_, err := gateway.Dial(ctx, gateway.Options{URL: g.URL(), Token: "wrong-token"})
		var ce *gateway.ConnectError
		if !errors.Is(err, gateway.ErrUnauthorized) || !errors.As(err, &ce) || ce.DetailCode != "AUTH_TOKEN_MISMATCH" {
			t.Errorf("wrong token: Dial = %v, want ErrUnauthorized (AUTH_TOKEN_MISMATCH)", err)
		}
	})

	t.Run("full turn", func(t *testing.T) {
		got, kinds := runToEnd(ctx, t, c, gateway.RunRequest{SessionKey: key("turn"), Message: "ECHO=e2e-final-" + nonce,
			IdempotencyKey: "turn-" + nonce})
		if got.Status != gateway.StatusOK || got.Text != "e2e-final-"+nonce || got.RunID != "turn-"+nonce {
			t.Errorf("outcome = %+v", got)
		}
		wantRunEvents(t, "full turn", kinds)
	})

	t.Run("session-scoped events reach only the following client", func(t *testing.T) {
		dialAs := func(caps []string) *gateway.Client {
			o, err := gateway.Dial(ctx, gateway.Options{URL: g.HTTPURL(), Token: g.Token(), Caps: caps, CallTimeout: 2 * time.Minute})
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			t.Cleanup(func() { o.Close() })
			return o
		}
		if !c.SessionScoped() {
			t.Fatalf("the client is not session-scoped on the real gateway; methods %v", c.Hello().Methods)
		}
		bystander := dialAs(nil)
		legacy := dialAs([]string{gateway.CapToolEvents}) // declares no scoping: gets every event
		seen, seenLegacy := countRunEvents(bystander), countRunEvents(legacy)
		id := "scoped-" + nonce
		got, kinds := runToEnd(ctx, t, c, gateway.RunRequest{SessionKey: key("scoped"), Message: "ECHO=e2e-scoped-" + nonce,
			IdempotencyKey: id})
		if got.Status != gateway.StatusOK || got.Text != "e2e-scoped-"+nonce {
			t.Fatalf("outcome = %+v", got)
		}
		wantRunEvents(t, "the following client's run", kinds)
		// The gateway writes an event to all its recipients at once: once
		// the legacy client has the final, the bystander had it too, before
		// the answer to a later call.
		poll.Until(t, 10*time.Second, "the legacy client sees the run's final", func() bool { return seenLegacy.final(id) })
		if _, err := bystander.Call(ctx, "health", nil); err != nil {
			t.Fatal(err)
		}
		if n := seen.of(id); n != 0 {
			t.Errorf("a second session-scoped client received %d events of the first's run", n)
		}
		t.Logf("events of the run: legacy client %d, session-scoped bystander %d", seenLegacy.of(id), seen.of(id))
	})

	t.Run("a run continuing a session gets its events through the lingering subscription", func(t *testing.T) {
		for i := range 2 {
			id := fmt.Sprint("linger-", i, "-", nonce)
			got, kinds := runToEnd(ctx, t, c, gateway.RunRequest{SessionKey: key("linger"), Message: "ECHO=e2e-linger-" + nonce,
				IdempotencyKey: id})
			if got.Status != gateway.StatusOK || got.Text != "e2e-linger-"+nonce {
				t.Fatalf("run %d: outcome = %+v", i, got)
			}
			wantRunEvents(t, fmt.Sprint("run ", i, " in the session"), kinds)
		}
	})

	t.Run("history read", func(t *testing.T) {
		h, err := c.History(ctx, gateway.HistoryRequest{SessionKey: key("turn"), Limit: 20})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.RunText("turn-" + nonce); got != "e2e-final-"+nonce {
			t.Errorf("RunText = %q; messages %+v", got, h.Messages)
		}
		if len(h.Messages) < 2 || h.Messages[0].Role != "user" || !strings.Contains(h.Messages[0].Text, "ECHO=e2e-final-") {
			t.Errorf("messages = %+v", h.Messages)
		}
		s, err := c.DescribeSession(ctx, key("turn"))
		if err != nil || s == nil || s.Key != key("turn") {
			t.Errorf("DescribeSession = %+v, %v", s, err)
		}
		list, err := c.ListSessions(ctx, gateway.ListSessionsRequest{Limit: 50})
		if err != nil || !containsSession(list, key("turn")) {
			t.Errorf("ListSessions = %+v, %v", list, err)
		}
	})

	t.Run("abort confirmed", func(t *testing.T) {
		started := make(chan struct{}, 1)
		run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: key("abort"), Message: "HANG until aborted",
			IdempotencyKey: "abort-" + nonce, OnEvent: func(e gateway.RunEvent) {
				if e.Kind == gateway.EventAssistant {
					select {
					case started <- struct{}{}:
					default:
					}
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("run never streamed")
		}
		res, err := run.Abort(ctx)
		if err != nil || !res.Aborted {
			t.Fatalf("Abort = %+v, %v", res, err)
		}
		got, err := run.Wait(ctx)
		if err != nil || got.Status != gateway.StatusAborted {
			t.Errorf("outcome = %+v, %v; want aborted", got, err)
		}
		w, err := c.WaitRun(ctx, run.ID(), 5*time.Second)
		// chat.send runs report error "aborted"; agent runs stopReason "rpc".
		if err != nil || w.Status != "error" || (w.Error != "aborted" && w.StopReason != "rpc") {
			t.Errorf("agent.wait after abort = %+v, %v", w, err)
		}
	})

	t.Run("idempotent resubmit yields one run", func(t *testing.T) {
		prompt := "WAIT=1500 ECHO=idem-" + nonce
		req := gateway.RunRequest{SessionKey: key("idem"), Message: prompt, IdempotencyKey: "idem-" + nonce}
		r1, err := c.StartRun(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		defer r1.Close()
		r2, err := c.StartRun(ctx, req) // while the first is running
		if err != nil {
			t.Fatal(err)
		}
		defer r2.Close()
		for _, r := range []*gateway.Run{r1, r2} {
			got, err := r.Wait(ctx)
			if err != nil || got.Text != "idem-"+nonce || got.RunID != "idem-"+nonce {
				t.Errorf("outcome = %+v, %v", got, err)
			}
		}
		r3, err := c.StartRun(ctx, req) // after it ended
		if err != nil {
			t.Fatal(err)
		}
		defer r3.Close()
		if got, err := r3.Wait(ctx); err != nil || got.Text != "idem-"+nonce {
			t.Errorf("resubmit after end = %+v, %v", got, err)
		}
		n := 0
		for _, r := range g.ModelServer().Requests() {
			if strings.Contains(r.Prompt, "ECHO=idem-"+nonce) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("model was called %d times for the prompt, want 1", n)
		}
		h, err := c.History(ctx, gateway.HistoryRequest{SessionKey: key("idem")})
		if err != nil {
			t.Fatal(err)
		}
		users := 0
		for _, m := range h.Messages {
			if m.Role == "user" {
				users++
			}
		}
		if users != 1 {
			t.Errorf("transcript has %d user rows, want 1: %+v", users, h.Messages)
		}
	})

	t.Run("plugin method", func(t *testing.T) {
		raw, err := c.Call(ctx, realgateway.EchoMethod, map[string]any{"x": 1, "s": "hi"})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Echo map[string]any `json:"echo"`
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]any{"x": float64(1), "s": "hi"}, got.Echo); diff != "" {
			t.Errorf("echo (-want +got):\n%s", diff)
		}
		_, err = c.Call(ctx, realgateway.FailMethod, map[string]any{"message": "nope"})
		var re *gateway.RPCError
		if !errors.As(err, &re) || re.Code != "CLAWCONNECT_TEST_FAILED" || re.Message != "nope" {
			t.Errorf("fail method = %v", err)
		}
	})

	t.Run("reconnect after restart mid-run", func(t *testing.T) {
		// The model answers only after 15 s, so the run is still in flight
		// when the gateway goes down (SIGTERM lets short runs finish first);
		// the run the new gateway redoes is answered at once (WAITONCE).
		prompt := "WAITONCE=15000 ECHO=restart-" + nonce
		var phases []string
		run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: key("restart"), Message: prompt,
			IdempotencyKey: "restart-" + nonce, OnEvent: func(e gateway.RunEvent) {
				if e.Kind == gateway.EventRecovering {
					phases = append(phases, e.Phase)
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer run.Close()
		// Wait until the model call is in flight, then restart the gateway.
		if _, err := g.ModelServer().WaitRequest(ctx, func(r fakemodel.Request) bool {
			return strings.Contains(r.Prompt, "ECHO=restart-"+nonce)
		}); err != nil {
			t.Fatal(err)
		}
		oldBoot := c.Hello().BootID
		if err := g.Restart(ctx); err != nil {
			t.Fatalf("restart: %v", err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 6*time.Minute)
		defer wcancel()
		got, err := run.Wait(wctx)
		if err != nil {
			t.Errorf("Wait: %v (recovery phases %v)", err, phases)
			if h, herr := c.History(ctx, gateway.HistoryRequest{SessionKey: key("restart")}); herr == nil {
				for _, m := range h.Messages {
					t.Logf("history row: role=%s runId=%s idem=%s text=%q", m.Role, m.RunID, m.IdempotencyKey, truncateLine(m.Text))
				}
				t.Logf("session info: %+v", h.Session)
			}
			logGatewayLines(t, g, "restart", "recovery", nonce)
			t.FailNow()
		}
		if got.Status != gateway.StatusOK || got.Text != "restart-"+nonce || got.Resubmitted != 0 {
			t.Errorf("outcome = %+v", got)
			logGatewayLines(t, g, "restart", "recovery")
		}
		if c.Hello().BootID == oldBoot || c.Stats().Reconnects < 1 {
			t.Errorf("no reconnect to a new gateway process: boot %s→%s, stats %+v", oldBoot, c.Hello().BootID, c.Stats())
		}
		t.Logf("outcome %+v; recovery phases %v", got, phases)
		// The client is usable again.
		if _, err := c.Call(ctx, "health", nil); err != nil {
			t.Errorf("health after restart: %v", err)
		}
	})
}

// logGatewayLines logs the gateway log lines that mention any of words.
func logGatewayLines(t *testing.T, g *realgateway.Gateway, words ...string) {
	data, err := os.ReadFile(g.LogPath())
	if err != nil {
		t.Logf("read gateway log: %v", err)
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		for _, w := range words {
			if strings.Contains(line, w) {
				t.Log(truncateLine(line))
				break
			}
		}
	}
}

func truncateLine(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

func containsKind(ks []gateway.EventKind, k gateway.EventKind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

func containsSession(l *gateway.SessionList, key string) bool {
	if l == nil {
		return false
	}
	for _, s := range l.Sessions {
		if s.Key == key {
			return true
		}
	}
	return false
}
