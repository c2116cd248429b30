package dashboard

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/clawconnect/clawconnect/server"
)

// OAuthSignIn signs browsers in through the authorization server of the
// MCP server's OAuth mode: the authorization code flow with PKCE (S256),
// as a confidential client when ClientSecret is set, else a public one.
// The access token it gets is the session's credential, checked on every
// request exactly as a bearer token on /mcp (issuer, audience, expiry,
// scopes); when it expires the browser goes through the sign-in again.
type OAuthSignIn struct {
	// Endpoints returns the authorization and token endpoints (from the
	// issuer's metadata). Required.
	Endpoints func(ctx context.Context) (authURL, tokenURL string, err error)
	// ClientID and ClientSecret are the dashboard's client at the issuer.
	ClientID, ClientSecret string
	// RedirectURL is the callback registered for the client: this
	// server's /oauth/callback as the browser reaches it.
	RedirectURL string
	// Resource is the canonical URL of /mcp, sent as the RFC 8707
	// resource indicator so the token's audience is this server.
	Resource string
	// Scopes are requested (the required ones, and "openid").
	Scopes []string
	// HTTPClient reaches the token endpoint; nil means a 10 s timeout.
	HTTPClient *http.Client
}

// Bounds of the sign-ins under way.
const (
	pendingTTL       = 10 * time.Minute
	maxPending       = 256
	stateCookie      = "clawconnect_oauth_state"
	callbackPath     = "/oauth/callback"
	signInStartPath  = "/oauth/start"
	exchangeDeadline = 15 * time.Second
)

// pendingSignIn is a sign-in sent to the issuer and not back yet.
type pendingSignIn struct {
	verifier string
	next     string
	expires  time.Time
}

// signIns holds the pending sign-ins by state. It is safe for concurrent
// use; its memory is bounded by maxPending.
type signIns struct {
	mu sync.Mutex
	m  map[string]pendingSignIn
}

func (p *signIns) put(state string, s pendingSignIn, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]pendingSignIn{}
	}
	var oldest string
	for k, v := range p.m {
		if now.After(v.expires) {
			delete(p.m, k)
		} else if oldest == "" || v.expires.Before(p.m[oldest].expires) {
			oldest = k
		}
	}
	if len(p.m) >= maxPending {
		delete(p.m, oldest)
	}
	p.m[state] = s
}

// take removes and returns the sign-in of state, if it is still pending.
func (p *signIns) take(state string, now time.Time) (pendingSignIn, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.m[state]
	delete(p.m, state)
	return s, ok && !now.After(s.expires)
}

// oauthConfig is the client of the sign-in, with endpoints discovered now.
func (d *Dashboard) oauthConfig(ctx context.Context) (*oauth2.Config, error) {
	o := d.o.OAuth
	authURL, tokenURL, err := o.Endpoints(ctx)
	if err != nil {
		return nil, err
	}
	style := oauth2.AuthStyleInHeader
	if o.ClientSecret == "" {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, RedirectURL: o.RedirectURL, Scopes: o.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: authURL, TokenURL: tokenURL, AuthStyle: style}}, nil
}

// safeNext is next when it is a path on this server, else "/". Browsers
// drop tabs and newlines anywhere in an address and read a backslash as a
// slash, so "/\t/evil.example" or "/\\evil.example" would leave the site:
// a control character or a backslash anywhere refuses it.
func safeNext(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") ||
		strings.ContainsFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return "/"
	}
	return next
}

