package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/server"
)

// mustAuth is config.NewAuthenticator for options that must be accepted.
func mustAuth(t testing.TB, o config.AuthOptions) *config.Authenticator {
	t.Helper()
	a, err := config.NewAuthenticator(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

const legacyVersion = "2025-11-25"

// rpc posts one raw JSON-RPC message to url and returns the status, the
// headers and the JSON payload (unwrapped from SSE when needed).
func rpc(t testing.TB, url, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", legacyVersion)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	payload := string(data)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		payload = ""
		for _, line := range strings.Split(string(data), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				payload = d // the last data line carries the response
			}
		}
	}
	return resp.StatusCode, resp.Header, payload
}

func rawResult(t testing.TB, payload string) json.RawMessage {
	t.Helper()
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal([]byte(payload), &msg); err != nil {
		t.Fatalf("decode %q: %v", payload, err)
	}
	if msg.Error != nil {
		t.Fatalf("JSON-RPC error: %s", msg.Error)
	}
	return msg.Result
}

const toolsListReq = `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`

// stdioToolsList runs ServeStdio over pipes and returns the raw tools/list
// result.
func stdioToolsList(t *testing.T, s *server.Server) json.RawMessage {
	t.Helper()
	return stdioToolsListWith(t, s, "{}")
}

// stdioToolsListWith is stdioToolsList for a client that declares caps at
// initialize.
func stdioToolsListWith(t *testing.T, s *server.Server, caps string) json.RawMessage {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- s.ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
	go func() {
		_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+legacyVersion+`","capabilities":`+caps+`,"clientInfo":{"name":"raw","version":"1"}}}`+"\n"+
			`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`+"\n"+toolsListReq+"\n")
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var result json.RawMessage
	for sc.Scan() {
		var msg struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) == nil && msg.ID == 2 {
			result = append(json.RawMessage(nil), msg.Result...)
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	_ = inW.Close()
	if err := <-errc; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	return result
}

func TestStdioAndHTTPServeIdenticalToolsList(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ts := httptest.NewServer(b.srv.Handler())
	defer ts.Close()
	code, _, payload := rpc(t, ts.URL+"/mcp", toolsListReq, nil)
	if code != http.StatusOK {
		t.Fatalf("HTTP tools/list status %d: %s", code, payload)
	}
	httpTools := rawResult(t, payload)
	stdioTools := stdioToolsList(t, b.srv)
	if len(stdioTools) == 0 {
		t.Fatal("no tools/list result over stdio")
	}
	if string(httpTools) != string(stdioTools) {
		t.Errorf("tools/list differs between transports:\nstdio %s\nhttp  %s", stdioTools, httpTools)
	}
}

func TestHTTPAuth(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *server.Options) {
		o.Auth = mustAuth(t, config.AuthOptions{UserTokens: "Dana:tok-dana-0123456789", PublicPass: "shared-pass-0123456789"})
	})
	ts := httptest.NewServer(b.srv.Handler())
	defer ts.Close()
	tests := []struct {
		name     string
		query    string
		hdr      map[string]string
		wantCode int
	}{
		{"no token", "", nil, http.StatusForbidden},
		{"wrong bearer", "", map[string]string{"Authorization": "Bearer nope"}, http.StatusForbidden},
		{"wrong pass", "?pass=nope", nil, http.StatusForbidden},
		{"basic scheme ignored", "", map[string]string{"Authorization": "Basic tok-dana-0123456789"}, http.StatusForbidden},
		{"bearer user", "", map[string]string{"Authorization": "Bearer tok-dana-0123456789"}, http.StatusOK},
		{"lowercase bearer", "", map[string]string{"Authorization": "bearer tok-dana-0123456789"}, http.StatusOK},
		{"pass legacy", "?pass=shared-pass-0123456789", nil, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, hdr, body := rpc(t, ts.URL+"/mcp"+tt.query, toolsListReq, tt.hdr)
			if code != tt.wantCode {
				t.Fatalf("status = %d, want %d: %s", code, tt.wantCode, body)
			}
			if code == http.StatusForbidden {
				if body != `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Forbidden: token required via ?pass= or Authorization: Bearer"}}` {
					t.Errorf("403 body = %s", body)
				}
				if hdr.Get("Access-Control-Allow-Origin") != "*" {
					t.Error("403 lacks CORS headers")
				}
			}
		})
	}
	// /metrics is behind the same credential.
	for _, tt := range []struct {
		hdr  string
		want int
	}{{"", http.StatusForbidden}, {"Bearer nope", http.StatusForbidden}, {"Bearer tok-dana-0123456789", http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+"/metrics", nil)
		if tt.hdr != "" {
			req.Header.Set("Authorization", tt.hdr)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("GET /metrics with %q = %d, want %d", tt.hdr, resp.StatusCode, tt.want)
		}
	}
	// The personal token's name reaches the tools.
	code, _, body := rpc(t, ts.URL+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_connection_info","arguments":{}}}`,
		map[string]string{"Authorization": "Bearer tok-dana-0123456789"})
	if code != http.StatusOK || !strings.Contains(body, `ClawConnect (Dana)`) {
		t.Errorf("connection info over HTTP = %d %s", code, body)
	}
}

