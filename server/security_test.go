package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/server/servertest"
)

// preflight sends an OPTIONS request with the given Origin.
func preflight(t *testing.T, url, origin string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// TestHTTPCrossOriginRefused is issue 11 item 3: a web page on another
// origin can neither preflight nor POST to /mcp, on an open server or one
// with tokens; listed origins and the server's own origin can, and an open
// server never answers with a wildcard.
func TestHTTPCrossOriginRefused(t *testing.T) {
	t.Parallel()
	const runTask = `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_task","arguments":{"task":"exfiltrate"}}}`
	for _, authOn := range []bool{false, true} {
		name := "open"
		if authOn {
			name = "tokens"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(o *server.Options) {
				o.AllowedOrigins = []string{"http://localhost:5173", "*"}
				if authOn {
					o.Auth = mustAuth(t, config.AuthOptions{UserTokens: "ana:tok-ana-0123456789"})
				}
			})
			ts := httptest.NewServer(b.srv.Handler())
			defer ts.Close()
			hdr := map[string]string{}
			if authOn {
				hdr["Authorization"] = "Bearer tok-ana-0123456789"
			}
			for _, evil := range []string{"http://evil.example", "null", "http://localhost:5174", "https://localhost:5173", "http://127.0.0.1.evil.example"} {
				code, h := preflight(t, ts.URL+"/mcp", evil)
				if authOn {
					// "*" is honoured with auth on: a page still needs a token.
					if code != http.StatusNoContent && evil != "null" {
						t.Errorf("preflight from %s with auth on and \"*\" listed = %d", evil, code)
					}
					continue
				}
				if code != http.StatusForbidden {
					t.Errorf("preflight from %s = %d, want 403", evil, code)
				}
				if v := h.Get("Access-Control-Allow-Origin"); v != "" {
					t.Errorf("preflight from %s got Access-Control-Allow-Origin %q", evil, v)
				}
				hdr["Origin"] = evil
				code, h, body := rpc(t, ts.URL+"/mcp", runTask, hdr)
				if code != http.StatusForbidden || !strings.Contains(body, "cross-origin") {
					t.Errorf("POST from %s = %d %s, want 403", evil, code, body)
				}
				if v := h.Get("Access-Control-Allow-Origin"); v != "" {
					t.Errorf("POST from %s got Access-Control-Allow-Origin %q", evil, v)
				}
			}
			if !authOn {
				if n := len(b.tasks.Runs()); n != 0 {
					t.Fatalf("%d task(s) submitted by cross-origin requests", n)
				}
			}
			// Allowed: a listed origin, the server's own origin, no Origin.
			for _, good := range []string{"http://localhost:5173", "http://LOCALHOST:5173/", ts.URL} {
				code, h := preflight(t, ts.URL+"/mcp", good)
				if code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != good {
					t.Errorf("preflight from %s = %d, allow-origin %q", good, code, h.Get("Access-Control-Allow-Origin"))
				}
				hdr["Origin"] = good
				if code, _, body := rpc(t, ts.URL+"/mcp", toolsListReq, hdr); code != http.StatusOK {
					t.Errorf("POST from %s = %d %s", good, code, body)
				}
			}
			delete(hdr, "Origin")
			code, h, body := rpc(t, ts.URL+"/mcp", toolsListReq, hdr)
			if code != http.StatusOK {
				t.Fatalf("POST without Origin = %d %s", code, body)
			}
			wantACAO := ""
			if authOn {
				wantACAO = "*"
			}
			if got := h.Get("Access-Control-Allow-Origin"); got != wantACAO {
				t.Errorf("Access-Control-Allow-Origin without Origin = %q, want %q", got, wantACAO)
			}
		})
	}
}

