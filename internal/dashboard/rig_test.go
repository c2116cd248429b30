package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/bridge"
	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/dashboard"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// xssReply is what the fake agent answers a task that mentions "XSS".
const xssReply = `<script>document.title="pwned"</script><img src=x onerror=alert(1)> reply`

// rig is a real task bridge (SQLite store, fake gateway) behind the MCP
// server and the dashboard, on one httptest listener, as serve runs them.
type rig struct {
	fg  *fakegateway.Server
	b   *bridge.Bridge
	srv *server.Server
	ts  *httptest.Server
}

// newRig starts the rig; tokens is MCP_USER_TOKENS ("" = open). A task
// whose text contains HOLD runs until cancelled; one with XSS answers
// xssReply; any other is answered at once.
func newRig(t testing.TB, tokens string) *rig { return newRigWith(t, tokens, false, nil) }

// newRigWith is newRig with the team view set by shared and the dashboard
// options changed by edit.
func newRigWith(t testing.TB, tokens string, shared bool, edit func(*dashboard.Options)) *rig {
	t.Helper()
	return newRigFull(t, tokens, shared, edit, nil)
}

// newRigFull is newRigWith with the server options changed by sedit.
func newRigFull(t testing.TB, tokens string, shared bool, edit func(*dashboard.Options), sedit func(*server.Options)) *rig {
	t.Helper()
	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: func(s fakegateway.Submit) fakegateway.Turn {
		switch {
		case strings.Contains(s.Message, "HOLD"):
			return fakegateway.Turn{Hold: true}
		case strings.Contains(s.Message, "XSS"):
			return fakegateway.Turn{Reply: xssReply}
		case strings.Contains(s.Message, "SLOW"):
			return fakegateway.Turn{Reply: "slow result", Chunks: 3, Delay: 1500 * time.Millisecond}
		}
		return fakegateway.Turn{Reply: "result: all good", Chunks: 2}
	}})
	home := t.TempDir()
	agents := `{"default":"alpha","agents":[{"id":"alpha","url":"` + fg.URL() + `","password":"pw"},` +
		`{"id":"beta","url":"` + fg.URL() + `","password":"pw"}]}`
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CLAWCONNECT_HOME": home}
	sv, err := settings.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	b, err := bridge.Open(context.Background(), bridge.Options{Settings: &sv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	authn, err := config.NewAuthenticator(config.AuthOptions{UserTokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	so := server.Options{Tasks: b, Registry: b.Registry(), Auth: authn, SharedTaskView: shared}
	if sedit != nil {
		sedit(&so)
	}
	srv, err := server.New(so)
	if err != nil {
		t.Fatal(err)
	}
	o := dashboard.Options{Server: srv, Runtimes: []string{"local-tmux"}, StoreInfo: "SQLite (test)",
		Refresh: 200 * time.Millisecond}
	o.Feed, o.Processes, o.Attachments = b.SharedStore(), b.SharedStore(), b.SharedStore()
	if edit != nil {
		edit(&o)
	}
	d, err := dashboard.New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetPages(d)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &rig{fg: fg, b: b, srv: srv, ts: ts}
}

// run submits a task through the bridge as principal ("" = no credential).
func (r *rig) run(t testing.TB, agent, text, principal string) string {
	t.Helper()
	res, err := r.b.Run(context.Background(), server.RunRequest{Agent: agent, Task: text, Principal: principal})
	if err != nil {
		t.Fatal(err)
	}
	return res.JobID
}

// waitAccepted waits (bounded) until the gateway has acknowledged the
// task's run: a cancel sent before that finds no run to abort and ends the
// task "cancellation-not-confirmed", as the reference prescribes.
func (r *rig) waitAccepted(t testing.TB, id string) {
	t.Helper()
	poll.Until(t, 15*time.Second, "the gateway to acknowledge task "+id, func() bool {
		d, err := r.b.GetTask(context.Background(), id, taskapi.DetailCore, 0)
		return err == nil && d.ParentRunID != ""
	})
}

// waitDone waits (bounded) for a task to end, as check_task does.
func (r *rig) waitDone(t testing.TB, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := r.b.Check(ctx, server.CheckRequest{JobID: id, Mode: server.ModeWait, Wait: 15 * time.Second}, nil)
	if err != nil || !s.IsTerminal {
		t.Fatalf("task %s did not end: %v %+v", id, err, s.Status)
	}
}

// mcpRun starts a task through /mcp as a real MCP client with token.
func (r *rig) mcpRun(t testing.TB, token, text string) string {
	t.Helper()
	id, _ := r.mcpRunWith(t, token, map[string]any{"task": text})
	return id
}

// mcpRunWith is mcpRun with run_task's arguments; it also returns the
// task's session key.
func (r *rig) mcpRunWith(t testing.TB, token string, args map[string]any) (id, sessionKey string) {
	t.Helper()
	hc := &http.Client{Transport: bearer{token: token}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: r.ts.URL + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_task", Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("run_task: %v %+v", err, res)
	}
	out, _ := res.StructuredContent.(map[string]any)
	id, _ = out["jobId"].(string)
	sessionKey, _ = out["sessionKey"].(string)
	if id == "" || sessionKey == "" {
		t.Fatalf("run_task returned no jobId or sessionKey: %+v", res.StructuredContent)
	}
	return id, sessionKey
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so tests see each answer.
type browser struct {
	t  testing.TB
	c  *http.Client
	ts *httptest.Server
}

func (r *rig) browser(t testing.TB) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, ts: r.ts, c: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) get(path string) (int, http.Header, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.ts.URL + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

// post sends a form; origin "" sends none, "self" the server's own.
func (b *browser) post(path string, form url.Values, origin string) (int, http.Header, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.ts.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin == "self" {
		origin = b.ts.URL
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(body)
}

func (b *browser) login(token string) {
	b.t.Helper()
	code, _, body := b.post("/login", url.Values{"token": {token}, "next": {"/"}}, "self")
	if code != http.StatusSeeOther {
		b.t.Fatalf("login: %d %s", code, body)
	}
}

// csrfOf returns the CSRF token a page's forms carry.
func csrfOf(t testing.TB, page string) string {
	t.Helper()
	const marker = `name="csrf" value="`
	i := strings.Index(page, marker)
	if i < 0 {
		t.Fatalf("no CSRF token in page:\n%s", page)
	}
	rest := page[i+len(marker):]
	return rest[:strings.IndexByte(rest, '"')]
}
