package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/google/go-cmp/cmp"
)

func TestDialHandshake(t *testing.T) {
	t.Parallel()
	dev, err := gateway.LoadOrCreateDevice(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		gw      fakegateway.Options
		opts    gateway.Options
		wantErr error // nil means success
	}{
		{"token", fakegateway.Options{Token: "t"}, gateway.Options{Token: "t"}, nil},
		{"password", fakegateway.Options{Password: "pw"}, gateway.Options{Password: "pw"}, nil},
		{"device signed", fakegateway.Options{Token: "t"}, gateway.Options{Token: "t", Device: dev}, nil},
		{"startup unavailable then ok", fakegateway.Options{Token: "t", Unavailable: 3}, gateway.Options{Token: "t"}, nil},
		{"wrong token", fakegateway.Options{Token: "t"}, gateway.Options{Token: "nope"}, gateway.ErrUnauthorized},
		{"no secret", fakegateway.Options{Token: "t"}, gateway.Options{}, gateway.ErrNotPaired},
		{"bad client id", fakegateway.Options{Token: "t"}, gateway.Options{Token: "t", ClientID: "akk"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := fakegateway.New(t, tt.gw)
			tt.opts.URL = gw.HTTPURL() // http:// is rewritten to ws://
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			c, err := gateway.Dial(ctx, tt.opts)
			if tt.name == "bad client id" {
				var ce *gateway.ConnectError
				if !errors.As(err, &ce) || ce.Code != "INVALID_REQUEST" {
					t.Fatalf("Dial = %v, want INVALID_REQUEST ConnectError", err)
				}
				return
			}
			if tt.wantErr != nil {
				var ce *gateway.ConnectError
				if !errors.Is(err, tt.wantErr) || !errors.As(err, &ce) || ce.Hint == "" {
					t.Fatalf("Dial = %v, want %v with a hint", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Dial: %v", err)
			}
			defer c.Close()
			h := c.Hello()
			want := []string{gateway.ScopeRead, gateway.ScopeWrite, gateway.ScopeAdmin}
			if diff := cmp.Diff(want, h.Scopes); diff != "" || h.Protocol != 4 || !h.HasMethod("agent.wait") {
				t.Errorf("hello = %+v (scopes diff %s)", h, diff)
			}
		})
	}
}

func TestDialHonoursContext(t *testing.T) {
	t.Parallel()
	gw := fakegateway.New(t, fakegateway.Options{Token: "t", Unavailable: 1 << 30})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err := gateway.Dial(ctx, gateway.Options{URL: gw.URL(), Token: "t"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial = %v, want deadline exceeded after UNAVAILABLE", err)
	}
}

func TestExtraHeaders(t *testing.T) {
	t.Parallel()
	gw := newGW(t, nil)
	h, err := gateway.ParseHeaders(`{"CF-Access-Client-Id":"id","n":1}`)
	if err != nil {
		t.Fatal(err)
	}
	dial(t, gw, func(o *gateway.Options) { o.Headers = h })
	got := gw.UpgradeHeaders()[0]
	if got.Get("Cf-Access-Client-Id") != "id" || got.Get("X-Forwarded-For") != gateway.SyntheticClientAddress {
		t.Errorf("upgrade headers = %v", got)
	}
}

func TestCall(t *testing.T) {
	t.Parallel()
	gw := newGW(t, nil)
	gw.Handle("test.echo", func(_ context.Context, p json.RawMessage) (any, error) {
		return map[string]any{"echo": p}, nil
	})
	gw.Handle("test.fail", func(context.Context, json.RawMessage) (any, error) {
		return nil, &fakegateway.Error{Code: "PLUGIN_FAILED", Message: "boom", Details: map[string]any{"x": 1}}
	})
	gw.Handle("test.silent", func(context.Context, json.RawMessage) (any, error) { return nil, fakegateway.ErrNoReply })
	c := dial(t, gw)
	ctx := waitCtx(t)

	t.Run("plugin method", func(t *testing.T) {
		got, err := c.Call(ctx, "test.echo", map[string]int{"x": 1})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(`{"echo":{"x":1}}`, string(got)); diff != "" {
			t.Error(diff)
		}
	})
	t.Run("rpc error", func(t *testing.T) {
		_, err := c.Call(ctx, "test.fail", nil)
		var re *gateway.RPCError
		if !errors.As(err, &re) || re.Code != "PLUGIN_FAILED" || re.Message != "boom" || string(re.Details) != `{"x":1}` {
			t.Fatalf("Call = %v, want PLUGIN_FAILED RPCError", err)
		}
	})
	t.Run("unknown method", func(t *testing.T) {
		_, err := c.Call(ctx, "no.such.method", nil)
		var re *gateway.RPCError
		if !errors.As(err, &re) || re.Code != "INVALID_REQUEST" {
			t.Fatalf("Call = %v", err)
		}
	})
	t.Run("never answers: per-call timeout", func(t *testing.T) {
		_, err := c.CallWith(ctx, "test.silent", nil, gateway.CallOptions{Timeout: 20 * time.Millisecond})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Call = %v, want deadline exceeded", err)
		}
	})
	t.Run("never answers: caller ctx", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := c.Call(cctx, "test.silent", nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Call = %v, want canceled", err)
		}
	})
	t.Run("bad params", func(t *testing.T) {
		if _, err := c.Call(ctx, "test.echo", json.RawMessage(`{"x":`)); err == nil {
			t.Fatal("want error for invalid JSON params")
		}
	})
	t.Run("two answers", func(t *testing.T) {
		var acks []string
		got, err := c.CallWith(ctx, "agent", map[string]any{"message": "m", "sessionKey": "two", "idempotencyKey": "two-1"},
			gateway.CallOptions{ExpectFinal: true, OnAccepted: func(p json.RawMessage) {
				var a struct{ Status string }
				_ = json.Unmarshal(p, &a)
				acks = append(acks, a.Status)
			}})
		if err != nil {
			t.Fatal(err)
		}
		var fin struct{ Status string }
		_ = json.Unmarshal(got, &fin)
		if diff := cmp.Diff([]string{"accepted"}, acks); diff != "" || fin.Status != "ok" {
			t.Errorf("acks %v final %s", acks, got)
		}
	})
	if st := c.Stats(); st.BadFrames != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestReconnect(t *testing.T) {
	t.Parallel()
	gw := newGW(t, nil)
	gw.Handle("test.silent", func(context.Context, json.RawMessage) (any, error) { return nil, fakegateway.ErrNoReply })
	c := dial(t, gw)
	ctx := waitCtx(t)
	var ticks atomic.Int32
	unsub := c.Subscribe(func(e gateway.Event) { ticks.Add(1) }, "custom.event")
	defer unsub()

	errc := make(chan error, 1)
	go func() {
		_, err := c.CallWith(ctx, "test.silent", nil, gateway.CallOptions{Timeout: -1})
		errc <- err
	}()
	poll.Until(t, 10*time.Second, "silent call to reach the gateway", func() bool { return gw.CountRequests("test.silent") == 1 })
	gw.DisconnectAll()
	if err := <-errc; !errors.Is(err, gateway.ErrDisconnected) {
		t.Fatalf("pending call = %v, want ErrDisconnected", err)
	}
	// A call made now waits for the reconnect and succeeds.
	if _, err := c.Call(ctx, "health", nil); err != nil {
		t.Fatalf("call after reconnect: %v", err)
	}
	if c.Stats().Reconnects < 1 || !c.Connected() {
		t.Errorf("stats = %+v", c.Stats())
	}
	// Subscriptions carry over to the new connection.
	gw.Broadcast([]byte(`{"type":"event","event":"custom.event","payload":{}}`))
	poll.Until(t, 10*time.Second, "event on the new connection", func() bool { return ticks.Load() == 1 })
}

func TestSessionSubscriptionResumes(t *testing.T) {
	t.Parallel()
	gw := newGW(t, nil)
	c := dial(t, gw)
	ctx := waitCtx(t)
	if err := c.SubscribeSession(ctx, "agent:main:x"); err != nil {
		t.Fatal(err)
	}
	gw.DisconnectAll()
	poll.Until(t, 10*time.Second, "resubscribe after reconnect", func() bool { return gw.CountRequests("sessions.messages.subscribe") == 2 })
	if err := c.UnsubscribeSession(ctx, "agent:main:x"); err != nil {
		t.Fatal(err)
	}
}

func TestWatchdogReconnectsSilentGateway(t *testing.T) {
	t.Parallel()
	gw := newGW(t, nil)
	c := dial(t, gw, func(o *gateway.Options) { o.TickTimeout = 40 * time.Millisecond })
	poll.Until(t, 10*time.Second, "watchdog reconnect", func() bool { return c.Stats().Reconnects >= 1 })
}

func TestHistoryWaitSessions(t *testing.T) {
	t.Parallel()
	gw := newGW(t, nil)
	c := dial(t, gw)
	ctx := waitCtx(t)
	run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "hist", Message: "question", IdempotencyKey: "h-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	run.Close()

	h, err := c.History(ctx, gateway.HistoryRequest{SessionKey: "hist", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Role, Text, RunID string }
	var got []row
	for _, m := range h.Messages {
		got = append(got, row{m.Role, m.Text, m.RunID})
	}
	want := []row{{"user", "question", ""}, {"assistant", "FAKE-REPLY: question", "h-1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if h.RunText("h-1") != "FAKE-REPLY: question" || h.TrailingAssistantText() != "FAKE-REPLY: question" {
		t.Errorf("RunText/Trailing wrong")
	}
	// maxChars is always sent.
	reqs := gw.Requests()
	var hp struct{ MaxChars int }
	for _, r := range reqs {
		if r.Method == "chat.history" {
			_ = json.Unmarshal(r.Params, &hp)
		}
	}
	if hp.MaxChars != 200000 {
		t.Errorf("maxChars = %d", hp.MaxChars)
	}

	w, err := c.WaitRun(ctx, "h-1", time.Second)
	if err != nil || w.Status != "ok" || w.ReplyText != "FAKE-REPLY: question" {
		t.Errorf("WaitRun = %+v, %v", w, err)
	}
	w, err = c.WaitRun(ctx, "unknown", time.Second)
	if err != nil || w.Status != "timeout" {
		t.Errorf("WaitRun unknown = %+v, %v", w, err)
	}

	list, err := c.ListSessions(ctx, gateway.ListSessionsRequest{Limit: 5})
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Key != "agent:main:hist" || list.Sessions[0].LastRunID != "h-1" {
		t.Errorf("ListSessions = %+v, %v", list, err)
	}
	s, err := c.DescribeSession(ctx, "hist")
	if err != nil || s == nil || s.Status != "done" {
		t.Errorf("DescribeSession = %+v, %v", s, err)
	}
	s, err = c.DescribeSession(ctx, "nobody")
	if err != nil || s != nil {
		t.Errorf("DescribeSession unknown = %+v, %v", s, err)
	}
}

func TestStartRunValidation(t *testing.T) {
	t.Parallel()
	gw := newGW(t, nil)
	c := dial(t, gw)
	_, err := c.StartRun(t.Context(), gateway.RunRequest{SessionKey: "x"})
	if !errors.Is(err, gateway.ErrInvalidRunRequest) {
		t.Errorf("StartRun = %v", err)
	}
}

func TestLoadOrCreateDevice(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "home")
	d1, err := gateway.LoadOrCreateDevice(home)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(home, gateway.DeviceFileName))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode = %v, want 0600", fi.Mode().Perm())
	}
	d2, err := gateway.LoadOrCreateDevice(home)
	if err != nil || d2.ID != d1.ID || len(d1.ID) != 64 {
		t.Errorf("reload gave %v, %v (first %s)", d2, err, d1.ID)
	}
}

// TestOversizedFrameDoesNotLoseRun: a frame above the read limit kills the
// socket (1009); the client reconnects and the run still gets its outcome.
func TestOversizedFrameDoesNotLoseRun(t *testing.T) {
	t.Parallel()
	gw := newGW(t, func(fakegateway.Submit) fakegateway.Turn { return fakegateway.Turn{Reply: "kept", Hold: true} })
	c := dial(t, gw, func(o *gateway.Options) { o.ReadLimit = 4096 })
	ctx := waitCtx(t)
	run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "big", Message: "m", IdempotencyKey: "big-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if err := gw.AwaitRun(ctx, "big-1"); err != nil {
		t.Fatal(err)
	}
	big := `{"type":"event","event":"chat","payload":{"runId":"big-1","pad":"` + strings.Repeat("x", 8192) + `"}}`
	gw.Broadcast([]byte(big))
	poll.Until(t, 10*time.Second, "reconnect after the oversized frame", func() bool { return c.Stats().Reconnects >= 1 })
	gw.Release("big-1")
	got, err := run.Wait(ctx)
	if err != nil || got.Status != gateway.StatusOK || got.Text != "kept" {
		t.Errorf("outcome = %+v, %v", got, err)
	}
}

