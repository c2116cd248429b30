package cli_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/oauth/oauthtest"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
)

// jwtPart decodes the header (0) or the claims (1) of a JWT.
func jwtPart(t *testing.T, tok string, i int) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestE2EOAuthWithHydra: serve in OAuth mode behind Ory Hydra, a real
// provider that issues JWT access tokens for the resource a client asks
// for (RFC 8707), checked against its published keys, no introspection.
// Two users sign in by the authorization code flow with PKCE, call
// run_task and see only their own tasks; the dashboard signs a browser in
// through Hydra. Real tokens that are not for serve are refused with the
// spec's answers: for another resource or none (audience), from another
// provider that signs with the same key (issuer), without the required
// scope, and expired (a client whose tokens live 10 s). Hydra's signing
// key rotated mid-run is picked up on its first token.
func TestE2EOAuthWithHydra(t *testing.T) {
	peers.RequireE2E(t)
	users := map[string]string{"alice": "alice-pw", "bob": "bob-pw"}
	hydra, other := oauthtest.StartHydra(t, users), oauthtest.StartHydra(t, users)
	// The two providers sign with one key: a token of the other differs
	// only in its issuer.
	shared := oauthtest.NewSigningKey(t, "shared-key")
	hydra.ImportKey(t, shared)
	other.ImportKey(t, shared)

	addr := freeAddr(t)
	base := "http://" + addr
	resource, elsewhere := base+"/mcp", "http://127.0.0.1:1/other/mcp"
	const clientCB = "http://127.0.0.1:1/cb" // never reached: the code is read off the redirect
	web := oauthtest.Client{ID: "web", Secret: "web-secret", RedirectURIs: []string{clientCB},
		Scopes: []string{"openid", "offline", "mcp"}, Audience: []string{resource, elsewhere}}
	brief := web
	brief.ID, brief.AccessTokenLifespan = "brief", 10*time.Second
	dash := oauthtest.Client{ID: "dash", Secret: "dash-secret", RedirectURIs: []string{base + "/oauth/callback"},
		Scopes: []string{"openid", "mcp"}, Audience: []string{resource}}
	for _, c := range []oauthtest.Client{web, brief, dash} {
		hydra.CreateClient(t, c)
	}
	other.CreateClient(t, web)

	base, serveLog := oauthServe(t, addr, hydra.Issuer, map[string]string{
		"CLAWCONNECT_OAUTH_SCOPES": "mcp", "CLAWCONNECT_OAUTH_INTROSPECT": "",
		"CLAWCONNECT_OAUTH_CLIENT_ID": dash.ID, "CLAWCONNECT_OAUTH_CLIENT_SECRET": dash.Secret,
		// Hydra and serve share this machine's clock.
		"CLAWCONNECT_OAUTH_CLOCK_SKEW_MS": "1",
	})
	browser := func(user string) *oauthtest.Browser {
		return oauthtest.NewBrowser(user, users[user], oauthtest.HydraLogin)
	}

	// A token that lives 10 s, taken first and accepted while it lives, so
	// that its refusal below is for its expiry alone.
	expiring := hydra.Token(t, browser("alice"), brief, resource, "openid", "mcp")
	exp := time.Unix(int64(jwtPart(t, expiring, 1)["exp"].(float64)), 0)
	live := time.Now().Before(exp)
	if status, challenge := answer(t, base, "Bearer "+expiring); !live {
		t.Logf("the brief token expired before its first use (a loaded machine); its acceptance while alive is not shown this run")
	} else if status != http.StatusOK {
		t.Errorf("a live token of the brief client: %d %s", status, challenge)
	}

	aliceTok := hydra.Token(t, browser("alice"), web, resource, "openid", "mcp")
	bobTok := hydra.Token(t, browser("bob"), web, resource, "openid", "mcp")
	if aud := jwtPart(t, aliceTok, 1)["aud"]; !strings.Contains(strings.Join(anyStrings(aud), " "), resource) {
		t.Fatalf("hydra's token names audience %v, not %s", aud, resource)
	}
	as, bs := mcpAs(t, base, aliceTok), mcpAs(t, base, bobTok)
	job := checkIsolated(t, as, bs)

	// The dashboard signs a browser in through Hydra (its resource
	// indicator names serve) and shows that user's tasks only.
	_, status, page := browser("alice").Visit(t, base+"/", "")
	if status != http.StatusOK || !strings.Contains(page, job) {
		t.Errorf("dashboard after sign-in: %d, the task %s shown: %t", status, job, strings.Contains(page, job))
	}
	_, status, page = browser("bob").Visit(t, base+"/", "")
	if status != http.StatusOK || strings.Contains(page, job) {
		t.Errorf("second user's dashboard: %d, shows the first's task: %t", status, strings.Contains(page, job))
	}

	meta := `resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp"`
	refused := func(why string) string {
		return "Bearer " + meta + `, error="invalid_token", error_description="the access token was refused: ` + why + `", scope="mcp"`
	}
	cases := []struct {
		name, token string
		status      int
		challenge   string
	}{
		{"for another resource", hydra.Token(t, browser("alice"), web, elsewhere, "openid", "mcp"), 401,
			refused("its audience '" + elsewhere + "' is not this resource (accepted: " + resource + ")")},
		{"for no resource", hydra.Token(t, browser("alice"), web, "", "openid", "mcp"), 401,
			refused("its audience '' is not this resource (accepted: " + resource + ")")},
		{"from another provider with the same key", other.Token(t, browser("alice"), web, resource, "openid", "mcp"), 401,
			refused("issued by '" + other.Issuer + "', not by the configured issuer '" + hydra.Issuer + "'")},
		{"without the required scope", hydra.Token(t, browser("alice"), web, resource, "openid"), 403,
			"Bearer " + meta + `, error="insufficient_scope", error_description="missing scope mcp", scope="mcp"`},
	}
	check := func(name, token string, wantStatus int, want string) {
		t.Helper()
		status, challenge := answer(t, base, "Bearer "+token)
		t.Logf("%s: %d WWW-Authenticate: %s", name, status, challenge)
		if status != wantStatus || challenge != want {
			t.Errorf("%s: %d %q, want %d %q", name, status, challenge, wantStatus, want)
		}
	}
	for _, c := range cases {
		check(c.name, c.token, c.status, c.challenge)
	}

	// Expired: wait out what is left of the brief token's life (serve and
	// Hydra share the real clock, so this one wait is the token's own).
	select {
	case <-time.After(time.Until(exp.Add(10 * time.Millisecond))):
	case <-t.Context().Done():
		t.Fatal(t.Context().Err())
	}
	check("expired", expiring, 401, refused("expired at "+exp.UTC().Format(time.RFC3339)))

	// Hydra rotates its signing key while serve runs: the next token names
	// the new key, which serve fetches on sight, and run_task works.
	hydra.RotateKey(t, "rotated-key")
	rotated := hydra.Token(t, browser("alice"), web, resource, "openid", "mcp")
	if h := jwtPart(t, rotated, 0); h["kid"] != "rotated-key" || h["alg"] != "ES256" {
		t.Fatalf("after the rotation hydra signs with key %v (%v), want rotated-key (ES256)", h["kid"], h["alg"])
	}
	res, err := mcpAs(t, base, rotated).CallTool(t.Context(), &mcp.CallToolParams{Name: "run_task", Arguments: map[string]any{"task": "after the rotation"}})
	if err != nil || res.IsError {
		t.Fatalf("run_task with a token of the rotated key: %v %v", err, res)
	}
	if n := strings.Count(serveLog(), "fetched issuer keys"); n != 2 {
		t.Errorf("serve fetched the issuer's keys %d times, want 2 (first token, rotation)", n)
	}
	for _, tok := range []string{aliceTok, bobTok, rotated, expiring} {
		if strings.Contains(serveLog(), tok) {
			t.Errorf("serve logged an access token")
		}
	}
}

// anyStrings is a JSON string or list of strings as a list.
func anyStrings(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
