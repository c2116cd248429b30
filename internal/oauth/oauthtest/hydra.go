package oauthtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"
)

// HydraBinary is the file name of Ory Hydra in the tools directory, where
// the test set-up builds it.
const HydraBinary = "hydra"

// AccessTokenKeys is the key set Hydra signs JWT access tokens with.
const AccessTokenKeys = "hydra.jwt.access-token"

// Hydra is a running Ory Hydra, the test OpenID provider that issues JWT
// access tokens: headless on loopback, in memory, its access tokens JWTs
// signed with the newest key of AccessTokenKeys. Hydra leaves sign-in and
// consent to the operator's own pages; the test's are Hydra's login and
// consent app, served beside it: a password form for Users, and a consent
// that grants the scopes asked and, as audience, the RFC 8707 resources
// asked that the client may address (Client.Audience). Hydra itself reads
// only its own "audience" parameter.
type Hydra struct {
	// Issuer is the issuer identifier exactly as Hydra's metadata and
	// tokens spell it.
	Issuer string
	admin  string
	users  map[string]string
	logs   *LockedBuffer
	// http opens a connection per request: Hydra closes idle ones, and a
	// request sent on one it is closing fails with EOF.
	http *http.Client
}

// Client is an OAuth client registered at Hydra.
type Client struct {
	ID, Secret   string
	RedirectURIs []string
	// Scopes the client may ask for.
	Scopes []string
	// Audience lists the audiences (resources) its tokens may name.
	Audience []string
	// AccessTokenLifespan, when set, replaces Hydra's default lifetime of
	// the access tokens of this client's authorization codes.
	AccessTokenLifespan time.Duration
}

// HydraPath is where the test set-up builds Hydra.
func HydraPath() string {
	dir := os.Getenv("CLAWCONNECT_TOOLS")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "clawconnect", "bin")
	}
	return filepath.Join(dir, HydraBinary)
}

// StartHydra starts Hydra on free loopback ports, with its login and
// consent app accepting users (name to password), and stops it when the
// test ends. It fails the test when Hydra is not installed.
func StartHydra(t testing.TB, users map[string]string) *Hydra {
	t.Helper()
	bin := HydraPath()
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the test OpenID provider Ory Hydra is not installed (%v): run scripts/setup/oidc.sh", err)
	}
	h := &Hydra{users: users, logs: &LockedBuffer{},
		http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	app := httptest.NewServer(http.HandlerFunc(h.serveApp))
	t.Cleanup(app.Close)
	public, admin := freePort(t), freePort(t)
	h.admin = "http://127.0.0.1:" + admin
	cmd := exec.Command(bin, "serve", "all", "--dev")
	cmd.Env = append(os.Environ(),
		"DSN=memory",
		"SERVE_PUBLIC_HOST=127.0.0.1", "SERVE_PUBLIC_PORT="+public,
		"SERVE_ADMIN_HOST=127.0.0.1", "SERVE_ADMIN_PORT="+admin,
		"URLS_SELF_ISSUER=http://127.0.0.1:"+public,
		"URLS_LOGIN="+app.URL+"/login", "URLS_CONSENT="+app.URL+"/consent",
		"SECRETS_SYSTEM=a-test-system-secret-of-32-bytes",
		"STRATEGIES_ACCESS_TOKEN=jwt",
		"LOG_LEVEL=warn", "SQA_OPT_OUT=true",
	)
	cmd.Stdout, cmd.Stderr = h.logs, h.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("hydra log (last 3000 bytes): %s", tail(h.logs.String(), 3000))
		}
	})
	discovery := "http://127.0.0.1:" + public + "/.well-known/openid-configuration"
	h.waitReady(t, h.admin+"/health/ready", done)
	h.waitReady(t, discovery, done)
	var meta struct {
		Issuer string `json:"issuer"`
	}
	h.getJSON(t, discovery, &meta)
	if meta.Issuer == "" {
		t.Fatal("hydra's metadata names no issuer")
	}
	h.Issuer = meta.Issuer
	return h
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// waitReady polls u until it answers 200, for at most a minute, or the
// process ends.
func (h *Hydra) waitReady(t testing.TB, u string, done <-chan error) {
	t.Helper()
	deadline := time.After(time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := h.http.Get(u); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case err := <-done:
			t.Fatalf("%s: the process ended: %v", u, err)
		case <-deadline:
			t.Fatalf("%s never answered", u)
		case <-tick.C:
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// call calls Hydra's admin API and decodes its JSON answer into out
// (when not nil); any status but 2xx fails the test.
func (h *Hydra) call(t testing.TB, method, path string, in, out any) {
	t.Helper()
	if err := h.do(method, path, in, out); err != nil {
		t.Fatal(err)
	}
}

func (h *Hydra) do(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, h.admin+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.http.Do(req)
	if err != nil {
		return fmt.Errorf("hydra admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("hydra admin %s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("hydra admin %s %s: %w: %s", method, path, err, b)
		}
	}
	return nil
}

func (h *Hydra) getJSON(t testing.TB, u string, out any) {
	t.Helper()
	resp, err := h.http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("get %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("get %s: %v", u, err)
	}
}

// CreateClient registers c as a confidential client of the authorization
// code flow (secret in the Authorization header).
func (h *Hydra) CreateClient(t testing.TB, c Client) {
	t.Helper()
	body := map[string]any{
		"client_id": c.ID, "client_secret": c.Secret, "redirect_uris": c.RedirectURIs,
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"scope": strings.Join(c.Scopes, " "), "audience": c.Audience, "token_endpoint_auth_method": "client_secret_basic",
	}
	if c.AccessTokenLifespan > 0 {
		body["authorization_code_grant_access_token_lifespan"] = c.AccessTokenLifespan.String()
	}
	h.call(t, http.MethodPost, "/admin/clients", body, nil)
}

// RotateKey has Hydra make a new ES256 key with kid, the one it signs
// access tokens with from now on; the older keys stay published. (An
// ES256 key, since Hydra's 4096-bit RSA keys can take longer to make on a
// loaded machine than its admin server waits to answer.)
func (h *Hydra) RotateKey(t testing.TB, kid string) {
	t.Helper()
	h.call(t, http.MethodPost, "/admin/keys/"+AccessTokenKeys, map[string]string{"alg": "ES256", "use": "sig", "kid": kid}, nil)
}

// NewSigningKey makes an RS256 private key with kid, for ImportKey.
func NewSigningKey(t testing.TB, kid string) jose.JSONWebKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: string(jose.RS256), Use: "sig"}
}

