package dashboard_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestDashboardTakesTheMCPCredential: the dashboard accepts a token the
// way /mcp does. "Authorization: Bearer" holds for the one request (no
// cookie, and an action needs no form token but still the site check);
// ?pass= on a page signs the browser in and reloads the page without the
// token in its address; a wrong token is refused either way.
func TestDashboardTakesTheMCPCredential(t *testing.T) {
	r := newRig(t, "alice:tok-alice-0123456789,bob:tok-bob-0123456789")
	id := r.run(t, "alpha", "HOLD alice's bearer work", "user:alice")
	r.waitAccepted(t, id)
	do := func(method, path, bearer, origin string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, r.ts.URL+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := do(http.MethodGet, "/tasks/"+id, "tok-alice-0123456789", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "alice&#39;s bearer work") || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("GET with alice's bearer: %d, cookie %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
	if resp, body := do(http.MethodGet, "/tasks/"+id, "tok-bob-0123456789", ""); strings.Contains(body, "alice&#39;s bearer work") {
		t.Fatalf("bob's bearer sees alice's task: %d", resp.StatusCode)
	}
	for _, p := range []struct{ path, bearer string }{{"/", "tok-wrong-0123456789"}, {"/?pass=tok-wrong-0123456789", ""}} {
		if resp, _ := do(http.MethodGet, p.path, p.bearer, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d, want 401", p.path, resp.StatusCode)
		}
	}
	if resp, _ := do(http.MethodPost, "/tasks/"+id+"/cancel", "tok-alice-0123456789", "https://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin cancel with a bearer: %d, want 403", resp.StatusCode)
	}
	b := r.browser(t)
	code, h, _ := b.get("/tasks/" + id + "?pass=tok-alice-0123456789&x=1")
	if code != http.StatusSeeOther || h.Get("Location") != "/tasks/"+id+"?x=1" || !strings.Contains(h.Get("Set-Cookie"), "HttpOnly") {
		t.Fatalf("GET with ?pass=: %d to %q, cookie %q; want 303 without the token and a cookie", code, h.Get("Location"), h.Get("Set-Cookie"))
	}
	if code, _, page := b.get("/tasks/" + id); code != http.StatusOK || !strings.Contains(page, "alice&#39;s bearer work") {
		t.Fatalf("after ?pass=: %d", code)
	}
	if resp, _ := do(http.MethodPost, "/tasks/"+id+"/cancel", "tok-alice-0123456789", r.ts.URL); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel with a bearer: %d, want 303", resp.StatusCode)
	}
	r.waitDone(t, id)
}
