package dashboard_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clawconnect/clawconnect/server"
)

// fetchFrom makes a cookieless GET of path as a browser does for a
// request another page started: site, mode and dest are its Fetch
// Metadata (Sec-Fetch-Site, -Mode, -Dest), origin its Origin ("" sends
// none).
func fetchFrom(t *testing.T, base, path, site, mode, dest, origin string) (int, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	for k, v := range map[string]string{"Sec-Fetch-Site": site, "Sec-Fetch-Mode": mode, "Sec-Fetch-Dest": dest, "Origin": origin} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header
}

// TestAnotherSiteOpensNoSession: on an open server, requests another
// site's page makes (images, frames, fetches) open no session, so they
// cannot push the operator's out of the capped ones, and they hold no
// event stream; a person following a link from another site still gets
// the page.
func TestAnotherSiteOpensNoSession(t *testing.T) {
	r := newRig(t, "")
	b := r.browser(t)
	if code, h, _ := b.get("/"); code != http.StatusOK || h.Get("Set-Cookie") == "" {
		t.Fatalf("the operator's first visit: %d, cookie %q", code, h.Get("Set-Cookie"))
	}
	for i := range 40 {
		dest, mode := "image", "no-cors"
		if i%2 == 1 {
			dest, mode = "iframe", "navigate"
		}
		if code, h := fetchFrom(t, r.ts.URL, "/", "cross-site", mode, dest, ""); code != http.StatusForbidden || h.Get("Set-Cookie") != "" {
			t.Fatalf("another site's %s: %d, cookie %q; want 403 and none", dest, code, h.Get("Set-Cookie"))
		}
	}
	if code, h, _ := b.get("/"); code != http.StatusOK || h.Get("Set-Cookie") != "" {
		t.Errorf("the operator after another site's requests: %d, cookie %q; want their session kept", code, h.Get("Set-Cookie"))
	}
	if code, h := fetchFrom(t, r.ts.URL, "/", "cross-site", "navigate", "document", ""); code != http.StatusOK || h.Get("Set-Cookie") == "" {
		t.Errorf("a link followed from another site: %d, cookie %q; want the page", code, h.Get("Set-Cookie"))
	}
	if code, _ := fetchFrom(t, r.ts.URL, "/events?page=tasks", "cross-site", "cors", "empty", "https://evil.example"); code != http.StatusForbidden {
		t.Errorf("another site's event stream: %d, want 403", code)
	}
	req, _ := http.NewRequest(http.MethodGet, r.ts.URL+"/events?page=tasks", nil)
	req.Header.Set("Origin", "https://evil.example")
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("an event stream with the operator's cookie from another origin: %d, want 403", resp.StatusCode)
	}
}

// TestPassLinkFromAnotherSiteSignsNoOneIn: a ?pass= link signs the
// browser in only when the person opened it themselves, not when another
// site sent them there (it could sign them in as its own user).
func TestPassLinkFromAnotherSiteSignsNoOneIn(t *testing.T) {
	r := newRig(t, twoUsers)
	code, h := fetchFrom(t, r.ts.URL, "/?pass="+aliceTok, "cross-site", "navigate", "document", "")
	if code != http.StatusForbidden || h.Get("Set-Cookie") != "" {
		t.Errorf("?pass= link from another site: %d, cookie %q; want 403 and none", code, h.Get("Set-Cookie"))
	}
	code, h = fetchFrom(t, r.ts.URL, "/?pass="+aliceTok, "none", "navigate", "document", "")
	if code != http.StatusSeeOther || h.Get("Set-Cookie") == "" {
		t.Errorf("?pass= typed in: %d, cookie %q; want 303 and a cookie", code, h.Get("Set-Cookie"))
	}
}

// TestNoPassParamHoldsForTheDashboard: with ?pass= turned off the
// dashboard takes no token from its address either.
func TestNoPassParamHoldsForTheDashboard(t *testing.T) {
	r := newRigFull(t, twoUsers, false, nil, func(o *server.Options) { o.NoPassParam = true })
	b := r.browser(t)
	code, h, _ := b.get("/?pass=" + aliceTok)
	if code != http.StatusUnauthorized || h.Get("Set-Cookie") != "" {
		t.Errorf("?pass= while turned off: %d, cookie %q; want 401 and none", code, h.Get("Set-Cookie"))
	}
}

// countingReader yields n bytes of a multipart file part and counts
// what was read of it.
type countingReader struct {
	r    io.Reader
	read atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestLogoutReadsABoundedBody: a sign-out's body is read only as far as
// a form needs, so one request cannot fill memory or disk.
func TestLogoutReadsABoundedBody(t *testing.T) {
	r := newRig(t, "")
	b := r.browser(t)
	b.get("/")
	const size = 64 << 20
	head := "--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"f\"\r\n\r\n"
	body := &countingReader{r: io.MultiReader(strings.NewReader(head), io.LimitReader(zeros{}, size))}
	req, _ := http.NewRequest(http.MethodPost, r.ts.URL+"/logout", body)
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	req.Header.Set("Origin", r.ts.URL)
	resp, err := b.c.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("sign-out with a huge form: %d, want 403", resp.StatusCode)
		}
	}
	if n := body.read.Load(); n > size/4 {
		t.Errorf("the server read %d MiB of a %d MiB sign-out body", n>>20, size>>20)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
