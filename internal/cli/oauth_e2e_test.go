package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/clawconnect/clawconnect/internal/cli"
	"github.com/clawconnect/clawconnect/internal/oauth/oauthtest"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

// The test OpenID provider: zitadel/oidc's example provider, installed by
// scripts/setup/oidc.sh. Its users, clients and scopes are its own:
// clients "web" and "api" (secret "secret") and the public "native", the
// scope "custom_scope", and access tokens that are opaque to anyone but
// itself (checked by introspection, which answers only for the client the
// token was issued to).
const (
	opUser1, opUser2 = "test-user@localhost", "test-user2"
	opPassword       = "verysecure"
	opScope          = "custom_scope"
)

// freeAddr is a loopback address free a moment ago: the provider and serve
// must know their URLs before they listen (the redirect URIs, the issuer
// and the resource name them).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitHTTP polls url until it answers 200, for at most a minute.
func waitHTTP(t *testing.T, u string, done <-chan error) {
	t.Helper()
	last := "no answer"
	if !poll.WithinEvery(time.Minute, 20*time.Millisecond, func() bool {
		resp, err := http.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case err := <-done:
			t.Fatalf("%s: the process ended: %v", u, err)
		default:
		}
		return false
	}) {
		t.Fatalf("%s never answered 200 within a minute (last: %s)", u, last)
	}
}

// startOP starts the test OpenID provider on a free loopback port with
// these redirect URIs and returns its issuer.
func startOP(t *testing.T, redirects ...string) string {
	t.Helper()
	bin := filepath.Join(os.Getenv("CLAWCONNECT_TOOLS"), "zitadel-example-op")
	if os.Getenv("CLAWCONNECT_TOOLS") == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache", "clawconnect", "bin", "zitadel-example-op")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the test OpenID provider is not installed (%v): run scripts/setup/oidc.sh", err)
	}
	_, port, _ := net.SplitHostPort(freeAddr(t))
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "PORT="+port, "REDIRECT_URI="+strings.Join(redirects, ","))
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("provider log (last 3000 bytes): %s", tail(logs.String(), 3000))
		}
	})
	// The example names itself localhost: its issuer is what its metadata says.
	issuer := "http://localhost:" + port + "/"
	waitHTTP(t, issuer+".well-known/openid-configuration", done)
	return issuer
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// browser is a browser at the test OpenID provider, signing in at its
// login form.
type browser struct{ *oauthtest.Browser }

func newBrowser(user string) *browser {
	return &browser{oauthtest.NewBrowser(user, opPassword, opLogin)}
}

// opLogin is the provider's login form.
func opLogin(page *url.URL, user, password string) (string, url.Values, bool) {
	if page.Path != "/login/username" {
		return "", nil, false
	}
	return page.ResolveReference(&url.URL{Path: "/login/username"}).String(),
		url.Values{"id": {page.Query().Get("authRequestID")}, "username": {user}, "password": {password}}, true
}

// token signs user in at the provider as client (authorization code with
// PKCE) and returns the access token.
func (b *browser) token(t *testing.T, issuer, client, redirect string, scopes ...string) string {
	t.Helper()
	cfg := oauth2.Config{ClientID: client, ClientSecret: "secret", RedirectURL: redirect, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: issuer + "auth", TokenURL: issuer + "oauth/token", AuthStyle: oauth2.AuthStyleInHeader}}
	verifier := oauth2.GenerateVerifier()
	back, _, body := b.Visit(t, cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)), redirect)
	if back == nil || back.Query().Get("code") == "" {
		t.Fatalf("no code came back: %v %s", back, body)
	}
	tok, err := cfg.Exchange(t.Context(), back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	return tok.AccessToken
}

