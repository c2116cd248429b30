package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/server"
)

// TestForeignHostRefusedOnEveryRoute is issue 24 item 3 at the server: on
// a loopback listener every route, /mcp, /health, /metrics and the pages
// alike, refuses a Host that is not a loopback name or the host of a
// listed origin; and an Origin equal to such a Host is not the server's
// own.
func TestForeignHostRefusedOnEveryRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *server.Options) { o.AllowedOrigins = []string{"https://proxy.example"} })
	var pages atomic.Bool
	b.srv.SetPages(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pages.Store(true)
		if !b.srv.AllowOrigin(r) {
			http.Error(w, "origin refused", http.StatusForbidden)
		}
	}))
	ts := httptest.NewServer(b.srv.Handler())
	defer ts.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	do := func(method, path, host, origin string) int {
		t.Helper()
		body := io.Reader(nil)
		if method == http.MethodPost {
			body = strings.NewReader(toolsListReq)
		}
		req, err := http.NewRequest(method, ts.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	evil := "rebind.attacker.example:" + port
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/"}, {http.MethodGet, "/health"}, {http.MethodGet, "/metrics"},
		{http.MethodPost, "/mcp"}, {http.MethodGet, "/events"}, {http.MethodPost, "/tasks/x/cancel"},
	} {
		if code := do(tc.method, tc.path, evil, ""); code != http.StatusForbidden {
			t.Errorf("%s %s with Host %s = %d, want 403", tc.method, tc.path, evil, code)
		}
		if code := do(tc.method, tc.path, evil, "http://"+evil); code != http.StatusForbidden {
			t.Errorf("%s %s with Host and Origin %s = %d, want 403", tc.method, tc.path, evil, code)
		}
	}
	if pages.Load() {
		t.Error("a page handler ran for a foreign Host")
	}
	// The Origin check alone, as a page handler makes it: an Origin equal
	// to a foreign Host is not the server's own.
	req := httptest.NewRequest(http.MethodPost, "/", nil)
	req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7331}))
	req.Host = "rebind.attacker.example:7331"
	req.Header.Set("Origin", "http://rebind.attacker.example:7331")
	if b.srv.AllowOrigin(req) {
		t.Error("AllowOrigin took an Origin equal to a foreign Host for the server's own")
	}
	req.Host = "127.0.0.1:7331"
	req.Header.Set("Origin", "http://127.0.0.1:7331")
	if !b.srv.AllowOrigin(req) {
		t.Error("AllowOrigin refused the server's own loopback origin")
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "proxy.example"} {
		if code := do(http.MethodGet, "/health", host, ""); code != http.StatusOK {
			t.Errorf("/health with Host %s = %d, want 200", host, code)
		}
		if code := do(http.MethodGet, "/", host, "http://"+host); code != http.StatusOK && host != "proxy.example" {
			t.Errorf("a page with its own Host and Origin %s = %d, want 200", host, code)
		}
	}
}

// TestFailedCredentialBackoff is issue 24 item 9 on /mcp: after a small
// budget of refused tokens an address is answered 429 with Retry-After,
// even for a right token, the wait doubling with each further refusal;
// another address is not affected, and the block ends when it says.
func TestFailedCredentialBackoff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const good = "tok-ana-0123456789"
		b := setup(t, func(o *server.Options) { o.Auth = mustAuth(t, config.AuthOptions{UserTokens: "ana:" + good}) })
		h := b.srv.Handler()
		call := func(from, token string) (int, string) {
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(toolsListReq))
			req.Host = "127.0.0.1:7331"
			req.RemoteAddr = from + ":40000"
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", legacyVersion)
			req.Header.Set("Authorization", "Bearer "+token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec.Code, rec.Header().Get("Retry-After")
		}
		const attacker, other = "192.0.2.1", "192.0.2.2"
		for i := range 11 {
			if code, _ := call(attacker, "guess-0123456789abcdef"); code != http.StatusForbidden {
				t.Fatalf("wrong token %d = %d, want 403", i+1, code)
			}
		}
		if code, after := call(attacker, good); code != http.StatusTooManyRequests || after != "1" {
			t.Fatalf("over the budget: %d Retry-After %q, want 429 after 1", code, after)
		}
		if code, _ := call(other, good); code != http.StatusOK {
			t.Fatalf("another address = %d, want 200", code)
		}
		time.Sleep(time.Second)
		if code, _ := call(attacker, good); code != http.StatusOK {
			t.Fatalf("after the block = %d, want 200", code)
		}
		if code, _ := call(attacker, "guess-0123456789abcdef"); code != http.StatusForbidden {
			t.Fatalf("next wrong token = %d, want 403", code)
		}
		if code, after := call(attacker, good); code != http.StatusTooManyRequests || after != "2" {
			t.Fatalf("second block: %d Retry-After %q, want 429 after 2 (doubled)", code, after)
		}
	})
}

// TestHalfOpenSocketsPerAddress: on a serve that takes a credential, one
// address that opens many sockets and never finishes their
// headers holds at most its share of the slots, and a second address is
// still served.
func TestHalfOpenSocketsPerAddress(t *testing.T) {
	t.Parallel()
	const perAddr = 4
	b := setup(t, func(o *server.Options) {
		o.Limits = server.Limits{MaxConns: 16, PreAuthPerAddress: perAddr, ReadHeader: time.Minute}
		o.Auth = mustAuth(t, config.AuthOptions{UserTokens: "ana:tok-ana-0123456789"})
	})
	addr := listen(t, b)
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 20 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: "+addr+"\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	// The listener accepts in arrival order: the second address comes
	// after every socket of the first.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("second address /health = %d, want 200", resp.StatusCode)
	}
	// The first address's sockets beyond its share were turned away.
	refused := 0
	for _, c := range held[perAddr:] {
		_, got := closedWithin(t, c, 10*time.Second)
		if strings.HasPrefix(got, "HTTP/1.1 503") {
			refused++
		}
	}
	if refused != len(held)-perAddr {
		t.Errorf("%d of the %d sockets over the share refused, want all", refused, len(held)-perAddr)
	}
}
