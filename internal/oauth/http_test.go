package oauth_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/bridge"
	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/oauth"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/server/servertest"
	"github.com/clawconnect/clawconnect/taskapi"
)

// serveOAuth runs a server in OAuth mode for f on a loopback port and
// returns its base URL; the resource is that URL's /mcp.
func serveOAuth(t testing.TB, f *fakeIssuer, tasks server.Tasks, edit func(*server.Options), vedit func(*oauth.Options)) string {
	t.Helper()
	// The resource URL has to be known before the port is: a fixed
	// canonical name, as behind a proxy, accepted on any Host.
	v := newValidator(t, f, vedit)
	reg, err := config.ParseRegistry([]byte(`{"default":"alpha","agents":[{"id":"alpha","url":"ws://127.0.0.1:1","password":"pw"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := tasks.(interface{ Registry() *taskapi.Registry }); ok {
		reg = r.Registry()
	}
	static, err := config.NewAuthenticator(config.AuthOptions{UserTokens: "carol:carol-static-token-0123"})
	if err != nil {
		t.Fatal(err)
	}
	o := server.Options{Tasks: tasks, Registry: reg, Auth: static, OAuth: &server.ResourceServer{
		Verifier: v, Resource: resource, AuthorizationServers: []string{f.Issuer()}, Scopes: []string{"mcp"},
	}, NoPassParam: true}
	if edit != nil {
		edit(&o)
	}
	srv, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return "http://" + servertest.Listen(t, srv)
}

// post sends a tools/list to /mcp with the Authorization header auth
// ("" for none) and returns the status, WWW-Authenticate and body.
func post(t testing.TB, url, auth string) (int, string, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate"), string(b)
}

// TestRefusedTokenAnswers: each refused token gets the status and the
// Bearer challenge RFC 6750 and RFC 9728 say, naming the metadata and the
// scope; a valid token, and a static token beside OAuth, are served.
func TestRefusedTokenAnswers(t *testing.T) {
	t.Parallel()
	f := newFakeIssuer(t)
	base := serveOAuth(t, f, servertest.New(), nil, nil)
	good := func() map[string]any { return f.claims("alice", resource, "openid", "mcp") }
	with := func(k string, v any) map[string]any { c := good(); c[k] = v; return c }
	const meta = `resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp"`
	invalid := func(why string) string {
		return `Bearer ` + meta + `, error="invalid_token", error_description="the access token was refused: ` + why + `", scope="mcp"`
	}
	tests := []struct {
		name, auth string
		status     int
		challenge  string
	}{
		{"valid access token", "Bearer " + f.sign(t, good()), 200, ""},
		{"static personal token beside OAuth", "Bearer carol-static-token-0123", 200, ""},
		{"no token", "", 401, `Bearer ` + meta + `, scope="mcp"`},
		{"not a JWT", "Bearer not.a.jwt", 401, invalid(`not a well-formed signed JWT`)},
		{"wrong audience", "Bearer " + f.sign(t, with("aud", "https://elsewhere.test/mcp")), 401,
			invalid(`its audience 'https://elsewhere.test/mcp' is not this resource (accepted: https://mcp.example.test/mcp)`)},
		{"expired", "Bearer " + f.sign(t, with("exp", time.Unix(1700000000, 0).Unix())), 401,
			invalid(`expired at 2023-11-14T22:13:20Z`)},
		{"wrong issuer", "Bearer " + f.sign(t, with("iss", "https://evil.test")), 401,
			invalid(`issued by 'https://evil.test', not by the configured issuer '` + f.Issuer() + `'`)},
		{"missing scope", "Bearer " + f.sign(t, with("scope", "openid")), 403,
			`Bearer ` + meta + `, error="insufficient_scope", error_description="missing scope mcp", scope="mcp"`},
		{"unknown kid", "Bearer " + forgeUnknownKid(t, good()), 401,
			invalid(`signed with key 'not-published' (ES256), which the issuer does not publish`)},
		{"alg none", "Bearer " + forgeNone(t, good()), 401,
			invalid(`signed with algorithm 'none', which is never accepted (accepted: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)`)},
		{"HS256 with the public key", "Bearer " + forgeHS256(t, good()), 401,
			invalid(`signed with algorithm 'HS256', which is never accepted (accepted: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, challenge, body := post(t, base+"/mcp", tt.auth)
			t.Logf("%s: %d WWW-Authenticate: %s", tt.name, status, challenge)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			switch {
			case tt.status == 200:
				if challenge != "" || !strings.Contains(body, "run_task") {
					t.Errorf("served answer: challenge %q, body %.200s", challenge, body)
				}
			default:
				if diff := cmp.Diff(tt.challenge, challenge); diff != "" {
					t.Errorf("WWW-Authenticate (-want +got):\n%s", diff)
				}
			}
			if strings.Contains(body, strings.TrimPrefix(tt.auth, "Bearer ")) && tt.auth != "" {
				t.Errorf("the answer quotes the token")
			}
		})
	}
}

// TestStaticTokensAndPass: the setting that turns static tokens off, and
// ?pass=, off by default in OAuth mode and answered as no token.
func TestStaticTokensAndPass(t *testing.T) {
	t.Parallel()
	f := newFakeIssuer(t)
	off := serveOAuth(t, f, servertest.New(), func(o *server.Options) { o.OAuth.NoStaticTokens = true }, nil)
	if status, ch, _ := post(t, off+"/mcp", "Bearer carol-static-token-0123"); status != 401 || !strings.Contains(ch, `error="invalid_token"`) {
		t.Errorf("static token with static tokens off: %d %q", status, ch)
	}
	on := serveOAuth(t, f, servertest.New(), nil, nil)
	if status, ch, _ := post(t, on+"/mcp?pass=carol-static-token-0123", ""); status != 401 || strings.Contains(ch, "error=") {
		t.Errorf("?pass= in OAuth mode: %d %q, want 401 as without a token", status, ch)
	}
	passOn := serveOAuth(t, f, servertest.New(), func(o *server.Options) { o.NoPassParam = false }, nil)
	if status, _, body := post(t, passOn+"/mcp?pass=carol-static-token-0123", ""); status != 200 {
		t.Errorf("?pass= turned on: %d %s", status, body)
	}
}

// TestProtectedResourceMetadata: both well-known forms answer the same
// metadata, readable from any origin.
func TestProtectedResourceMetadata(t *testing.T) {
	t.Parallel()
	f := newFakeIssuer(t)
	base := serveOAuth(t, f, servertest.New(), nil, nil)
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, err)
		}
		want := map[string]any{"resource": resource, "authorization_servers": []any{f.Issuer()}, "scopes_supported": []any{"mcp"},
			"bearer_methods_supported": []any{"header"}, "resource_name": "ClawConnect"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", path, diff)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: not readable cross-origin", path)
		}
	}
}

// bearer adds an access token to every request.
type bearer struct{ token func() string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token())
	return http.DefaultTransport.RoundTrip(r)
}

func mcpSession(t testing.TB, url string, token func() string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "oauth-test", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func callTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	return res, sc
}

// TestTwoUsersIsolatedAndRotation: two users signed in through the issuer
// are two principals, each seeing only its own tasks, over a real task
// bridge; and the issuer's key rotated while the server runs is picked up
// on the next token that names the new key.
func TestTwoUsersIsolatedAndRotation(t *testing.T) {
	t.Parallel()
	f := newFakeIssuer(t)
	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: func(fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "secret result", Hold: true}
	}})
	home := t.TempDir()
	agents := `{"default":"alpha","agents":[{"id":"alpha","url":"` + fg.URL() + `","password":"pw"}]}`
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	sv, err := settings.Load(func(k string) string { return map[string]string{"CLAWCONNECT_HOME": home}[k] })
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.Open(context.Background(), bridge.Options{Settings: &sv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	base := serveOAuth(t, f, b, nil, func(o *oauth.Options) { o.KeyRefresh = time.Nanosecond })
	aliceTok := f.sign(t, f.claims("alice", resource, "mcp"))
	bobTok := f.sign(t, f.claims("bob", resource, "mcp"))
	alice := mcpSession(t, base+"/mcp", func() string { return aliceTok })
	bob := mcpSession(t, base+"/mcp", func() string { return bobTok })

	res, sc := callTool(t, alice, "run_task", map[string]any{"task": "alice's private prompt"})
	if res.IsError {
		t.Fatalf("run_task: %v", res.Content)
	}
	job := sc["jobId"].(string)
	_, list := callTool(t, bob, "list_tasks", map[string]any{"view": "all"})
	if strings.Contains(mustJSON(t, list), job) {
		t.Errorf("bob's list_tasks shows alice's task: %s", mustJSON(t, list))
	}
	if res, _ := callTool(t, bob, "get_task", map[string]any{"taskId": job}); !res.IsError {
		t.Errorf("bob read alice's task")
	}
	_, list = callTool(t, alice, "list_tasks", map[string]any{"view": "all"})
	if !strings.Contains(mustJSON(t, list), job) {
		t.Errorf("alice's list_tasks lacks her task: %s", mustJSON(t, list))
	}

	// Rotation mid-run: the issuer signs with a new key from now on.
	f.rotate(t, "k2", false)
	aliceTok = f.sign(t, f.claims("alice", resource, "mcp"))
	if res, _ := callTool(t, alice, "get_task", map[string]any{"taskId": job}); res.IsError {
		t.Errorf("alice after rotation: %v", res.Content)
	}
	if n := f.jwksFetches.Load(); n != 2 {
		t.Errorf("%d key fetches, want 2 (first token, rotation)", n)
	}
	// The old key is withdrawn: tokens it signed stop working.
	if status, ch, _ := post(t, base+"/mcp", "Bearer "+bobTok); status != 401 || !strings.Contains(ch, `key 'k1'`) {
		t.Errorf("token of a withdrawn key: %d %q", status, ch)
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
