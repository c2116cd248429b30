package dashboard_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/dashboard"
)

func TestPagesRenderAndEscape(t *testing.T) {
	r := newRig(t, "")
	done := r.run(t, "alpha", "please check XSS handling", "")
	r.waitDone(t, done)
	held := r.run(t, "beta", "HOLD this one", "")
	b := r.browser(t)

	tests := []struct {
		path string
		want []string
	}{
		{"/", []string{"<h1>Tasks</h1>", done, held, `data-stream="page=tasks`, "running", "done"}},
		{"/?status=running", []string{held}},
		{"/?agent=alpha", []string{done}},
		{"/tasks/" + done, []string{"Task <span class=\"mono\">" + done, "&lt;script&gt;document.title=", "please check XSS handling", "log-rows"}},
		{"/tasks/" + held, []string{"Cancel task", `name="csrf"`}},
		{"/sessions", []string{"<h1>Sessions</h1>", `href="/tasks/` + done + `"`, "&lt;script&gt;"}},
		{"/system", []string{"<h1>Health</h1>", "alpha", "local-tmux", "SQLite (test)", "<svg class=\"chart\"", "1 finished", "Processes sharing the store"}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			code, h, body := b.get(tt.path)
			if code != http.StatusOK {
				t.Fatalf("GET %s: %d\n%s", tt.path, code, body)
			}
			if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
				t.Errorf("CSP = %q", csp)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("GET %s: missing %q", tt.path, w)
				}
			}
			if strings.Contains(body, "<script>document") || strings.Contains(body, "<img src=x") {
				t.Errorf("GET %s: the agent's reply was not escaped", tt.path)
			}
			if strings.Count(body, "<script") != 1 || !strings.Contains(body, `<script src="/static/app.js" defer></script>`) {
				t.Errorf("GET %s: a script other than /static/app.js", tt.path)
			}
		})
	}
	// Filters leave out what does not match.
	if _, _, body := b.get("/?status=running"); strings.Contains(body, `href="/tasks/`+done+`"`) {
		t.Errorf("status filter kept a finished task")
	}
	if _, _, body := b.get("/?agent=alpha"); strings.Contains(body, `href="/tasks/`+held+`"`) {
		t.Errorf("agent filter kept another agent's task")
	}
	if code, _, _ := b.get("/tasks/no-such-task"); code != http.StatusNotFound {
		t.Errorf("missing task: %d, want 404", code)
	}
	code, h, body := b.get("/static/app.js")
	if code != http.StatusOK || !strings.Contains(h.Get("Content-Type"), "javascript") || !strings.Contains(body, "EventSource") {
		t.Errorf("app.js: %d %q", code, h.Get("Content-Type"))
	}
}

// TestTasksPageShowsTheRequest: each row says what was asked (the first
// line of the request, escaped, cut to an excerpt) and the filter's
// search keeps the tasks whose request holds the words, ignoring case.
func TestTasksPageShowsTheRequest(t *testing.T) {
	r := newRig(t, "")
	long := r.run(t, "alpha", "Deploy <i>staging</i> now\nthen tell me", "")
	held := r.run(t, "beta", "HOLD the "+strings.Repeat("very ", 40)+"long request", "")
	r.waitDone(t, long)
	b := r.browser(t)

	_, _, body := b.get("/")
	for _, want := range []string{
		`<th scope="col">Request</th>`,
		`Deploy &lt;i&gt;staging&lt;/i&gt; now …</td>`,
		`HOLD the very very`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /: missing %q", want)
		}
	}
	if n := strings.Count(body, "…</td>"); n != 2 {
		t.Errorf("GET /: %d requests cut with an ellipsis, want 2 (the two-line one and the long one)", n)
	}
	if strings.Contains(body, "<i>staging") {
		t.Errorf("GET /: the request's markup was not escaped")
	}
	for _, tt := range []struct {
		query      string
		kept, left string
	}{
		{"/?q=deploy+%3CI%3E", long, held},
		{"/?q=long+request&agent=beta", held, long},
	} {
		_, _, body := b.get(tt.query)
		if !strings.Contains(body, `href="/tasks/`+tt.kept+`"`) || strings.Contains(body, `href="/tasks/`+tt.left+`"`) {
			t.Errorf("GET %s: want %s kept and %s left out", tt.query, tt.kept, tt.left)
		}
		if !strings.Contains(body, `data-stream="page=tasks&amp;status=&amp;agent=`) || !strings.Contains(body, `&amp;q=`) {
			t.Errorf("GET %s: the event stream does not carry the search", tt.query)
		}
	}
}