// ImportKey makes key (a private key) the one Hydra signs access tokens
// with from now on: two providers given one key sign alike, and differ
// only in their issuer.
func (h *Hydra) ImportKey(t testing.TB, key jose.JSONWebKey) {
	t.Helper()
	h.call(t, http.MethodPut, "/admin/keys/"+AccessTokenKeys+"/"+url.PathEscape(key.KeyID), key, nil)
}

// Keys returns Hydra's published keys.
func (h *Hydra) Keys(t testing.TB) jose.JSONWebKeySet {
	t.Helper()
	var set jose.JSONWebKeySet
	h.getJSON(t, strings.TrimSuffix(h.Issuer, "/")+"/.well-known/jwks.json", &set)
	return set
}

// LoginForm recognizes a provider's login form: given a page the browser
// landed on (answered 200), it says whether that is the form (ok), where
// to post it (action) and what (form), as user with password.
type LoginForm func(page *url.URL, user, password string) (action string, form url.Values, ok bool)

// HydraLogin is the login form of Hydra's login app in StartHydra.
func HydraLogin(page *url.URL, user, password string) (string, url.Values, bool) {
	ch := page.Query().Get("login_challenge")
	if page.Path != "/login" || ch == "" {
		return "", nil, false
	}
	return page.ResolveReference(&url.URL{Path: "/login"}).String(),
		url.Values{"login_challenge": {ch}, "username": {user}, "password": {password}}, true
}

// Browser is a person's browser at a provider: it follows redirects by
// hand, signing in at the provider's login form as User with Password.
type Browser struct {
	User, Password string
	login          LoginForm
	c              *http.Client
}

