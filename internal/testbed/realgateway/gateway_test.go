package realgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
)

func TestMain(m *testing.M) { Main(m) }

// fakeGatewayWS is a scripted stand-in for the gateway's handshake: it
// answers the first `unavailable` connects with UNAVAILABLE, then hello-ok
// when the token matches.
func fakeGatewayWS(t *testing.T, token string, unavailable int) *httptest.Server {
	t.Helper()
	attempts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx := r.Context()
		_ = ws.Write(ctx, websocket.MessageText, []byte(`{"type":"event","event":"connect.challenge","payload":{"nonce":"n","ts":1}}`))
		for {
			_, data, err := ws.Read(ctx)
			if err != nil {
				return
			}
			var req struct {
				ID     string `json:"id"`
				Method string `json:"method"`
				Params struct {
					Auth struct {
						Token string `json:"token"`
					} `json:"auth"`
				} `json:"params"`
			}
			_ = json.Unmarshal(data, &req)
			var res string
			switch {
			case req.Method != "connect":
				res = fmt.Sprintf(`{"type":"res","id":%q,"ok":true,"payload":{"method":%q}}`, req.ID, req.Method)
				_ = ws.Write(ctx, websocket.MessageText, []byte(`{"type":"event","event":"tick","payload":{}}`))
			case attempts < unavailable:
				attempts++
				res = fmt.Sprintf(`{"type":"res","id":%q,"ok":false,"error":{"code":"UNAVAILABLE","message":"gateway starting; retry shortly","retryable":true,"retryAfterMs":1}}`, req.ID)
			case req.Params.Auth.Token != token:
				res = fmt.Sprintf(`{"type":"res","id":%q,"ok":false,"error":{"code":"INVALID_REQUEST","message":"unauthorized: gateway token mismatch"}}`, req.ID)
			default:
				res = fmt.Sprintf(`{"type":"res","id":%q,"ok":true,"payload":{"type":"hello-ok","protocol":4,"features":{"methods":["health","x.y"]}}}`, req.ID)
			}
			if err := ws.Write(ctx, websocket.MessageText, []byte(res)); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func wsURL(srv *httptest.Server) string { return "ws" + strings.TrimPrefix(srv.URL, "http") }

func TestWaitReadyRetriesStartingGateway(t *testing.T) {
	srv := fakeGatewayWS(t, "tok", 2)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	hello, err := waitReady(ctx, wsURL(srv), "tok", make(chan struct{}))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(hello), `"hello-ok"`) {
		t.Errorf("hello = %s", hello)
	}
}

func TestWaitReadyStopsOnWrongToken(t *testing.T) {
	srv := fakeGatewayWS(t, "tok", 0)
	_, err := waitReady(t.Context(), wsURL(srv), "bad", make(chan struct{}))
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.Code != "INVALID_REQUEST" {
		t.Fatalf("waitReady with a wrong token = %v, want INVALID_REQUEST", err)
	}
}

func TestWaitReadyStopsWhenProcessExits(t *testing.T) {
	exited := make(chan struct{})
	close(exited)
	// Nothing listens on this port: every dial is refused.
	port, err := freePort(0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = waitReady(t.Context(), fmt.Sprintf("ws://127.0.0.1:%d", port), "tok", exited)
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("waitReady = %v, want the process-exited error", err)
	}
}

func TestProbeCall(t *testing.T) {
	srv := fakeGatewayWS(t, "tok", 0)
	p, err := DialProbe(t.Context(), wsURL(srv), "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if diff := cmp.Diff([]string{"health", "x.y"}, p.Methods()); diff != "" {
		t.Errorf("methods (-want +got):\n%s", diff)
	}
	got, err := p.Call(t.Context(), "x.y", map[string]int{"a": 1})
	if err != nil || string(got) != `{"method":"x.y"}` {
		t.Errorf("Call = %s, %v", got, err)
	}
}

func TestWriteFiles(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	g := &Gateway{dir: t.TempDir(), port: 41234, token: "tok-1", model: model}
	if err := g.writeFiles(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(g.ConfigPath())
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Gateway struct {
			Mode, Bind string
			Port       int
			Auth       struct{ Mode, Token string }
		}
		Models struct {
			CatalogRefresh struct{ Enabled bool }
			Providers      map[string]struct {
				BaseURL string `json:"baseUrl"`
				API     string `json:"api"`
			}
		}
		Agents struct {
			Defaults struct {
				Model struct{ Primary string }
			}
		}
		Plugins struct {
			Load struct{ Paths []string }
		}
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Gateway.Mode != "local" || cfg.Gateway.Bind != "loopback" || cfg.Gateway.Port != 41234 ||
		cfg.Gateway.Auth.Mode != "token" || cfg.Gateway.Auth.Token != "tok-1" {
		t.Errorf("gateway section = %+v", cfg.Gateway)
	}
	if cfg.Models.CatalogRefresh.Enabled {
		t.Error("catalog refresh enabled: the gateway would reach the network")
	}
	if p := cfg.Models.Providers[Provider]; p.BaseURL != model.OpenAIBaseURL() || p.API != "openai-completions" {
		t.Errorf("provider %s = %+v", Provider, p)
	}
	if p := cfg.Models.Providers[AnthropicProvider]; p.BaseURL != model.AnthropicBaseURL() || p.API != "anthropic-messages" {
		t.Errorf("provider %s = %+v", AnthropicProvider, p)
	}
	if cfg.Agents.Defaults.Model.Primary != "fake/fake-model" {
		t.Errorf("primary model = %q", cfg.Agents.Defaults.Model.Primary)
	}
	for _, f := range []string{"openclaw.plugin.json", "package.json", "index.mjs"} {
		path := filepath.Join(cfg.Plugins.Load.Paths[0], f)
		if _, err := os.Stat(path); err != nil {
			t.Errorf("plugin file: %v", err)
		}
	}
}

func TestEnvironmentDropsInheritedOpenClawSettings(t *testing.T) {
	t.Setenv("OPENCLAW_GATEWAY_TOKEN", "leak")
	g := &Gateway{dir: "/d"}
	g.cmd.Env = []string{"PATH=/node/bin:/usr/bin"}
	env := g.environment([]string{"X=1"})
	if slices.Contains(env, "OPENCLAW_GATEWAY_TOKEN=leak") {
		t.Error("inherited OPENCLAW_GATEWAY_TOKEN")
	}
	for _, want := range []string{"HOME=/d/home", "OPENCLAW_STATE_DIR=/d/state", "OPENCLAW_SKIP_CHANNELS=1",
		"OPENCLAW_SKIP_CRON=1", "PATH=/node/bin:/usr/bin", "X=1"} {
		if !slices.Contains(env, want) {
			t.Errorf("environment lacks %s", want)
		}
	}
}

// --- end-to-end, against the real gateway ---

func dial(t *testing.T, g *Gateway) *Probe {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, err := g.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestRealHandshakeAndPluginMethods(t *testing.T) {
	t.Parallel() // the shared gateway serves them together; TestRealRestart runs first, alone
	g := Shared(t)
	p := dial(t, g)
	methods := p.Methods()
	for _, m := range []string{"agent", "agent.wait", "chat.send", "chat.history", EchoMethod, FailMethod} {
		if !slices.Contains(methods, m) {
			t.Errorf("hello-ok does not offer %s", m)
		}
	}
	var hello struct {
		Protocol int `json:"protocol"`
		Auth     struct {
			Scopes []string `json:"scopes"`
		} `json:"auth"`
	}
	if err := json.Unmarshal(p.Hello(), &hello); err != nil {
		t.Fatal(err)
	}
	if hello.Protocol != 4 || !slices.Contains(hello.Auth.Scopes, "operator.admin") {
		t.Errorf("hello-ok protocol %d scopes %v", hello.Protocol, hello.Auth.Scopes)
	}

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	got, err := p.Call(ctx, EchoMethod, map[string]any{"x": 1})
	if err != nil {
		t.Fatal(err)
	}
	var echo struct {
		Echo   map[string]int `json:"echo"`
		Client struct {
			ID string `json:"id"`
		} `json:"client"`
	}
	if err := json.Unmarshal(got, &echo); err != nil {
		t.Fatal(err)
	}
	if echo.Echo["x"] != 1 || echo.Client.ID != "gateway-client" {
		t.Errorf("%s answered %s", EchoMethod, got)
	}
	_, err = p.Call(ctx, FailMethod, map[string]any{"message": "nope"})
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.Code != "CLAWCONNECT_TEST_FAILED" || pe.Message != "nope" {
		t.Errorf("%s = %v, want CLAWCONNECT_TEST_FAILED nope", FailMethod, err)
	}
}

func TestRealWrongTokenRefused(t *testing.T) {
	t.Parallel() // the shared gateway serves them together; TestRealRestart runs first, alone
	g := Shared(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := DialProbe(ctx, g.URL(), "wrong-token")
	var pe *ProbeError
	if !errors.As(err, &pe) || pe.Retryable {
		t.Fatalf("connect with a wrong token = %v, want a non-retryable refusal", err)
	}
}

// runSeq numbers the runs' idempotency keys.
var runSeq atomic.Int64

// turn runs one agent turn through the agent RPC and agent.wait and returns
// the final reply text.
func turn(t *testing.T, p *Probe, session, message string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	key := fmt.Sprintf("rg-%d-%d", time.Now().UnixNano(), runSeq.Add(1)) // unique among parallel tests
	ack, err := p.Call(ctx, "agent", map[string]any{"message": message, "sessionKey": session, "idempotencyKey": key})
	if err != nil {
		t.Fatalf("agent: %v", err)
	}
	var a struct {
		RunID  string `json:"runId"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(ack, &a); err != nil || a.RunID != key {
		t.Fatalf("agent ack %s (%v), want runId %s", ack, err, key)
	}
	res, err := p.Call(ctx, "agent.wait", map[string]any{"runId": key, "timeoutMs": 120000})
	if err != nil {
		t.Fatalf("agent.wait: %v", err)
	}
	var w struct {
		Status        string `json:"status"`
		TerminalReply struct {
			Text string `json:"text"`
		} `json:"terminalReply"`
	}
	if err := json.Unmarshal(res, &w); err != nil || w.Status != "ok" {
		t.Fatalf("agent.wait = %s (%v)", res, err)
	}
	return w.TerminalReply.Text
}

func TestRealTurnReachesFakeModel(t *testing.T) {
	t.Parallel() // the shared gateway serves them together; TestRealRestart runs first, alone
	g := Shared(t)
	p := dial(t, g)
	start := time.Now()
	if got := turn(t, p, "agent:main:realgateway-turn", "hello ECHO=realgateway-turn-ok"); got != "realgateway-turn-ok" {
		t.Errorf("final text = %q, want realgateway-turn-ok", got)
	}
	t.Logf("first turn took %v", time.Since(start).Round(time.Millisecond))
	r := g.ModelServer().MustWaitRequest(t, time.Minute, fakemodel.PromptContains("ECHO=realgateway-turn-ok"))
	if r.API != fakemodel.APIChatCompletions || r.Model != Model || !r.Stream {
		t.Errorf("model request api=%s model=%s stream=%v", r.API, r.Model, r.Stream)
	}
}

// TestRealRestart restarts the shared gateway, so it must not run in
// parallel with the other tests that use it: it is the one test here that
// does not call t.Parallel, and the parallel ones start only after it
// ended.
func TestRealRestart(t *testing.T) {
	g := Shared(t)
	port, pid := g.Port(), g.PID()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if err := g.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("restart to hello-ok took %v", g.StartDuration().Round(time.Millisecond))
	if g.Port() != port || g.PID() == pid || g.PID() == 0 {
		t.Errorf("after restart port %d (was %d), pid %d (was %d)", g.Port(), port, g.PID(), pid)
	}
	// Nothing of the old process outlived it: every process carrying the
	// gateway's environment is the new one or one of its helpers.
	mine := map[int]bool{g.PID(): true}
	for _, p := range descendants(g.PID()) {
		mine[p.pid] = true
	}
	for _, p := range marked(g.marker()) {
		if !mine[p.pid] && !mine[parentOf(p.pid)] {
			t.Errorf("process %d (%.120s) of the old gateway outlived the restart", p.pid, cmdline(p.pid))
		}
	}
	p := dial(t, g)
	if got := turn(t, p, "agent:main:realgateway-restart", "ECHO=after-restart"); got != "after-restart" {
		t.Errorf("final text after restart = %q", got)
	}
}

// waitRun submits message with the agent RPC and returns agent.wait's answer.
func waitRun(t *testing.T, p *Probe, params map[string]any) (status, text, errText string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	key := fmt.Sprintf("rg-%d-%d", time.Now().UnixNano(), runSeq.Add(1)) // unique among parallel tests
	params["idempotencyKey"] = key
	if _, err := p.Call(ctx, "agent", params); err != nil {
		t.Fatalf("agent: %v", err)
	}
	res, err := p.Call(ctx, "agent.wait", map[string]any{"runId": key, "timeoutMs": 120000})
	if err != nil {
		t.Fatalf("agent.wait: %v", err)
	}
	var w struct {
		Status        string `json:"status"`
		Error         string `json:"error"`
		TerminalReply struct {
			Text string `json:"text"`
		} `json:"terminalReply"`
	}
	if err := json.Unmarshal(res, &w); err != nil {
		t.Fatalf("agent.wait = %s: %v", res, err)
	}
	return w.Status, w.TerminalReply.Text, w.Error
}

func TestRealAnthropicProvider(t *testing.T) {
	t.Parallel() // the shared gateway serves them together; TestRealRestart runs first, alone
	g := Shared(t)
	p := dial(t, g)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	key := "agent:main:realgateway-anthropic"
	if _, err := p.Call(ctx, "sessions.create", map[string]any{"key": key, "model": AnthropicProvider + "/" + AnthropicModel}); err != nil {
		t.Fatalf("sessions.create: %v", err)
	}
	status, text, errText := waitRun(t, p, map[string]any{"message": "ECHO=via-anthropic", "sessionKey": key})
	if status != "ok" || text != "via-anthropic" {
		t.Errorf("run = %s %q %q, want ok via-anthropic", status, text, errText)
	}
	r := g.ModelServer().MustWaitRequest(t, time.Minute, fakemodel.PromptContains("ECHO=via-anthropic"))
	if r.API != fakemodel.APIMessages || r.Model != AnthropicModel {
		t.Errorf("model request api=%s model=%s", r.API, r.Model)
	}
}

func TestRealModelFailureFailsRun(t *testing.T) {
	t.Parallel() // the shared gateway serves them together; TestRealRestart runs first, alone
	g := Shared(t)
	p := dial(t, g)
	status, _, errText := waitRun(t, p, map[string]any{"message": "FAIL400 please", "sessionKey": "agent:main:realgateway-fail"})
	if status != "error" || errText == "" {
		t.Errorf("run = %s %q, want status error with a message", status, errText)
	}
}

func TestRealToolCall(t *testing.T) {
	t.Parallel() // the shared gateway serves them together; TestRealRestart runs first, alone
	g := Shared(t)
	p := dial(t, g)
	status, text, errText := waitRun(t, p, map[string]any{"message": "TOOLCALL: echo hi-from-openclaw-tool", "sessionKey": "agent:main:realgateway-tool"})
	if want := fakemodel.ToolResultPrefix + "hi-from-openclaw-tool"; status != "ok" || text != want {
		t.Errorf("run = %s %q %q, want ok %q", status, text, errText, want)
	}
	r := g.ModelServer().MustWaitRequest(t, time.Minute, func(r fakemodel.Request) bool { return r.Done && r.IsToolResult })
	t.Logf("tool output the model saw: %q", r.ToolOutput)
}
