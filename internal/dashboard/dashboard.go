// Package dashboard is the live web dashboard of `clawconnect serve`: HTML
// pages of tasks, sessions and health, rendered by html/template, kept
// current over server-sent events, with every action taken through the
// same tool calls, validation and owner isolation as /mcp.
package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

//go:embed assets
var assets embed.FS

// cookieName names the dashboard's session cookie.
const cookieName = "clawconnect_session"

// Defaults of Options.
const (
	defaultSessionTTL = 12 * time.Hour
	// maxSessions bounds the logins held in all, maxSessionsPerIdentity
	// those of one identity: its own oldest goes first, so one token's
	// holder signing in over and over signs out no one else.
	maxSessions            = 1024
	maxSessionsPerIdentity = 32
	// defaultRefresh re-reads a page that no change feed announces;
	// defaultFeedRefresh is the safety net when the feed does.
	defaultRefresh     = time.Second
	defaultFeedRefresh = 30 * time.Second
	// healthRefresh re-reads the Health page (gateway states and process
	// heartbeats are not announced).
	healthRefresh    = 2 * time.Second
	defaultHeartbeat = 15 * time.Second
)

// csp is the Content-Security-Policy of every response: nothing inline,
// nothing from elsewhere, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Options configures a Dashboard. Server is required; every zero value is
// a documented default.
type Options struct {
	// Server is the MCP server whose tools, credentials and origin policy
	// the dashboard shares.
	Server *server.Server
	// Feed, when set, wakes the event streams when any process changes a
	// task on the page, or creates one (the store's change feed).
	Feed Feed
	// Attachments, when set, adds the attachment lineage of its session
	// (every record, superseded and detached ones too) to a task page.
	Attachments AttachmentReader
	// Terminals, when set, adds the Terminals, Turn and watch pages over
	// the terminal Turn service; TerminalRecords adds binding generations
	// and Turn event logs to them.
	Terminals       Terminals
	TerminalRecords TerminalRecords
	// Processes, when set, lists the processes sharing the store on the
	// Health page (the store's process registry).
	Processes ProcessLister
	// Runtimes names the agent-session runtime modules loaded, for Health.
	Runtimes []string
	// StoreInfo describes the store for Health ("sqlite /path", "postgres").
	StoreInfo string
	// Refresh is the longest an open Tasks, task or Sessions page goes
	// without re-reading what it shows when nothing woke it: default 1 s
	// without a Feed, and 30 s with one, whose announcements wake the
	// streams at once (the re-read only covers a lost announcement).
	// Streams also re-read at once when the dashboard itself acts. Health
	// re-reads at least every 2 s, the terminal pages every 2 s.
	Refresh time.Duration
	// Heartbeat is how often a quiet event stream sends a comment, so that
	// proxies keep it open; default 15 s.
	Heartbeat time.Duration
	// SessionTTL bounds a browser login; default 12 h.
	SessionTTL time.Duration
	// InsecureCookie sends the session cookie without Secure when a
	// request came over plain HTTP to a non-loopback address
	// (CLAWCONNECT_INSECURE_COOKIE). Off, such a cookie is Secure, and a
	// browser keeps it only over HTTPS (a TLS proxy in front).
	InsecureCookie bool
	// OAuth, when set, signs browsers in through the authorization server
	// of the server's OAuth mode (see OAuthSignIn).
	OAuth *OAuthSignIn
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
}

// Feed is the store's change feed: it wakes a page's event stream when
// any process changes a task or creates one.
type Feed interface {
	store.ChangeFeed
	store.NewTaskFeed
}

// ProcessLister lists the processes sharing the store (part of
// store.ProcessRegistry).
type ProcessLister interface {
	Processes(ctx context.Context) ([]store.Process, error)
}