// logBuffer collects log output from the Client's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestCloseIsNotLoggedAsLoss: a deliberate Close must not log a lost
// connection or a failed reconnect; a real loss must.
func TestCloseIsNotLoggedAsLoss(t *testing.T) {
	t.Parallel()
	const lost = "gateway connection lost"
	tests := []struct {
		name     string
		drop     bool // the gateway drops the connection before Close
		wantLost bool
	}{
		{"close", false, false},
		{"gateway drops then close", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := newGW(t, nil)
			var logs logBuffer
			c := dial(t, gw, func(o *gateway.Options) {
				o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			})
			if tt.drop {
				gw.DisconnectAll()
				poll.Until(t, 10*time.Second, "reconnect", func() bool { return c.Stats().Reconnects >= 1 && c.Connected() })
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			// Close waited for every Client goroutine: nothing logs after it.
			out := logs.String()
			if got := strings.Count(out, lost); (got > 0) != tt.wantLost || got > 1 {
				t.Errorf("%q logged %d times, want lost=%v; logs:\n%s", lost, got, tt.wantLost, out)
			}
			if strings.Contains(out, "reconnect failed") {
				t.Errorf("reconnect failure logged:\n%s", out)
			}
		})
	}
}

// TestEventsOutliveTheReadBuffer: the read loop reads every frame into one
// buffer, which the next frame overwrites; each event keeps its own frame's
// tool name and arguments.
func TestEventsOutliveTheReadBuffer(t *testing.T) {
	t.Parallel()
	gw := newGW(t, func(fakegateway.Submit) fakegateway.Turn { return fakegateway.Turn{Reply: "done", Hold: true} })
	c := dial(t, gw)
	ctx := waitCtx(t)
	var mu sync.Mutex
	var tools []gateway.RunEvent
	run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "buf", Message: "m", IdempotencyKey: "buf-1",
		OnEvent: func(e gateway.RunEvent) {
			if e.Kind == gateway.EventToolStart {
				mu.Lock()
				tools = append(tools, e)
				mu.Unlock()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	if err := gw.AwaitRun(ctx, "buf-1"); err != nil {
		t.Fatal(err)
	}
	type call struct{ Tool, Args string }
	var want []call
	for i := range 20 {
		// Frames of one length, so each is read into the same bytes.
		name, args := fmt.Sprintf("tool%02d", i), fmt.Sprintf(`{"path":"%s"}`, strings.Repeat(string(rune('a'+i)), 64))
		want = append(want, call{name, args})
		gw.Broadcast(fmt.Appendf(nil, `{"type":"event","event":"agent","payload":{"runId":"buf-1","seq":%d,"stream":"tool","data":{"phase":"start","name":"%s","toolCallId":"c%02d","args":%s}}}`,
			10+i, name, i, args))
	}
	gw.Release("buf-1")
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var got []call
	for _, e := range tools {
		got = append(got, call{e.Tool, string(e.Args)})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool events (-sent +kept):\n%s", diff)
	}
}