// signInStart sends the browser to the issuer's authorization endpoint,
// remembering the PKCE verifier under a fresh state that is also set as a
// cookie: the callback must come back to the same browser.
func (d *Dashboard) signInStart(w http.ResponseWriter, r *http.Request) {
	if d.o.OAuth == nil {
		http.NotFound(w, r)
		return
	}
	cfg, err := d.oauthConfig(r.Context())
	if err != nil {
		d.o.Logger.Warn("dashboard sign-in: issuer unavailable", "err", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		d.render(w, "login", loginData{Next: safeNext(r.URL.Query().Get("next")), OAuth: true,
			Error: "The identity provider could not be reached; try again shortly."})
		return
	}
	state, verifier := randomID(), oauth2.GenerateVerifier()
	d.pending.put(state, pendingSignIn{verifier: verifier, next: safeNext(r.URL.Query().Get("next")), expires: d.o.Now().Add(pendingTTL)}, d.o.Now())
	// Lax, not Strict: the browser comes back from the issuer's site in a
	// top-level navigation, which a Strict cookie would not accompany.
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Value: state, Path: callbackPath, HttpOnly: true,
		Secure: d.secureCookie(r), SameSite: http.SameSiteLaxMode, MaxAge: int(pendingTTL / time.Second)})
	http.Redirect(w, r, cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier),
		oauth2.SetAuthURLParam("resource", d.o.OAuth.Resource)), http.StatusSeeOther)
}

// signInCallback completes the sign-in: the state must be this browser's,
// the code is exchanged with the PKCE verifier, and the access token must
// pass as it would on /mcp before a session is opened on it.
func (d *Dashboard) signInCallback(w http.ResponseWriter, r *http.Request) {
	if d.o.OAuth == nil {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	fail := func(status int, msg string) {
		w.WriteHeader(status)
		d.render(w, "login", loginData{Next: "/", OAuth: true, Error: msg})
	}
	http.SetCookie(w, &http.Cookie{Name: stateCookie, Value: "", Path: callbackPath, MaxAge: -1})
	if e := q.Get("error"); e != "" {
		fail(http.StatusUnauthorized, "The identity provider did not sign you in ("+clipText(e+": "+q.Get("error_description"))+").")
		return
	}
	state := q.Get("state")
	c, err := r.Cookie(stateCookie)
	if state == "" || err != nil || c.Value != state {
		fail(http.StatusForbidden, "This sign-in was not started by this browser: start again from the sign-in page.")
		return
	}
	p, ok := d.pending.take(state, d.o.Now())
	if !ok {
		fail(http.StatusForbidden, "This sign-in expired or was already used: start again.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), exchangeDeadline)
	defer cancel()
	if d.o.OAuth.HTTPClient != nil {
		ctx = context.WithValue(ctx, oauth2.HTTPClient, d.o.OAuth.HTTPClient)
	}
	cfg, err := d.oauthConfig(ctx)
	if err != nil {
		fail(http.StatusServiceUnavailable, "The identity provider could not be reached; try again shortly.")
		return
	}
	tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(p.verifier), oauth2.SetAuthURLParam("resource", d.o.OAuth.Resource))
	if err != nil {
		// The error may carry the provider's reply, never our secret.
		d.o.Logger.Warn("dashboard sign-in: code exchange failed", "err", err)
		fail(http.StatusBadGateway, "The identity provider did not give an access token for this server; ask the operator to check the client's settings.")
		return
	}
	id, err := d.srv.AuthenticateRequest(r, "", tok.AccessToken)
	if te := (*server.TokenError)(nil); errors.As(err, &te) {
		fail(http.StatusForbidden, "The identity provider signed you in, but this server does not accept the token: "+te.Description+".")
		return
	}
	if err != nil {
		// The cause names the issuer's endpoints: for the log, not the page.
		d.o.Logger.Warn("dashboard sign-in: token check failed", "err", err)
		fail(http.StatusServiceUnavailable, "The token could not be checked just now; try again shortly.")
		return
	}
	s := d.newSession(tok.AccessToken, id, tok.Expiry)
	d.setCookie(w, r, s)
	http.Redirect(w, r, p.next, http.StatusSeeOther)
}

// clipText bounds a value from the issuer shown on a page.
func clipText(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// signInURL is where a browser that is not signed in goes in OAuth mode.
func signInURL(next string) string {
	return signInStartPath + "?next=" + url.QueryEscape(safeNext(next))
}