func TestHTTPRoutesAndCORS(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ts := httptest.NewServer(b.srv.Handler())
	defer ts.Close()
	get := func(path string) (int, http.Header, string) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(data)
	}
	if code, _, body := get("/health"); code != 200 || body != `{"ok":true}` {
		t.Errorf("/health = %d %q", code, body)
	}
	if code, _, body := get("/"); code != 200 || body != "OK" {
		t.Errorf("/ = %d %q", code, body)
	}
	if code, _, _ := get("/nope"); code != 404 {
		t.Errorf("/nope = %d", code)
	}
	// A tool call, so the latency histogram has a sample.
	rpc(t, ts.URL+"/mcp", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_agents","arguments":{}}}`, nil)
	b.tasks.Run(t.Context(), server.RunRequest{Agent: "alpha", Task: "x"})
	code, _, body := get("/metrics")
	for _, want := range []string{
		`clawconnect_tool_call_duration_seconds_count{outcome="ok",tool="list_agents"} 1`,
		`clawconnect_tasks{status="running"} 1`,
		`clawconnect_gateway_connection{agent="beta",state="reconnecting"} 1`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	req, _ := http.NewRequest(http.MethodOptions, ts.URL+"/mcp", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := map[string]string{
		// An open server sends no wildcard (issue 11 item 3).
		"Access-Control-Allow-Origin":   "",
		"Access-Control-Allow-Methods":  "GET, POST, DELETE, OPTIONS",
		"Access-Control-Allow-Headers":  "Content-Type, Mcp-Session-Id, Mcp-Protocol-Version, Authorization",
		"Access-Control-Expose-Headers": "Mcp-Session-Id, WWW-Authenticate",
	}
	got := map[string]string{}
	for k := range want {
		got[k] = resp.Header.Get(k)
	}
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("OPTIONS status = %d", resp.StatusCode)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CORS headers (-want +got):\n%s", diff)
	}
}

func TestHTTPBadRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ts := httptest.NewServer(b.srv.Handler())
	defer ts.Close()
	tests := []struct {
		name     string
		body     string
		wantCode int
		contains string
	}{
		{"malformed json", `{"jsonrpc":"2.0","id":1,`, http.StatusBadRequest, ""},
		{"not json-rpc", `[1,2,3]`, http.StatusBadRequest, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"tasks/explode","params":{}}`, http.StatusBadRequest, "unsupported"},
		{"oversized", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_task","arguments":{"task":"` + strings.Repeat("x", server.MaxRequestBytes) + `"}}}`, http.StatusRequestEntityTooLarge, ""},
		{"wrong argument type", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"check_task","arguments":{"jobId":7}}}`, http.StatusOK, `"isError":true`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, body := rpc(t, ts.URL+"/mcp", tt.body, nil)
			if code != tt.wantCode {
				t.Fatalf("status = %d, want %d: %.200s", code, tt.wantCode, body)
			}
			if !strings.Contains(body, tt.contains) {
				t.Errorf("body %.300s lacks %q", body, tt.contains)
			}
		})
	}
	// The server still answers after the bad requests.
	if code, _, _ := rpc(t, ts.URL+"/mcp", toolsListReq, nil); code != http.StatusOK {
		t.Errorf("tools/list after bad requests = %d", code)
	}
}

func TestHTTPScopeQuery(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ts := httptest.NewServer(b.srv.Handler())
	defer ts.Close()
	ctx := t.Context()
	connectHTTP := func(query string) *mcp.ClientSession {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp" + query}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	tests := []struct {
		query   string
		allowed []any
	}{
		{"", []any{"alpha", "beta", "gamma"}},
		{"?agent=gamma", []any{"gamma"}},
		{"?agents=beta,gamma", []any{"beta", "gamma"}},
		{"?group=team&agent=gamma", []any{"alpha", "beta", "gamma"}},
		{"?group=team", []any{"alpha", "beta"}},
		{"?agent=unknown", []any{"alpha", "beta", "gamma"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			cs := connectHTTP(tt.query)
			info := structured(t, call(t, cs, "get_connection_info", map[string]any{}))
			agents := info["agents"].(map[string]any)
			if diff := cmp.Diff(tt.allowed, agents["allowed"]); diff != "" {
				t.Errorf("allowed (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckListen(t *testing.T) {
	t.Parallel()
	open := setup(t, nil).srv
	authed := setup(t, func(o *server.Options) { o.Auth = mustAuth(t, config.AuthOptions{PublicPass: "pass-0123456789abcdef"}) }).srv
	allowed := setup(t, func(o *server.Options) { o.AllowUnauthenticatedRemote = true }).srv
	tests := []struct {
		name string
		s    *server.Server
		addr string
		want error
	}{
		{"loopback v4", open, "127.0.0.1:7331", nil},
		{"loopback v6", open, "[::1]:7331", nil},
		{"localhost", open, "localhost:7331", nil},
		{"all interfaces", open, "0.0.0.0:7331", server.ErrInsecureRemote},
		{"empty host", open, ":7331", server.ErrInsecureRemote},
		{"named host", open, "example.internal:7331", server.ErrInsecureRemote},
		{"authenticated remote", authed, "0.0.0.0:7331", nil},
		{"explicitly allowed", allowed, "0.0.0.0:7331", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.s.CheckListen(tt.addr); !errors.Is(err, tt.want) {
				t.Errorf("CheckListen(%q) = %v, want %v", tt.addr, err, tt.want)
			}
		})
	}
	if err := open.CheckListen("no-port"); err == nil {
		t.Error("CheckListen without a port succeeded")
	}
}

func TestListenAndServeGracefulShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	addrc := make(chan net.Addr, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- b.srv.ListenAndServe(ctx, "127.0.0.1:0", 5*time.Second, func(a net.Addr) { addrc <- a })
	}()
	addr := <-addrc
	url := "http://" + addr.String() + "/mcp"
	jobID := ""
	if code, _, body := rpc(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_task","arguments":{"task":"long"}}}`, nil); code == 200 {
		var res struct {
			Result struct {
				StructuredContent struct {
					JobID string `json:"jobId"`
				} `json:"structuredContent"`
			} `json:"result"`
		}
		_ = json.Unmarshal([]byte(body), &res)
		jobID = res.Result.StructuredContent.JobID
	}
	if jobID == "" {
		t.Fatal("run_task over HTTP returned no jobId")
	}
	// A check_task that would wait 2 minutes must not hold the shutdown.
	waitDone := make(chan struct{})
	go func() {
		defer close(waitDone)
		rpc(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"check_task","arguments":{"jobId":"`+jobID+`","waitMs":120000}}}`, nil)
	}()
	<-b.tasks.Waiting
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("ListenAndServe = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown took longer than 10s with a waiting check_task")
	}
	<-waitDone
}

func TestListenAndServeRefusesInsecureRemote(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	if err := b.srv.ListenAndServe(t.Context(), "0.0.0.0:0", time.Second, nil); !errors.Is(err, server.ErrInsecureRemote) {
		t.Fatalf("ListenAndServe(0.0.0.0) = %v, want server.ErrInsecureRemote", err)
	}
}

func TestHTTPTokenFileReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, []byte(`{"tokens":{"Eve":"eve-token-1-0123456789"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := setup(t, func(o *server.Options) { o.Auth = mustAuth(t, config.AuthOptions{TokensFile: path}) })
	ts := httptest.NewServer(b.srv.Handler())
	defer ts.Close()
	if code, _, _ := rpc(t, ts.URL+"/mcp?pass=eve-token-1-0123456789", toolsListReq, nil); code != 200 {
		t.Fatalf("token from file refused: %d", code)
	}
	if err := os.WriteFile(path, []byte(`{"tokens":{"Eve":"eve-token-2-rotated-0123"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := rpc(t, ts.URL+"/mcp?pass=eve-token-1-0123456789", toolsListReq, nil); code != http.StatusForbidden {
		t.Errorf("rotated-out token still accepted: %d", code)
	}
}