// Dashboard serves the pages, the static assets and the event stream. It is
// an http.Handler, safe for concurrent use; it owns no goroutines beyond
// the requests it serves.
type Dashboard struct {
	o    Options
	srv  *server.Server
	tpl  *template.Template
	mux  *http.ServeMux
	hub  hub
	stat fs.FS

	mu       sync.Mutex
	sessions map[string]*session
	pending  signIns // OAuth sign-ins under way
}

// session is one browser login.
type session struct {
	id      string
	owner   taskapi.Identity // who signed in, for the per-identity cap
	token   string           // the credential, re-checked on every request
	csrf    string
	expires time.Time
	flash   string
	// perRequest: the credential came with the request (requestCredential).
	perRequest bool
	// tokenExpiry is when the access token of an OAuth sign-in expires, as
	// the issuer said at the exchange; zero when unknown. Until then the
	// session outlasts an outage of the issuer.
	tokenExpiry time.Time
}

// New returns the dashboard.
func New(o Options) (*Dashboard, error) {
	if o.Server == nil {
		return nil, errors.New("dashboard: Options.Server is required")
	}
	if o.Refresh <= 0 {
		o.Refresh = defaultRefresh
		if o.Feed != nil {
			o.Refresh = defaultFeedRefresh
		}
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaultHeartbeat
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = defaultSessionTTL
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	tpl, err := template.New("").Funcs(funcs(o.Now)).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, err
	}
	stat, err := fs.Sub(assets, "assets/static")
	if err != nil {
		return nil, err
	}
	d := &Dashboard{o: o, srv: o.Server, tpl: tpl, stat: stat, sessions: map[string]*session{}}
	d.routes()
	return d, nil
}

func (d *Dashboard) routes() {
	m := http.NewServeMux()
	static := http.FileServerFS(d.stat)
	m.Handle("GET /static/", http.StripPrefix("/static/", static))
	m.HandleFunc("GET /login", d.loginPage)
	m.HandleFunc("POST /login", d.login)
	m.HandleFunc("GET "+signInStartPath, d.signInStart)
	m.HandleFunc("GET "+callbackPath, d.signInCallback)
	m.HandleFunc("POST /logout", d.withSession(d.logout))
	m.HandleFunc("GET /{$}", d.withSession(d.tasksPage))
	m.HandleFunc("GET /tasks/{id}", d.withSession(d.taskPage))
	m.HandleFunc("POST /tasks/{id}/cancel", d.withSession(d.cancel))
	m.HandleFunc("GET /sessions", d.withSession(d.sessionsPage))
	m.HandleFunc("GET /system", d.withSession(d.healthPage))
	m.HandleFunc("GET /terminals", d.withSession(d.terminalsPage))
	m.HandleFunc("GET /turns/{id}", d.withSession(d.turnPage))
	m.HandleFunc("POST /turns/{id}/cancel", d.withSession(d.cancelTurn))
	m.HandleFunc("POST /turns/{id}/retry-callback", d.withSession(d.retryCallback))
	m.HandleFunc("GET /watches/{id}", d.withSession(d.watchPage))
	m.HandleFunc("POST /watches/{id}/unwatch", d.withSession(d.unwatch))
	m.HandleFunc("GET /events", d.withSession(d.events))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	d.mux = m
}

// ServeHTTP implements http.Handler.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	d.mux.ServeHTTP(w, r)
}

// request is what a page handler knows about its caller.
type request struct {
	sess   *session
	id     taskapi.Identity
	caller *server.Caller
}

