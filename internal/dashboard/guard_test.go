package dashboard_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/dashboard"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/server/servertest"
)

const (
	aliceTok = "tok-alice-0123456789"
	bobTok   = "tok-bob-0123456789"
	twoUsers = "alice:" + aliceTok + ",bob:" + bobTok
)

// send makes one request with c to base+path, with Host set to host when
// not empty, a form body when form is not nil, and Origin when origin is
// not empty; it returns the status, headers and body.
func send(t *testing.T, c *http.Client, method, base, path, host, origin string, form url.Values) (int, http.Header, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestDashboardRefusesRebindingHost is issue 24 item 3: on an open
// loopback serve, a page whose own name was rebound to 127.0.0.1 (so its
// requests carry Host: rebind.attacker.example:PORT, and an Origin equal
// to it) reads no page, stream or CSRF token, and cancels nothing.
func TestDashboardRefusesRebindingHost(t *testing.T) {
	r := newRig(t, "")
	id := r.run(t, "alpha", "HOLD the secret prompt", "")
	r.waitAccepted(t, id)
	b := r.browser(t)
	_, _, page := b.get("/tasks/" + id)
	csrf := csrfOf(t, page)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(r.ts.URL, "http://"))
	evil := "rebind.attacker.example:" + port
	for _, path := range []string{"/", "/tasks/" + id, "/sessions", "/system", "/terminals", "/turns/t1", "/events?page=tasks", "/login", "/static/app.js"} {
		code, _, body := send(t, b.c, http.MethodGet, r.ts.URL, path, evil, "", nil)
		if code != http.StatusForbidden {
			t.Errorf("GET %s with Host %s = %d, want 403", path, evil, code)
		}
		if strings.Contains(body, "secret prompt") || strings.Contains(body, csrf) {
			t.Errorf("GET %s with Host %s showed the prompt or the CSRF token", path, evil)
		}
	}
	code, _, _ := send(t, b.c, http.MethodPost, r.ts.URL, "/tasks/"+id+"/cancel", evil, "http://"+evil, url.Values{"csrf": {csrf}})
	if code != http.StatusForbidden {
		t.Errorf("cancel with Host and Origin %s = %d, want 403", evil, code)
	}
	if _, _, body := b.get("/tasks/" + id); !strings.Contains(body, "s-running") {
		t.Fatal("a refused cancel changed the task")
	}
}

// TestEventStreamsCappedPerIdentity is issue 24 item 4 per identity: one
// sign-in holding its cap of event streams gets a clear 429 for the next,
// while another identity's streams, /mcp and /health are still served.
func TestEventStreamsCappedPerIdentity(t *testing.T) {
	r := newRigFull(t, twoUsers, false, nil, func(o *server.Options) { o.Limits.StreamsPerIdentity = 2 })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	bob := r.browser(t)
	bob.login(bobTok)
	for range 2 {
		openStream(ctx, t, bob, "/events?page=tasks").until(t, "event: live")
	}
	code, h, body := bob.get("/events?page=tasks")
	if code != http.StatusTooManyRequests || !strings.Contains(body, "close some dashboard tabs") || h.Get("Retry-After") == "" {
		t.Fatalf("stream over the cap = %d %q (Retry-After %q), want 429 saying what to do", code, body, h.Get("Retry-After"))
	}
	alice := r.browser(t)
	alice.login(aliceTok)
	openStream(ctx, t, alice, "/events?page=tasks").until(t, "event: live")
	if code, _, _ := alice.get("/health"); code != http.StatusOK {
		t.Errorf("/health = %d", code)
	}
	r.mcpRun(t, aliceTok, "hello from alice")
}

// TestStreamReserveKeepsMCPAndHealth is issue 24 item 4 across
// identities: streams of many sign-ins together never take the slots kept
// for /mcp and /health.
func TestStreamReserveKeepsMCPAndHealth(t *testing.T) {
	tokens := twoUsers
	users := []string{"u1", "u2", "u3", "u4"}
	for _, u := range users {
		tokens += "," + u + ":" + u + "-token-0123456789"
	}
	r := newRigFull(t, tokens, false, nil, func(o *server.Options) {
		o.Limits = server.Limits{MaxConns: 8, StreamReserve: 3, StreamsPerIdentity: 2}
	})
	base := "http://" + servertest.Listen(t, r.srv)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	opened, refused := 0, 0
	for _, u := range users {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Transport: tr, Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		if code, _, body := send(t, c, http.MethodPost, base, "/login", "", base, url.Values{"token": {u + "-token-0123456789"}}); code != http.StatusSeeOther {
			t.Fatalf("login %s: %d %s", u, code, body)
		}
		for range 2 {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/events?page=tasks", nil)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode == http.StatusOK {
				opened++
				defer resp.Body.Close()
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), "as many live pages") {
				t.Fatalf("stream of %s = %d %q, want 200 or 429", u, resp.StatusCode, b)
			}
			refused++
		}
		// A refused stream's connection goes back to the server.
		tr.CloseIdleConnections()
	}
	if opened != 5 || refused != 3 {
		t.Errorf("opened %d streams and had %d refused, want 5 and 3 (8 slots, 3 kept)", opened, refused)
	}
	// The closed connections free their slots as the server sees them go:
	// a bounded wait, which the streams alone would never end.
	// A bounded wait for the closed connections to be released.
	poll.Until(t, 10*time.Second, "/health to answer 200 while the streams are open", func() bool {
		code, _, _ := send(t, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, http.MethodGet, base, "/health", "", "", nil)
		return code == http.StatusOK
	})
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+aliceTok)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("alice's /mcp = %d while the streams are open, want 200", resp.StatusCode)
	}
}