// oauthServe runs `clawconnect serve` in OAuth mode against issuer, with
// the settings of the test provider changed by set ("" unsets), and
// returns its base URL and its log so far.
func oauthServe(t *testing.T, addr, issuer string, set map[string]string) (string, func() string) {
	t.Helper()
	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: func(fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "private result", Hold: true}
	}})
	base := "http://" + addr
	envm := map[string]string{
		"CLAWCONNECT_HOME": t.TempDir(), "OPENCLAW_URL": fg.URL(), "OPENCLAW_PASSWORD": "pw",
		"CLAWCONNECT_OAUTH_ISSUER": issuer, "CLAWCONNECT_OAUTH_RESOURCE": base + "/mcp",
		"CLAWCONNECT_OAUTH_SCOPES": "openid " + opScope, "CLAWCONNECT_OAUTH_INTROSPECT": "1",
		"CLAWCONNECT_OAUTH_CLIENT_ID": "web", "CLAWCONNECT_OAUTH_CLIENT_SECRET": "secret",
		"CLAWCONNECT_LOG_LEVEL": "info",
	}
	for k, v := range set {
		envm[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var errb oauthtest.LockedBuffer
	go func() {
		done <- cli.Run(ctx, cli.Env{Args: []string{"serve", "--addr", addr}, Stdout: io.Discard, Stderr: &errb,
			Getenv: func(k string) string { return envm[k] }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		log := errb.String()
		for _, secret := range []string{"secret\"", "=secret", "Bearer ey"} {
			if strings.Contains(log, secret) {
				t.Errorf("serve's log holds a secret or token (%q):\n%s", secret, log)
			}
		}
		if t.Failed() {
			t.Logf("serve log: %s", tail(log, 4000))
		}
	})
	waitHTTP(t, base+"/health", done)
	return base, errb.String
}

// mcpAs connects to /mcp with an access token.
func mcpAs(t *testing.T, base, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "oauth-e2e", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport(token)}, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type bearerTransport string

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// answer posts a tools/list with the Authorization header and returns
// the status and the WWW-Authenticate challenge.
func answer(t *testing.T, base, auth string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// TestE2EOAuthWithRealProvider: serve in OAuth mode behind a real OpenID
// provider. Two users sign in by the authorization code flow with PKCE,
// call run_task and see only their own tasks; the dashboard signs a
// browser in through the provider; tokens the provider issued to another
// client or without the required scope, and forged JWTs (unknown key,
// alg none, HS256 keyed with the provider's own public key), are refused
// with the spec's answers.
func TestE2EOAuthWithRealProvider(t *testing.T) {
	peers.RequireE2E(t)
	addr := freeAddr(t)
	const clientCB = "http://127.0.0.1:1/cb" // never reached: the code is read off the redirect
	issuer := startOP(t, "http://"+addr+"/oauth/callback", clientCB)
	otherIssuer := startOP(t, clientCB)
	base, serveLog := oauthServe(t, addr, issuer, nil)

	alice, bob := newBrowser(opUser1), newBrowser(opUser2)
	aliceTok := alice.token(t, issuer, "web", clientCB, "openid", opScope)
	bobTok := bob.token(t, issuer, "web", clientCB, "openid", opScope)
	as, bs := mcpAs(t, base, aliceTok), mcpAs(t, base, bobTok)
	job := checkIsolated(t, as, bs)

	// The dashboard: a browser that is not signed in is sent to the
	// provider and back, and then sees its own task.
	_, status, page := newBrowser(opUser1).Visit(t, base+"/", "")
	if status != http.StatusOK || !strings.Contains(page, job) {
		t.Errorf("dashboard after sign-in: %d, the task %s shown: %t", status, job, strings.Contains(page, job))
	}
	_, status, page = newBrowser(opUser2).Visit(t, base+"/", "")
	if status != http.StatusOK || strings.Contains(page, job) {
		t.Errorf("second user's dashboard: %d, shows the first's task: %t", status, strings.Contains(page, job))
	}

	// Refusals. The provider's key set is the real one: a forged JWT is
	// checked against it.
	keys := providerKeys(t, issuer)
	forged := map[string]any{"iss": issuer, "sub": "id1", "aud": base + "/mcp", "scope": "openid " + opScope,
		"exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
	meta := `resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp"`
	cases := []struct {
		name, auth string
		status     int
		challenge  string
	}{
		{"no token", "", 401, "Bearer " + meta + `, scope="openid custom_scope"`},
		{"issued to another client (wrong audience)", "Bearer " + newBrowser(opUser1).token(t, issuer, "api", clientCB, "openid", opScope), 401,
			"Bearer " + meta + `, error="invalid_token", error_description="the access token was refused: the issuer reports it inactive (revoked, expired or unknown)", scope="openid custom_scope"`},
		{"issued by another provider (wrong issuer)", "Bearer " + newBrowser(opUser1).token(t, otherIssuer, "web", clientCB, "openid", opScope), 401,
			"Bearer " + meta + `, error="invalid_token", error_description="the access token was refused: the issuer reports it inactive (revoked, expired or unknown)", scope="openid custom_scope"`},
		{"missing scope", "Bearer " + newBrowser(opUser1).token(t, issuer, "web", clientCB, "openid"), 403,
			"Bearer " + meta + `, error="insufficient_scope", error_description="missing scope custom_scope", scope="openid custom_scope"`},
		{"unknown kid", "Bearer " + oauthtest.UnknownKey(t, "made-up", forged), 401,
			"Bearer " + meta + `, error="invalid_token", error_description="the access token was refused: signed with key 'made-up' (ES256), which the issuer does not publish", scope="openid custom_scope"`},
		{"alg none", "Bearer " + oauthtest.None(forged, ""), 401,
			"Bearer " + meta + `, error="invalid_token", error_description="the access token was refused: signed with algorithm 'none', which is never accepted (accepted: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)", scope="openid custom_scope"`},
		{"HS256 keyed with the provider's public key", "Bearer " + oauthtest.HS256WithPublicKey(t, keys.Keys[0].Key, keys.Keys[0].KeyID, forged), 401,
			"Bearer " + meta + `, error="invalid_token", error_description="the access token was refused: signed with algorithm 'HS256', which is never accepted (accepted: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA)", scope="openid custom_scope"`},
	}
	for _, c := range cases {
		status, challenge := answer(t, base, c.auth)
		t.Logf("%s: %d WWW-Authenticate: %s", c.name, status, challenge)
		if status != c.status || challenge != c.challenge {
			t.Errorf("%s: %d %q, want %d %q", c.name, status, challenge, c.status, c.challenge)
		}
		if tok := strings.TrimPrefix(c.auth, "Bearer "); tok != "" && strings.Contains(serveLog(), tok) {
			t.Errorf("%s: serve logged the token", c.name)
		}
	}
	for _, tok := range []string{aliceTok, bobTok} {
		if strings.Contains(serveLog(), tok) {
			t.Errorf("serve logged an access token")
		}
	}
}

// providerKeys reads the provider's published key set.
func providerKeys(t *testing.T, issuer string) jose.JSONWebKeySet {
	t.Helper()
	resp, err := http.Get(issuer + "keys")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("provider keys: %v (%d keys)", err, len(set.Keys))
	}
	return set
}

// checkIsolated has as start a task and checks that bs, another user,
// does not see it where as does; it returns the task's id.
func checkIsolated(t *testing.T, as, bs *mcp.ClientSession) string {
	t.Helper()
	res, err := as.CallTool(t.Context(), &mcp.CallToolParams{Name: "run_task", Arguments: map[string]any{"task": "alice's private prompt"}})
	if err != nil || res.IsError {
		t.Fatalf("run_task: %v %v", err, res)
	}
	job := res.StructuredContent.(map[string]any)["jobId"].(string)
	list := func(cs *mcp.ClientSession) string {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "list_tasks", Arguments: map[string]any{"view": "all"}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(res.StructuredContent)
		return string(b)
	}
	if l := list(bs); strings.Contains(l, job) {
		t.Errorf("the second user sees the first's task: %s", l)
	}
	if l := list(as); !strings.Contains(l, job) {
		t.Errorf("the first user does not see their task: %s", l)
	}
	return job
}

// TestE2EOAuthTypeScriptSDK: the TypeScript MCP SDK's own OAuth support
// signs in to serve: from the 401's challenge to the resource metadata,
// the provider's metadata, the authorization code with PKCE, the token,
// and the call made again with it. The test provider issues a token for
// the client that asked (it ignores the resource indicator), and its
// introspection answers only that client: so the SDK signs in as the
// client serve introspects with, as a host of one team would.
func TestE2EOAuthTypeScriptSDK(t *testing.T) {
	in := peers.Require(t, peers.Node, peers.MCPSDK)
	addr := freeAddr(t)
	const redirect = "http://127.0.0.1:1/ts-callback"
	issuer := startOP(t, redirect)
	base, _ := oauthServe(t, addr, issuer, nil)

	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("testdata", "oauth_client.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "oauth_client.mjs"), script, 0o600); err != nil {
		t.Fatal(err)
	}
	// ESM resolves packages from node_modules beside the script.
	if err := os.Symlink(in.NodeModules(peers.MCPSDK), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	c := in.MustCommand(t, peers.MCPSDK)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := c.Cmd(ctx, filepath.Join(dir, "oauth_client.mjs"), base+"/mcp", opUser1, opPassword, redirect, "web", "secret")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ts client: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var doc struct {
		Requests []string `json:"requests"`
		Scope    string   `json:"scope"`
		IsError  bool     `json:"isError"`
		JobID    string   `json:"jobId"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("ts client output: %v\n%s", err, out)
	}
	for _, r := range doc.Requests {
		t.Log(r)
	}
	if doc.IsError || doc.JobID == "" {
		t.Errorf("run_task through the SDK: %s", out)
	}
	// The order of the flow, as the SDK walked it.
	want := []string{"POST serve /mcp", "GET serve /.well-known/oauth-protected-resource/mcp", "GET provider /.well-known/",
		"BROWSER provider /auth code_challenge_method=S256 scope=openid custom_scope", "POST provider /oauth/token", "POST serve /mcp"}
	i := 0
	for _, r := range doc.Requests {
		if i < len(want) && strings.HasPrefix(r, want[i]) {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("the SDK's requests lack %q (in order): %q", want[i], doc.Requests)
	}
}