// withSession resolves the caller: a login cookie whose credential still
// authenticates, or, when no credential is configured, an anonymous session
// made on the spot (so that its buttons still carry a CSRF token). A
// session whose token the issuer cannot be asked about now is not dropped
// (holdThroughOutage). Anything else gets the login form with 401.
func (d *Dashboard) withSession(next func(http.ResponseWriter, *http.Request, request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s := d.lookup(r)
		if s == nil {
			var done bool
			if s, done = d.requestCredential(w, r); done {
				return
			}
		}
		if s == nil && !d.srv.AuthRequired() {
			if madeForAnotherSite(r) {
				http.Error(w, "refused: another site's page asked for the dashboard; open it at its own address", http.StatusForbidden)
				return
			}
			s = d.newSession("", taskapi.Identity{}, time.Time{})
			d.setCookie(w, r, s)
		}
		if s == nil {
			d.refuse(w, r)
			return
		}
		id, err := d.srv.AuthenticateToken(r.Context(), s.token)
		if errors.Is(err, server.ErrVerifierUnavailable) && !d.tokenExpired(s) {
			if !d.holdThroughOutage(w, r, s, err) {
				return
			}
			id, err = s.owner, nil
		}
		if err != nil {
			d.drop(s.id)
			d.refuse(w, r)
			return
		}
		d.srv.Admit(r)
		next(w, r, request{sess: s, id: id, caller: d.srv.Caller(id)})
	}
}

// requestCredential takes a credential sent with the request exactly as
// /mcp takes it: "Authorization: Bearer <token>" or "?pass=<token>" (unless
// the server takes none from addresses). A page opened with ?pass= signs
// the browser in (the cookie, as the form does; not when another site sent
// the browser there) and reloads without the token in its address, so it
// stays out of history and links. Otherwise the credential holds for this request only:
// nothing is stored, and no CSRF token is asked, since a browser never adds
// such a credential to a forged request by itself. done reports that the
// response was written (a refusal or the redirect).
func (d *Dashboard) requestCredential(w http.ResponseWriter, r *http.Request) (s *session, done bool) {
	pass := d.srv.QueryPass(r)
	var bearer string
	if v := r.Header.Get("Authorization"); len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		bearer = strings.TrimSpace(v[7:])
	}
	if pass == "" && bearer == "" {
		return nil, false
	}
	id, err := d.srv.AuthenticateRequest(r, pass, bearer)
	if te := (*server.ThrottledError)(nil); errors.As(err, &te) {
		server.SetRetryAfter(w, te)
		http.Error(w, "too many tokens were refused from this address: "+te.Error(), http.StatusTooManyRequests)
		return nil, true
	}
	if err != nil {
		http.Error(w, "that token was not accepted: use a token from MCP_USER_TOKENS or the PUBLIC_MCP_PASS password", http.StatusUnauthorized)
		return nil, true
	}
	token := bearer
	if token == "" {
		token = pass
	}
	if pass != "" && bearer == "" && r.Method == http.MethodGet && r.URL.Path != "/events" {
		// A link on another site could sign the browser in as whoever
		// made it (login CSRF), as a form posted from there could.
		if err := d.checkSite(r); err != nil {
			http.Error(w, "sign-in refused: "+err.Error()+"; open the address yourself, or sign in at /login", http.StatusForbidden)
			return nil, true
		}
		s := d.newSession(token, id, time.Time{})
		d.setCookie(w, r, s)
		u := *r.URL
		q := u.Query()
		q.Del("pass")
		u.RawQuery = q.Encode()
		u.Scheme, u.Host = "", ""
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return nil, true
	}
	return &session{owner: id, token: token, csrf: randomID(), expires: d.o.Now().Add(time.Minute), perRequest: true}, false
}

// tokenExpired reports whether the session's token is known to have
// expired: its sign-in is over, whatever the issuer would say.
func (d *Dashboard) tokenExpired(s *session) bool {
	return !s.tokenExpiry.IsZero() && !d.o.Now().Before(s.tokenExpiry)
}