// TestSessionsCappedPerIdentity is issue 24 item 6: one token's holder
// signing in over a thousand times pushes out only its own oldest logins,
// never another identity's.
func TestSessionsCappedPerIdentity(t *testing.T) {
	r := newRig(t, twoUsers)
	alice := r.browser(t)
	alice.login(aliceTok)
	var first, last *http.Cookie
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for i := range 1030 {
		req, _ := http.NewRequest(http.MethodPost, r.ts.URL+"/login", strings.NewReader(url.Values{"token": {bobTok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) == 0 {
			t.Fatalf("bob's login %d: %d", i, resp.StatusCode)
		}
		last = resp.Cookies()[0]
		if first == nil {
			first = last
		}
	}
	if code, _, _ := alice.get("/"); code != http.StatusOK {
		t.Errorf("alice's login after 1030 of bob's = %d, want 200", code)
	}
	for _, tc := range []struct {
		name   string
		cookie *http.Cookie
		want   int
	}{{"bob's first", first, http.StatusUnauthorized}, {"bob's last", last, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodGet, r.ts.URL+"/", nil)
		req.AddCookie(tc.cookie)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s login = %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}

// TestSessionCookieSecure is issue 24 item 8: the session cookie is Secure
// over TLS, behind a trusted proxy that says https, and on a non-loopback
// listener unless the operator opted out; an untrusted peer's
// X-Forwarded-Proto counts for nothing.
func TestSessionCookieSecure(t *testing.T) {
	proxies := func(o *server.Options) { o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")} }
	r := newRigFull(t, twoUsers, false, nil, proxies)
	optedOut := newRigFull(t, twoUsers, false, func(o *dashboard.Options) { o.InsecureCookie = true }, proxies)
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7331}
	public := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 7331}
	for _, tc := range []struct {
		name   string
		r      *rig
		local  net.Addr
		remote string
		tls    bool
		proto  string
		want   bool
	}{
		{"loopback plain", r, loopback, "127.0.0.1:5000", false, "", false},
		{"loopback tls", r, loopback, "127.0.0.1:5000", true, "", true},
		{"trusted proxy https", r, loopback, "127.0.0.1:5000", false, "https", true},
		{"trusted proxy http", r, loopback, "127.0.0.1:5000", false, "http", false},
		{"untrusted https claim", r, loopback, "127.0.0.2:5000", false, "https", false},
		{"untrusted https claim, opted out", optedOut, public, "198.51.100.7:5000", false, "https", false},
		{"non-loopback plain", r, public, "198.51.100.7:5000", false, "", true},
		{"non-loopback plain, opted out", optedOut, public, "198.51.100.7:5000", false, "", false},
		{"non-loopback tls, opted out", optedOut, public, "198.51.100.7:5000", true, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {aliceTok}}.Encode()))
			req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, tc.local))
			req.Host = tc.local.String()
			req.RemoteAddr = tc.remote
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tc.tls {
				req.TLS = &tls.ConnectionState{}
			}
			if tc.proto != "" {
				req.Header.Set("X-Forwarded-Proto", tc.proto)
			}
			rec := httptest.NewRecorder()
			tc.r.srv.Handler().ServeHTTP(rec, req)
			cookies := rec.Result().Cookies()
			if rec.Code != http.StatusSeeOther || len(cookies) == 0 {
				t.Fatalf("login = %d with %d cookies", rec.Code, len(cookies))
			}
			if cookies[0].Secure != tc.want {
				t.Errorf("Secure = %v, want %v", cookies[0].Secure, tc.want)
			}
		})
	}
}

// TestLoginBackoff is issue 24 item 9 on the sign-in form: past a small
// budget of refused tokens an address is answered 429 with Retry-After,
// even for a right token, and another address signs in as before.
func TestLoginBackoff(t *testing.T) {
	r := newRig(t, twoUsers)
	h := r.srv.Handler()
	login := func(from, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Host = "127.0.0.1:7331"
		req.RemoteAddr = from + ":5000"
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range 11 {
		if rec := login("192.0.2.1", "guess-0123456789abcdef"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d = %d, want 401", i+1, rec.Code)
		}
	}
	rec := login("192.0.2.1", aliceTok)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "Too many tokens were refused") {
		t.Fatalf("over the budget = %d (Retry-After %q), want 429 with the reason", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := login("192.0.2.2", aliceTok); rec.Code != http.StatusSeeOther {
		t.Errorf("another address = %d, want 303", rec.Code)
	}
}