func TestAuthRequired(t *testing.T) {
	r := newRig(t, "alice:tok-alice-0123456789,bob:tok-bob-0123456789")
	id := r.run(t, "alpha", "HOLD alice's work", "user:alice")
	anon := r.browser(t)
	for _, p := range []string{"/", "/tasks/" + id, "/sessions", "/system"} {
		code, _, body := anon.get(p)
		if code != http.StatusUnauthorized || !strings.Contains(body, `action="/login"`) || strings.Contains(body, "alice&#39;s work") {
			t.Errorf("GET %s without a token: %d, want 401 and the login form", p, code)
		}
	}
	if code, _, _ := anon.get("/events?page=tasks"); code != http.StatusUnauthorized {
		t.Errorf("events without a token: %d, want 401", code)
	}
	if code, _, _ := anon.post("/tasks/"+id+"/cancel", url.Values{"csrf": {"x"}}, "self"); code != http.StatusUnauthorized {
		t.Errorf("cancel without a token: %d, want 401", code)
	}
	if code, _, body := anon.post("/login", url.Values{"token": {"wrong"}}, "self"); code != http.StatusUnauthorized || !strings.Contains(body, "not accepted") {
		t.Errorf("wrong token: %d", code)
	}
	if code, _, _ := anon.post("/login", url.Values{"token": {"tok-alice-0123456789"}}, "https://evil.example"); code != http.StatusForbidden {
		t.Errorf("cross-origin login: %d, want 403", code)
	}
	// A browser that sends no Origin still names a cross-site form post.
	req, _ := http.NewRequest(http.MethodPost, anon.ts.URL+"/login", strings.NewReader(url.Values{"token": {"tok-alice-0123456789"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := anon.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("cross-site login without Origin: %d, cookie %q; want 403 and no cookie", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
	// A bearer token is not a dashboard session: the browser signs in.
	code, h, _ := anon.post("/login", url.Values{"token": {"tok-alice-0123456789"}, "next": {"//evil.example"}}, "self")
	if code != http.StatusSeeOther || h.Get("Location") != "/" {
		t.Fatalf("login: %d to %q, want 303 to /", code, h.Get("Location"))
	}
	c := h.Get("Set-Cookie")
	for _, w := range []string{"HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(c, w) {
			t.Errorf("cookie %q lacks %s", c, w)
		}
	}
	code, _, page := anon.get("/")
	if code != http.StatusOK || !strings.Contains(page, id) || !strings.Contains(page, "alice") {
		t.Errorf("signed in: %d", code)
	}
	// Signing out needs the form's token, and ends the session.
	if code, _, _ := anon.post("/logout", url.Values{}, "self"); code != http.StatusForbidden {
		t.Errorf("logout without the token: %d, want 403", code)
	}
	if code, _, _ := anon.post("/logout", url.Values{"csrf": {csrfOf(t, page)}}, "self"); code != http.StatusSeeOther {
		t.Errorf("logout: %d, want 303", code)
	}
	if code, _, _ := anon.get("/"); code != http.StatusUnauthorized {
		t.Errorf("after logout: %d, want 401", code)
	}
}

func TestOpenLoopbackNeedsNoSignIn(t *testing.T) {
	r := newRig(t, "")
	b := r.browser(t)
	code, h, _ := b.get("/login")
	if code != http.StatusSeeOther || h.Get("Location") != "/" {
		t.Errorf("login page of an open server: %d to %q, want 303 to /", code, h.Get("Location"))
	}
	code, h, _ = b.get("/")
	if code != http.StatusOK || !strings.Contains(h.Get("Set-Cookie"), "SameSite=Strict") {
		t.Errorf("open server: %d, cookie %q", code, h.Get("Set-Cookie"))
	}
}

func TestOwnerIsolation(t *testing.T) {
	r := newRig(t, "alice:tok-alice-0123456789,bob:tok-bob-0123456789")
	mine := r.run(t, "alpha", "HOLD alice's secret work", "user:alice")
	alice, bob := r.browser(t), r.browser(t)
	alice.login("tok-alice-0123456789")
	bob.login("tok-bob-0123456789")
	if _, _, body := bob.get("/"); strings.Contains(body, mine) {
		t.Errorf("bob sees alice's task on the list")
	}
	if _, _, body := bob.get("/sessions"); strings.Contains(body, mine) {
		t.Errorf("bob sees alice's session")
	}
	code, _, body := bob.get("/tasks/" + mine)
	if code != http.StatusNotFound || strings.Contains(body, "secret work") {
		t.Errorf("bob opens alice's task: %d", code)
	}
	_, _, page := bob.get("/sessions")
	code, _, _ = bob.post("/tasks/"+mine+"/cancel", url.Values{"csrf": {csrfOf(t, page)}}, "self")
	if code != http.StatusSeeOther {
		t.Fatalf("bob's cancel: %d", code)
	}
	if _, _, body := bob.get("/tasks/" + mine); !strings.Contains(body, "No task with that id") && !strings.Contains(body, "not found") && !strings.Contains(body, "Not available") {
		t.Errorf("bob's cancel of alice's task did not read as not found:\n%s", body)
	}
	if _, _, body := alice.get("/tasks/" + mine); !strings.Contains(body, "badge big s-running") {
		t.Errorf("bob's cancel changed alice's task")
	}
}

func TestCancelNeedsCSRFAndOrigin(t *testing.T) {
	r := newRig(t, "")
	id := r.run(t, "alpha", "HOLD until cancelled", "")
	r.waitAccepted(t, id)
	b := r.browser(t)
	code, _, page := b.get("/tasks/" + id)
	if code != http.StatusOK {
		t.Fatal(code)
	}
	token := csrfOf(t, page)
	for _, tt := range []struct {
		name   string
		form   url.Values
		origin string
	}{
		{"no token", url.Values{}, "self"},
		{"wrong token", url.Values{"csrf": {"forged"}}, "self"},
		{"foreign origin", url.Values{"csrf": {token}}, "https://evil.example"},
	} {
		if code, _, _ := b.post("/tasks/"+id+"/cancel", tt.form, tt.origin); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tt.name, code)
		}
	}
	// Another browser's session has its own token.
	other := r.browser(t)
	other.get("/")
	if code, _, _ := other.post("/tasks/"+id+"/cancel", url.Values{"csrf": {token}}, "self"); code != http.StatusForbidden {
		t.Errorf("token of another session: %d, want 403", code)
	}
	if _, _, body := b.get("/tasks/" + id); !strings.Contains(body, "s-running") {
		t.Fatalf("a refused cancel changed the task")
	}
	code, h, _ := b.post("/tasks/"+id+"/cancel", url.Values{"csrf": {token}}, "self")
	if code != http.StatusSeeOther || h.Get("Location") != "/tasks/"+id {
		t.Fatalf("cancel: %d %q", code, h.Get("Location"))
	}
	r.waitDone(t, id)
	_, _, body := b.get("/tasks/" + id)
	if !strings.Contains(body, "s-cancelled") {
		t.Errorf("after cancel: the page does not show the task cancelled:\n%s", body)
	}
	if !strings.Contains(body, `class="flash"`) {
		t.Errorf("after cancel: the page shows no note of the cancel:\n%s", body)
	}
}

// TestEventStream follows the Tasks page's stream while a task starts and
// ends, and a task page's stream while its log grows.
func TestEventStream(t *testing.T) {
	r := newRig(t, "")
	b := r.browser(t)
	b.get("/") // anonymous session cookie
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	read := openStream(ctx, t, b, "/events?page=tasks")
	read.until(t, "event: live")
	id := r.run(t, "alpha", "SLOW work", "")
	read.until(t, `data-task=\"`+id+`\" data-status=\"running\"`)
	read.until(t, `data-task=\"`+id+`\" data-status=\"done\"`)

	held := r.run(t, "alpha", "HOLD for the task page", "")
	// A cancel the gateway gets before it acknowledged the run ends the
	// task cancellation-not-confirmed (an error), never cancelled.
	r.waitAccepted(t, held)
	tp := openStream(ctx, t, b, "/events?page=task&id="+held+"&cursor=0")
	tp.until(t, "event: live")
	_, _, page := b.get("/tasks/" + held)
	if code, _, body := b.post("/tasks/"+held+"/cancel", url.Values{"csrf": {csrfOf(t, page)}}, "self"); code != http.StatusSeeOther {
		t.Fatalf("cancel: %d %s", code, body)
	}
	tp.until(t, "s-cancelled")

	gone := openStream(ctx, t, b, "/events?page=task&id=no-such-task")
	gone.until(t, "event: gone")
	for range gone.lines {
		// the server ends the stream
	}
	if code, _, _ := b.get("/events?page=nope"); code != http.StatusBadRequest {
		t.Errorf("unknown page: %d, want 400", code)
	}
}

type stream struct {
	lines chan string
	// end is why the stream ended (read once lines is closed).
	end error
}

func openStream(ctx context.Context, t *testing.T, b *browser, path string) *stream {
	t.Helper()
	return openStreamWith(ctx, t, b, path, nil)
}

// openStreamWith is openStream with extra request headers (a reconnecting
// EventSource's Last-Event-ID).
func openStreamWith(ctx context.Context, t *testing.T, b *browser, path string, h http.Header) *stream {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.ts.URL+path, nil)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream %s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &stream{lines: make(chan string, 64)}
	go func() {
		defer resp.Body.Close()
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			select {
			case s.lines <- sc.Text():
			case <-ctx.Done():
				s.end = ctx.Err()
				return
			}
		}
		s.end = sc.Err()
		if s.end == nil {
			s.end = io.EOF // the server ended it
		}
	}()
	return s
}

// until reads lines until one contains want; the stream's context bounds it.
func (s *stream) until(t *testing.T, want string) {
	t.Helper()
	var last []string
	for line := range s.lines {
		if strings.Contains(line, want) {
			return
		}
		if last = append(last, line); len(last) > 8 {
			last = last[1:]
		}
	}
	t.Fatalf("stream ended (%v) before %q; its last lines:\n%s", s.end, want, strings.Join(last, "\n"))
}

// TestEventStreamWakesOnChangeFeed: with no periodic re-read, a task page
// still sees its task end, because the store's change feed announces it.
func TestEventStreamWakesOnChangeFeed(t *testing.T) {
	r := newRigWith(t, "", false, func(o *dashboard.Options) {
		if o.Feed == nil {
			t.Skip("the store has no change feed")
		}
		o.Refresh = time.Hour
	})
	b := r.browser(t)
	b.get("/")
	id := r.run(t, "alpha", "SLOW work", "")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s := openStream(ctx, t, b, "/events?page=task&id="+id+"&cursor=0")
	s.until(t, "event: live")
	s.until(t, "Agent lifecycle: end") // a log row appended
	s.until(t, "s-completed")
}