// holdThroughOutage decides a session whose token the issuer could not be
// asked about (cause) and that is not known to have expired. A sign-in
// whose expiry is known goes on as the user it was (true): a passing
// outage must not sign anyone out. One whose expiry is unknown is kept for
// a retry but not served: it is answered 503 (false, the response is
// written).
func (d *Dashboard) holdThroughOutage(w http.ResponseWriter, r *http.Request, s *session, cause error) bool {
	if !s.tokenExpiry.IsZero() {
		d.o.Logger.Warn("dashboard: the identity provider could not be asked; the sign-in holds until its token expires",
			"until", s.tokenExpiry.UTC().Format(time.RFC3339), "err", cause)
		return true
	}
	d.o.Logger.Warn("dashboard: the identity provider could not be asked; the sign-in is kept for a retry", "err", cause)
	const msg = "The identity provider could not be reached to check your sign-in; you are still signed in: retry shortly."
	w.Header().Set("Retry-After", "5")
	if r.URL.Path == "/events" || r.Method != http.MethodGet {
		http.Error(w, msg, http.StatusServiceUnavailable)
		return false
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	d.render(w, "login", loginData{Next: r.URL.Path, OAuth: d.o.OAuth != nil, Error: msg})
	return false
}

func (d *Dashboard) refuse(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/events" || r.Method != http.MethodGet {
		http.Error(w, "not signed in: open the dashboard and sign in with your token", http.StatusUnauthorized)
		return
	}
	if d.o.OAuth != nil {
		http.Redirect(w, r, signInURL(r.URL.Path), http.StatusSeeOther)
		return
	}
	w.WriteHeader(http.StatusUnauthorized)
	d.render(w, "login", loginData{Next: r.URL.Path})
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// newSession opens a login of id with its credential, whose expiry
// (tokenExpiry) is known for an OAuth sign-in. Expired logins go first;
// then, over its cap, id's own oldest login; then, over the cap in all,
// the oldest login of whoever holds the most, so that no identity can push
// out another that holds fewer.
func (d *Dashboard) newSession(token string, id taskapi.Identity, tokenExpiry time.Time) *session {
	s := &session{id: randomID(), owner: id, token: token, csrf: randomID(), expires: d.o.Now().Add(d.o.SessionTTL), tokenExpiry: tokenExpiry}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.o.Now()
	held := map[taskapi.Identity]int{}
	for sid, old := range d.sessions {
		if now.After(old.expires) {
			delete(d.sessions, sid)
			continue
		}
		held[old.owner]++
	}
	if held[s.owner] >= maxSessionsPerIdentity {
		d.evictOldestLocked(s.owner)
	} else if len(d.sessions) >= maxSessions {
		top := s.owner
		for o, n := range held {
			if n > held[top] {
				top = o
			}
		}
		d.evictOldestLocked(top)
	}
	d.sessions[s.id] = s
	return s
}

// evictOldestLocked drops owner's login that expires first.
func (d *Dashboard) evictOldestLocked(owner taskapi.Identity) {
	var oldest *session
	for _, old := range d.sessions {
		if old.owner == owner && (oldest == nil || old.expires.Before(oldest.expires)) {
			oldest = old
		}
	}
	if oldest != nil {
		delete(d.sessions, oldest.id)
	}
}

func (d *Dashboard) lookup(r *http.Request) *session {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sessions[c.Value]
	if s == nil || d.o.Now().After(s.expires) {
		return nil
	}
	return s
}

func (d *Dashboard) drop(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.sessions, id)
}

func (d *Dashboard) setCookie(w http.ResponseWriter, r *http.Request, s *session) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: s.id, Path: "/", HttpOnly: true, Secure: d.secureCookie(r),
		SameSite: http.SameSiteStrictMode, Expires: s.expires,
	})
}

// secureCookie reports whether the session cookie of r gets Secure: when
// r came over TLS (the server's, or a trusted proxy's that says so), and
// always beyond loopback unless the operator opted out, where a cookie
// sent in clear could be read off the network.
func (d *Dashboard) secureCookie(r *http.Request) bool {
	return d.srv.SecureRequest(r) || (!server.LoopbackRequest(r) && !d.o.InsecureCookie)
}

// takeFlash returns and clears the session's one-time message.
func (d *Dashboard) takeFlash(s *session) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := s.flash
	s.flash = ""
	return f
}

func (d *Dashboard) setFlash(s *session, msg string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s.flash = msg
}