// NewBrowser returns a browser with an empty cookie jar that signs in at
// login forms.
func NewBrowser(user, password string, login LoginForm) *Browser {
	jar, _ := cookiejar.New(nil)
	return &Browser{User: user, Password: password, login: login, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		Transport:     &http.Transport{DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Visit follows redirects from start, posting the login form when it
// meets one, until a URL with prefix stop (returned) or a final answer
// (returned with its status and body).
func (b *Browser) Visit(t testing.TB, start, stop string) (*url.URL, int, string) {
	t.Helper()
	u, err := url.Parse(start)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if stop != "" && strings.HasPrefix(u.String(), stop) {
			return u, 0, ""
		}
		resp, err := b.c.Get(u.String())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if action, form, ok := b.login(u, b.User, b.Password); ok && resp.StatusCode == http.StatusOK {
			resp, err = b.c.PostForm(action, form)
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		loc := resp.Header.Get("Location")
		if resp.StatusCode < 300 || resp.StatusCode > 399 || loc == "" {
			return u, resp.StatusCode, string(body)
		}
		next, err := u.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		u = next
	}
	t.Fatalf("more than 20 redirects from %s", start)
	return nil, 0, ""
}

// Token signs the browser's user in at Hydra as client c by the
// authorization code flow with PKCE, asking for resource (RFC 8707; ""
// asks for none) and scopes, and returns the access token.
func (h *Hydra) Token(t testing.TB, b *Browser, c Client, resource string, scopes ...string) string {
	t.Helper()
	base := strings.TrimSuffix(h.Issuer, "/")
	cfg := oauth2.Config{ClientID: c.ID, ClientSecret: c.Secret, RedirectURL: c.RedirectURIs[0], Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: base + "/oauth2/auth", TokenURL: base + "/oauth2/token", AuthStyle: oauth2.AuthStyleInHeader}}
	verifier := oauth2.GenerateVerifier()
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	if resource != "" {
		opts = append(opts, oauth2.SetAuthURLParam("resource", resource))
	}
	back, status, body := b.Visit(t, cfg.AuthCodeURL("state-of-"+b.User, opts...), c.RedirectURIs[0])
	if back == nil || back.Query().Get("code") == "" {
		t.Fatalf("no code came back from hydra: %v %d %s", back, status, tail(body, 500))
	}
	ctx := context.WithValue(t.Context(), oauth2.HTTPClient, h.http)
	tok, err := cfg.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("code exchange at hydra: %v", err)
	}
	return tok.AccessToken
}

// serveApp is Hydra's login and consent app.
func (h *Hydra) serveApp(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/login" && r.Method == http.MethodGet:
		ch := r.URL.Query().Get("login_challenge")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<form method="post" action="/login"><input type="hidden" name="login_challenge" value="%s">`+
			`<input name="username"><input type="password" name="password"><button>Sign in</button></form>`, html.EscapeString(ch))
	case r.URL.Path == "/login" && r.Method == http.MethodPost:
		user, pass := r.PostFormValue("username"), r.PostFormValue("password")
		if want, ok := h.users[user]; !ok || want != pass {
			http.Error(w, "wrong user name or password", http.StatusUnauthorized)
			return
		}
		var next struct {
			RedirectTo string `json:"redirect_to"`
		}
		ch := url.QueryEscape(r.PostFormValue("login_challenge"))
		if err := h.do(http.MethodPut, "/admin/oauth2/auth/requests/login/accept?login_challenge="+ch, map[string]any{"subject": user}, &next); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		http.Redirect(w, r, next.RedirectTo, http.StatusFound)
	case r.URL.Path == "/consent":
		ch := url.QueryEscape(r.URL.Query().Get("consent_challenge"))
		var req struct {
			RequestedScope    []string `json:"requested_scope"`
			RequestedAudience []string `json:"requested_access_token_audience"`
			RequestURL        string   `json:"request_url"`
			Client            struct {
				Audience []string `json:"audience"`
			} `json:"client"`
		}
		if err := h.do(http.MethodGet, "/admin/oauth2/auth/requests/consent?consent_challenge="+ch, nil, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		audience := slices.Clone(req.RequestedAudience)
		if u, err := url.Parse(req.RequestURL); err == nil {
			for _, res := range u.Query()["resource"] {
				if slices.Contains(req.Client.Audience, res) && !slices.Contains(audience, res) {
					audience = append(audience, res)
				}
			}
		}
		var next struct {
			RedirectTo string `json:"redirect_to"`
		}
		grant := map[string]any{"grant_scope": req.RequestedScope, "grant_access_token_audience": audience}
		if err := h.do(http.MethodPut, "/admin/oauth2/auth/requests/consent/accept?consent_challenge="+ch, grant, &next); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		http.Redirect(w, r, next.RedirectTo, http.StatusFound)
	default:
		http.NotFound(w, r)
	}
}

// LockedBuffer is a bytes.Buffer safe for a writing process and the test.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