// FuzzHTTPAuthAndOrigin drives /mcp with arbitrary Origin, Authorization
// and ?pass= values and checks the two gates against a plain oracle: a
// request is served only with the right token and only from no origin, a
// listed origin or the server's own; a refused origin never gets a CORS
// header; nothing panics.
func FuzzHTTPAuthAndOrigin(f *testing.F) {
	f.Add("", "Bearer tok-ana-0123456789", "", false)
	f.Add("http://evil.example", "Bearer tok-ana-0123456789", "", false)
	f.Add("http://localhost:5173", "", "tok-ana-0123456789", true)
	f.Add("HTTP://LOCALHOST:5173/", "bearer  tok-ana-0123456789 ", "", false)
	f.Add("null", "Bearer tok-ana-0123456789", "tok-ana-0123456789", true)
	f.Add("http://127.0.0.1:7331", "Basic tok-ana-0123456789", "nope", false)
	f.Add("http://local%68ost:5173", "Bearer tok-ana-0123456789", "", true)
	const token = "tok-ana-0123456789"
	srvs := map[bool]*server.Server{}
	for _, authOn := range []bool{false, true} {
		b := setup(f, func(o *server.Options) {
			o.AllowedOrigins = []string{"http://localhost:5173"}
			if authOn {
				o.Auth = mustAuth(f, config.AuthOptions{UserTokens: "ana:" + token})
			}
		})
		srvs[authOn] = b.srv
	}
	var fuzzAddr atomic.Uint32
	f.Fuzz(func(t *testing.T, origin, authz, pass string, authOn bool) {
		if strings.ContainsAny(origin+authz, "\r\n\x00") {
			t.Skip("not representable in a header")
		}
		target := "/mcp"
		if pass != "" {
			target += "?pass=" + url.QueryEscape(pass)
		}
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(toolsListReq))
		req.Host = "127.0.0.1:7331"
		// Each input from an address of its own: the refusals of the
		// others would otherwise back it off (429) under the sign-in budget.
		n := fuzzAddr.Add(1)
		req.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:1234", byte(n>>16), byte(n>>8), byte(n))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", legacyVersion)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		rec := httptest.NewRecorder()
		srvs[authOn].Handler().ServeHTTP(rec, req)

		o := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(origin), "/"))
		originOK := origin == "" || o == "http://localhost:5173" || o == "http://127.0.0.1:7331" || o == "https://127.0.0.1:7331"
		bearer := ""
		if len(authz) > 7 && strings.EqualFold(authz[:7], "bearer ") {
			bearer = strings.TrimSpace(authz[7:])
		}
		authOK := !authOn || pass == token || bearer == token
		acao := rec.Header().Get("Access-Control-Allow-Origin")
		if rec.Code != http.StatusForbidden && (!originOK || !authOK) {
			t.Fatalf("served %d (origin %q ok=%v, auth ok=%v)", rec.Code, origin, originOK, authOK)
		}
		if !originOK && acao != "" {
			t.Fatalf("refused origin %q got Access-Control-Allow-Origin %q", origin, acao)
		}
		if !authOn && acao == "*" {
			t.Fatal("open server sent a wildcard CORS header")
		}
		if originOK && authOK && rec.Code != http.StatusOK {
			t.Fatalf("allowed request refused: %d %s", rec.Code, rec.Body)
		}
	})
}

// listen runs ListenAndServe on a loopback port until the test ends and
// returns the bound address.
func listen(t *testing.T, b *bundle) string {
	t.Helper()
	return servertest.Listen(t, b.srv)
}

// closedWithin reads c until the server closes it and reports how long
// that took; it fails the test if that takes longer than bound.
func closedWithin(t *testing.T, c net.Conn, bound time.Duration) (time.Duration, string) {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(bound))
	data, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open after %s (read %q)", bound, data)
	}
	return time.Since(start), string(data)
}

// TestHTTPConnectionLimits is issue 11 item 6: a body dripped slowly and an
// idle keep-alive connection are closed within their limits, and
// connections over the cap are turned away at once.
func TestHTTPConnectionLimits(t *testing.T) {
	t.Parallel()
	const readBody, idle = 300 * time.Millisecond, 300 * time.Millisecond
	b := setup(t, func(o *server.Options) {
		o.Limits = server.Limits{ReadBody: readBody, Idle: idle, MaxConns: 3}
	})
	addr := listen(t, b)
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	t.Run("slow body", func(t *testing.T) {
		c := dial()
		// Headers promise 100 bytes; one arrives, the rest never does.
		_, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{")
		if err != nil {
			t.Fatal(err)
		}
		took, _ := closedWithin(t, c, 20*readBody)
		if took < readBody/2 {
			t.Errorf("closed after %s, before the %s body limit", took, readBody)
		}
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		c := dial()
		if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: "+addr+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/health = %d", resp.StatusCode)
		}
		closedWithin(t, c, 20*idle)
	})

	t.Run("long poll outlives the body limit", func(t *testing.T) {
		res, err := b.tasks.Run(t.Context(), server.RunRequest{Agent: "alpha", Task: "x"})
		if err != nil {
			t.Fatal(err)
		}
		// check_task waits its 1 s floor, over three times the body limit.
		code, _, body := rpc(t, "http://"+addr+"/mcp", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"check_task","arguments":{"jobId":"`+res.JobID+`","waitMs":1000}}}`, nil)
		if code != http.StatusOK || !strings.Contains(body, `"status":"running"`) {
			t.Fatalf("long poll = %d %s", code, body)
		}
	})

	t.Run("connection cap", func(t *testing.T) {
		// Three stalled connections (headers never finish) fill the cap.
		var held []net.Conn
		for range 3 {
			c := dial()
			if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\n"); err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		// The server has accepted them once a fourth is turned away; retry
		// until the accept loop has counted all three.
		var got string
		for range 50 {
			c := dial()
			_, got = closedWithin(t, c, 5*time.Second)
			if strings.HasPrefix(got, "HTTP/1.1 503") {
				break
			}
		}
		if !strings.HasPrefix(got, "HTTP/1.1 503") {
			t.Fatalf("connection over the cap answered %q, want 503", got)
		}
		for _, c := range held {
			c.Close()
		}
	})
}