// checkAction guards a state-changing request: its Origin (when the browser
// sent one) must be the server's own or an allowed one, and its form must
// carry the session's CSRF token.
func (d *Dashboard) checkAction(r *http.Request, s *session) error {
	if err := d.checkSite(r); err != nil {
		return err
	}
	if s.perRequest {
		return nil
	}
	got := r.PostFormValue("csrf")
	if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
		return errors.New("the form is stale or was not sent by this dashboard: reload the page and try again")
	}
	return nil
}

// checkSite refuses a request from another site: an Origin that is not
// the server's own or an allowed one, or, without an Origin, a browser's
// Sec-Fetch-Site of cross-site.
func (d *Dashboard) checkSite(r *http.Request) error {
	if !d.srv.AllowOrigin(r) {
		return errors.New("cross-origin request refused")
	}
	if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return errors.New("cross-site request refused")
	}
	return nil
}

// madeForAnotherSite reports a request that another site's page made for
// itself (an image, a frame, a script, a fetch), as opposed to a person
// following a link here or the dashboard's own pages: it may not open a
// session, or any site could push the operator's out of the capped
// sessions. Without Fetch Metadata (not a browser) it is not refused.
func madeForAnotherSite(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return false
	}
	return r.Header.Get("Sec-Fetch-Mode") != "navigate" || r.Header.Get("Sec-Fetch-Dest") != "document"
}

type loginData struct {
	Next  string
	Error string
	OAuth bool // offer the identity provider's sign-in
}

func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	if !d.srv.AuthRequired() {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	d.render(w, "login", loginData{Next: "/", OAuth: d.o.OAuth != nil})
}

// login checks the posted token as /mcp would and opens a session.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	// A sign-in from another site could log the browser in as someone
	// else (login CSRF).
	if err := d.checkSite(r); err != nil {
		http.Error(w, "sign-in refused: "+err.Error(), http.StatusForbidden)
		return
	}
	token := r.PostFormValue("token")
	next := r.PostFormValue("next")
	if next == "" || next[0] != '/' || (len(next) > 1 && (next[1] == '/' || next[1] == '\\')) {
		next = "/"
	}
	id, err := d.srv.AuthenticateRequest(r, "", token)
	if te := (*server.ThrottledError)(nil); errors.As(err, &te) {
		server.SetRetryAfter(w, te)
		w.WriteHeader(http.StatusTooManyRequests)
		d.render(w, "login", loginData{Next: next, Error: "Too many tokens were refused from this address: " + te.Error() + "."})
		return
	}
	if err != nil || (d.srv.AuthRequired() && token == "") {
		w.WriteHeader(http.StatusUnauthorized)
		d.render(w, "login", loginData{Next: next, Error: "That token was not accepted. Use a token from MCP_USER_TOKENS or the PUBLIC_MCP_PASS password."})
		return
	}
	s := d.newSession(token, id, time.Time{})
	d.setCookie(w, r, s)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request, q request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := d.checkAction(r, q.sess); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	d.drop(q.sess.id)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: d.secureCookie(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func (d *Dashboard) render(w http.ResponseWriter, name string, data any) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
	}
	if err := d.tpl.ExecuteTemplate(w, name, data); err != nil {
		d.o.Logger.Warn("render dashboard page", "page", name, "err", err)
	}
}

// cancel is cancel_task through the caller's tools.
func (d *Dashboard) cancel(w http.ResponseWriter, r *http.Request, q request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := d.checkAction(r, q.sess); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	_, note, err := q.caller.CancelTask(ctx, id)
	switch {
	case errors.Is(err, server.ErrRefused):
		note = err.Error()
	case err != nil:
		d.o.Logger.Warn("dashboard cancel", "job_id", id, "err", err)
		note = "cancel failed: " + err.Error()
	}
	d.setFlash(q.sess, note)
	d.hub.notify()
	http.Redirect(w, r, "/tasks/"+id, http.StatusSeeOther)
}
