package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/dashboard"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/server/servertest"
	"github.com/clawconnect/clawconnect/taskapi"
)

// tokenUsers is a TokenVerifier of fixed access tokens.
type tokenUsers map[string]string

func (u tokenUsers) VerifyToken(_ context.Context, tok string) (taskapi.Identity, error) {
	if name, ok := u[tok]; ok {
		return taskapi.Identity{User: name}, nil
	}
	return taskapi.Identity{}, &server.TokenError{Code: server.ErrorInvalidToken, Description: "unknown"}
}

// TestOAuthSignIn: a browser that is not signed in is sent to the issuer
// with PKCE (S256), the resource indicator and a state bound to it by a
// cookie; the callback exchanges the code with the verifier and opens a
// session on the access token. A callback without that browser's state,
// or a state used once already, is refused: another site cannot sign the
// browser in as someone else.
func TestOAuthSignIn(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var exchanged url.Values
	tokenEP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		mu.Lock()
		exchanged = r.PostForm
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at-alice", "token_type": "Bearer", "expires_in": 300})
	}))
	t.Cleanup(tokenEP.Close)
	reg, err := config.ParseRegistry([]byte(`{"default":"alpha","agents":[{"id":"alpha","url":"ws://127.0.0.1:1","password":"p"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	const resource = "http://127.0.0.1:7331/mcp"
	srv, err := server.New(server.Options{Tasks: servertest.New(), Registry: reg, OAuth: &server.ResourceServer{
		Verifier: tokenUsers{"at-alice": "alice"}, Resource: resource, AuthorizationServers: []string{"https://idp.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(dashboard.Options{Server: srv, OAuth: &dashboard.OAuthSignIn{
		Endpoints: func(context.Context) (string, string, error) { return "https://idp.test/auth", tokenEP.URL, nil },
		ClientID:  "dash", RedirectURL: "http://127.0.0.1:7331/oauth/callback", Resource: resource, Scopes: []string{"openid", "mcp"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetPages(d)
	h := srv.Handler()
	get := func(target string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		for _, c := range cookies {
			r.AddCookie(c)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := get("/sessions"); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/oauth/start?next=%2Fsessions" {
		t.Fatalf("a page without a session: %d %q", w.Code, w.Header().Get("Location"))
	}
	start := get("/oauth/start?next=%2Fsessions")
	to, err := url.Parse(start.Header().Get("Location"))
	if err != nil || start.Code != http.StatusSeeOther || to.Host != "idp.test" {
		t.Fatalf("start: %d %q", start.Code, start.Header().Get("Location"))
	}
	q := to.Query()
	for k, want := range map[string]string{"client_id": "dash", "response_type": "code", "code_challenge_method": "S256",
		"resource": resource, "scope": "openid mcp", "redirect_uri": "http://127.0.0.1:7331/oauth/callback"} {
		if q.Get(k) != want {
			t.Errorf("authorization request %s = %q, want %q", k, q.Get(k), want)
		}
	}
	state := q.Get("state")
	var stateCookie *http.Cookie
	for _, c := range start.Result().Cookies() {
		if c.Name == "clawconnect_oauth_state" {
			stateCookie = c
		}
	}
	if stateCookie == nil || stateCookie.Value != state || !stateCookie.HttpOnly || stateCookie.SameSite != http.SameSiteLaxMode {
		t.Fatalf("state cookie %+v for state %q", stateCookie, state)
	}
	cb := "/oauth/callback?code=c0de&state=" + url.QueryEscape(state)
	if w := get(cb); w.Code != http.StatusForbidden {
		t.Errorf("callback without the state cookie: %d, want 403", w.Code)
	}
	if w := get(cb, &http.Cookie{Name: "clawconnect_oauth_state", Value: "other"}); w.Code != http.StatusForbidden {
		t.Errorf("callback with another browser's state: %d, want 403", w.Code)
	}
	w := get(cb, stateCookie)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/sessions" {
		t.Fatalf("callback: %d %q %s", w.Code, w.Header().Get("Location"), w.Body.String())
	}
	mu.Lock()
	if exchanged.Get("code") != "c0de" || exchanged.Get("code_verifier") == "" || exchanged.Get("resource") != resource {
		t.Errorf("token request %v lacks the code, the PKCE verifier or the resource", exchanged)
	}
	mu.Unlock()
	var session *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == "clawconnect_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatal("no session cookie")
	}
	if w := get("/sessions", session); w.Code != http.StatusOK {
		t.Errorf("signed-in page: %d", w.Code)
	}
	if w := get(cb, stateCookie); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "already used") {
		t.Errorf("the same state twice: %d", w.Code)
	}
}

// flakyIssuer is a TokenVerifier of fixed access tokens whose issuer can
// be made unreachable.
type flakyIssuer struct {
	users tokenUsers
	mu    sync.Mutex
	down  bool
}

func (f *flakyIssuer) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

func (f *flakyIssuer) VerifyToken(ctx context.Context, tok string) (taskapi.Identity, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if down {
		return taskapi.Identity{}, errors.New("get http://idp.test/keys: connection refused")
	}
	return f.users.VerifyToken(ctx, tok)
}

// TestOAuthSignInOutlastsOutage: while the identity provider cannot be
// reached, a browser signed in through it stays signed in as the same user
// until its access token expires (as the token endpoint said); a session
// whose token's expiry is unknown is answered 503 and kept, not dropped;
// once the token has expired the session ends and the browser is sent to
// sign in again; a token the provider refuses ends the session at once.
func TestOAuthSignInOutlastsOutage(t *testing.T) {
	t.Parallel()
	tokenEP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		reply := map[string]any{"access_token": "at-" + r.PostForm.Get("code"), "token_type": "Bearer"}
		if r.PostForm.Get("code") != "noexpiry" {
			reply["expires_in"] = 300
		}
		_ = json.NewEncoder(w).Encode(reply)
	}))
	t.Cleanup(tokenEP.Close)
	reg, err := config.ParseRegistry([]byte(`{"default":"alpha","agents":[{"id":"alpha","url":"ws://127.0.0.1:1","password":"p"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	issuer := &flakyIssuer{users: tokenUsers{"at-alice": "alice", "at-noexpiry": "alice", "at-bob": "bob"}}
	const resource = "http://127.0.0.1:7331/mcp"
	srv, err := server.New(server.Options{Tasks: servertest.New(), Registry: reg, OAuth: &server.ResourceServer{
		Verifier: issuer, Resource: resource, AuthorizationServers: []string{"https://idp.test"}}})
	if err != nil {
		t.Fatal(err)
	}
	var clock struct {
		sync.Mutex
		now time.Time
	}
	clock.now = time.Now()
	now := func() time.Time { clock.Lock(); defer clock.Unlock(); return clock.now }
	advance := func(d time.Duration) { clock.Lock(); defer clock.Unlock(); clock.now = clock.now.Add(d) }
	d, err := dashboard.New(dashboard.Options{Server: srv, Now: now, OAuth: &dashboard.OAuthSignIn{
		Endpoints: func(context.Context) (string, string, error) { return "https://idp.test/auth", tokenEP.URL, nil },
		ClientID:  "dash", RedirectURL: "http://127.0.0.1:7331/oauth/callback", Resource: resource, Scopes: []string{"openid"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv.SetPages(d)
	h := srv.Handler()
	get := func(target string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		for _, c := range cookies {
			r.AddCookie(c)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	cookie := func(w *httptest.ResponseRecorder, name string) *http.Cookie {
		for _, c := range w.Result().Cookies() {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("no cookie %s in %v", name, w.Result().Cookies())
		return nil
	}
	signIn := func(code string) *http.Cookie {
		start := get("/oauth/start?next=%2Fsessions")
		to, err := url.Parse(start.Header().Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		w := get("/oauth/callback?code="+code+"&state="+url.QueryEscape(to.Query().Get("state")), cookie(start, "clawconnect_oauth_state"))
		if w.Code != http.StatusSeeOther {
			t.Fatalf("callback: %d %s", w.Code, w.Body.String())
		}
		return cookie(w, "clawconnect_session")
	}
	alice, unknownExpiry, bob := signIn("alice"), signIn("noexpiry"), signIn("bob")

	issuer.setDown(true)
	advance(299 * time.Second)
	if w := get("/sessions", alice); w.Code != http.StatusOK {
		t.Errorf("during the outage, before the token expires: %d %q, want 200 (still signed in)", w.Code, w.Header().Get("Location"))
	}
	w := get("/sessions", unknownExpiry)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "still signed in") {
		t.Errorf("during the outage, a token of unknown expiry: %d %q, want 503 saying the sign-in is kept", w.Code, w.Header().Get("Location"))
	}
	issuer.setDown(false)
	if w := get("/sessions", unknownExpiry); w.Code != http.StatusOK {
		t.Errorf("after the outage, the session of unknown expiry: %d, want 200 (it was kept)", w.Code)
	}
	if w := get("/sessions", alice); w.Code != http.StatusOK {
		t.Errorf("after the outage: %d, want 200", w.Code)
	}

	issuer.setDown(true)
	advance(2 * time.Second)
	if w := get("/sessions", alice); w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/oauth/start") {
		t.Errorf("during the outage, after the token expired: %d %q, want a redirect to sign in", w.Code, w.Header().Get("Location"))
	}
	issuer.setDown(false)
	if w := get("/sessions", alice); w.Code != http.StatusSeeOther {
		t.Errorf("the expired sign-in after the outage: %d, want it ended (303 to sign in)", w.Code)
	}

	delete(issuer.users, "at-bob") // the provider now refuses bob's token
	if w := get("/sessions", bob); w.Code != http.StatusSeeOther {
		t.Errorf("a refused token: %d, want the session ended (303 to sign in)", w.Code)
	}
	issuer.users["at-bob"] = "bob"
	if w := get("/sessions", bob); w.Code != http.StatusSeeOther {
		t.Errorf("a session ended by a refusal came back: %d", w.Code)
	}
}
