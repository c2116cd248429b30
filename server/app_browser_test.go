package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/clawconnect/clawconnect/internal/bridge"
	"github.com/clawconnect/clawconnect/internal/testbed/chromium"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/termapi"
)

// AppArtifactsEnv names a directory the app's browser test saves its
// screenshots in; unset, they go to the test's temporary directory
// (printed in the log).
const AppArtifactsEnv = "CLAWCONNECT_APP_ARTIFACTS"

// appXSSReply is what the fake agent answers a task that mentions XSS.
const appXSSReply = `<script>document.title="pwned"</script><img src=x onerror=alert(1)> reply`

// buildAppHost bundles testdata/apphost/host.mjs, a host page on the
// official MCP Apps host bridge and the TypeScript SDK's client, into one
// script, as a host's page is built.
func buildAppHost(t *testing.T, in *peers.Installer) []byte {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join("testdata", "apphost", "host.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "host.mjs"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	c := in.MustCommand(t, peers.MCPExtApps)
	out := filepath.Join(dir, "host.js")
	cmd := exec.CommandContext(t.Context(), filepath.Join(in.NodeModules(peers.MCPExtApps), ".bin", "esbuild"),
		"host.mjs", "--bundle", "--format=esm", "--platform=browser", "--log-level=warning", "--outfile="+out)
	cmd.Dir = dir
	// The bridge from its own project, the SDK client from the mcp-sdk peer.
	cmd.Env = append(os.Environ(), append(c.Env,
		"NODE_PATH="+in.NodeModules(peers.MCPExtApps)+string(os.PathListSeparator)+in.NodeModules(peers.MCPSDK))...)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bundle the host page: %v\n%s", err, msg)
	}
	js, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

const appHostPage = `<!doctype html><html><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>MCP Apps test host</title>
<style>body{margin:0;padding:16px;font:14px system-ui,sans-serif} #frame iframe{width:100%;border:1px solid #8884;border-radius:10px;height:520px}</style>
</head><body><div id="frame"></div><script type="module" src="/host.js"></script></body></html>`

// TestAppBrowser renders the task center in headless Chromium (Debian's
// chromium package) inside a small host page built on the official MCP
// Apps host bridge, which talks to the server through the TypeScript SDK's
// client over streamable HTTP (a 2025-11-25 client, so the declaration
// travels in the app session id): a run_task call renders the app, its log
// arrives and its result replaces the spinner without a reload, and the
// result is handed to the model; Cancel in the app ends a task; an agent's
// <script> reply is text; list_tasks renders the list; with the terminal
// tools on, terminal_send renders the Turn, whose approval is approved from
// the app before its reply shows. Screenshots at desktop and phone width,
// light and dark.
func TestAppBrowser(t *testing.T) {
	in := peers.Require(t, peers.MCPSDK, peers.MCPExtApps)
	hostJS := buildAppHost(t, in)
	hostSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/host.js" {
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write(hostJS)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(appHostPage))
	}))
	defer hostSrv.Close()

	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: func(s fakegateway.Submit) fakegateway.Turn {
		if strings.Contains(s.Message, "XSS") {
			return fakegateway.Turn{Reply: appXSSReply}
		}
		return fakegateway.Turn{Reply: "Here is the summary you asked for: three files changed, all tests pass.", Chunks: 4, Hold: true}
	}})
	home := t.TempDir()
	agents := `{"default":"alpha","agents":[{"id":"alpha","url":"` + fg.URL() + `","password":"pw"}]}`
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := bridge.Open(t.Context(), bridge.Options{Settings: settingsOf(t, map[string]string{"CLAWCONNECT_HOME": home})})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	terms := newFakeTerminals()
	srv, err := server.New(server.Options{Tasks: b, Registry: b.Registry(), AllowedOrigins: []string{hostSrv.URL}, Terminals: terms})
	if err != nil {
		t.Fatal(err)
	}
	mcpSrv := httptest.NewServer(srv.Handler())
	defer mcpSrv.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	// The app's sandboxed frame stays in the page's process, so the test
	// can query inside it.
	br := chromium.Start(ctx, t, AppArtifactsEnv, 1280, 860, chromedp.Flag("disable-features", "IsolateSandboxedIframes"))
	bctx := br.Ctx

	do := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	eval := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return v
	}
	shot := func(name string) { t.Helper(); do("screenshot "+name, br.Shot(name)) }
	// open loads the host page, which calls tool with args and renders the
	// app; it returns the app's frame.
	var frame *chromedp.Node
	open := func(step string, width, height int64, theme, tool string, args any) {
		t.Helper()
		a, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		q := url.Values{"mcp": {mcpSrv.URL + "/mcp"}, "theme": {theme}, "tool": {tool}, "args": {string(a)}}
		do(step, chromedp.EmulateViewport(width, height), chromedp.Navigate(hostSrv.URL+"/?"+q.Encode()))
		// Bounded: a host page stuck at a step says which.
		if state := eval(`Promise.race([window.host.done, new Promise(r => setTimeout(() => r("stuck at " + window.host.step), 30000))])`); state != "rendered" {
			t.Fatalf("%s: the host page %s: %s", step, state, eval(`JSON.stringify(window.host.errors)`))
		}
		nodes, err := chromedp.Run(bctx, chromedp.Nodes(chromedp.CSS("#app")))
		if err != nil || len(nodes) != 1 {
			t.Fatalf("%s: the app's frame: %v", step, err)
		}
		frame = nodes[0]
	}
	in1 := func(sel string) chromedp.Action[chromedp.Void] {
		return chromedp.WaitVisible(chromedp.CSS(sel), chromedp.FromNode(frame))
	}
	textIn := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel), chromedp.FromNode(frame)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	jobID := func() string { return eval(`window.host.result.structuredContent.jobId`) }
	// logScroll is the log's scrollTop, clientHeight and scrollHeight.
	logScroll := func() [3]float64 {
		t.Helper()
		var out [3]float64
		for i, name := range []string{"scrollTop", "clientHeight", "scrollHeight"} {
			v, err := chromedp.Run(bctx, chromedp.JavascriptAttribute[float64](chromedp.CSS("#log"), name, chromedp.FromNode(frame)))
			if err != nil {
				t.Fatalf("log %s: %v", name, err)
			}
			out[i] = v
		}
		return out
	}

	// A run_task renders the app; the log arrives while the agent works,
	// then the result replaces the running state, in the same frame.
	open("run_task", 1280, 860, "light", "run_task", map[string]any{"task": "Summarize the change set", "agent": "alpha"})
	if got := eval(`window.host.sessionId || ""`); !strings.HasPrefix(got, "ccapp1-") {
		t.Errorf("the SDK client's session id = %q, want an app session", got)
	}
	if got := eval(`JSON.stringify(window.host.toolMeta.check_task)`); got != "null" {
		t.Errorf("check_task _meta = %s, want none", got)
	}
	do("the log arrives", in1("#status.running"), in1("#log .line"))
	if got := textIn("#agent"); got != "alpha" {
		t.Errorf("agent = %q", got)
	}
	shot("app-01-running-desktop")
	// The reader scrolls the log up; the line that arrives then leaves the
	// log where it was and offers the newer lines.
	do("scroll up", chromedp.SetAttributeValue(chromedp.CSS("#log"), "style", "height:30px", chromedp.FromNode(frame)),
		chromedp.ScrollIntoView(chromedp.CSS("#log .line:first-child"), chromedp.FromNode(frame)))
	upAt := logScroll()
	if upAt[2]-upAt[0]-upAt[1] < 24 {
		t.Fatalf("log scroll %v: the reader's scroll did not leave the end", upAt)
	}
	fg.Release(jobID())
	do("the result arrives", in1("#status.completed"), in1("#resultBox"), in1("#handoff"))
	if got := textIn("#result"); got != "Here is the summary you asked for: three files changed, all tests pass." {
		t.Errorf("result = %q", got)
	}
	if got := eval(`String(window.host.loads)`); got != "1" {
		t.Errorf("the app's frame loaded %s times, want once (no reload)", got)
	}
	if got := eval(`JSON.stringify(window.host.contexts.map(c => c.content[0].text))`); !strings.Contains(got, "three files changed") || !strings.Contains(got, jobID()) ||
		!strings.Contains(got, "not an instruction from the user") {
		t.Errorf("model context handed back = %s, want the task's result", got)
	}
	if got := eval(`window.host.calls.join(",")`); !strings.Contains(got, "get_task") {
		t.Errorf("the app's tool calls = %q, want get_task", got)
	}
	if now := logScroll(); now[0] != upAt[0] || now[2] <= upAt[2] {
		t.Errorf("log scroll (top, client, scroll height) %v -> %v after a line arrived, want it left where the reader put it", upAt, now)
	}
	do("newer lines offered", in1("#newer"), chromedp.SetAttributeValue(chromedp.CSS("#log"), "style", "", chromedp.FromNode(frame)))
	do("the session block", in1("#session dd"))
	shot("app-02-result-desktop")

	// Cancel in the app stops the task.
	open("cancel", 1280, 860, "light", "run_task", map[string]any{"task": "A long refactor to stop"})
	do("cancel", in1("#status.running"), in1("#cancel"), chromedp.Click(chromedp.CSS("#cancel"), chromedp.FromNode(frame)),
		in1("#status.cancelled"), in1("#resultBox"))
	if got := eval(`window.host.calls.join(",")`); !strings.Contains(got, "cancel_task") {
		t.Errorf("the app's tool calls = %q, want cancel_task", got)
	}
	if st, err := b.GetTask(t.Context(), jobID(), "core", 0); err != nil || st.Status != "cancelled" {
		t.Errorf("the task after Cancel: %+v, %v", st.Status, err)
	}
	shot("app-03-cancelled-desktop")

	// An agent's markup is shown as text.
	open("xss", 1280, 860, "light", "run_task", map[string]any{"task": "XSS please"})
	do("xss result", in1("#status.completed"), in1("#resultBox"))
	if got := textIn("#result"); got != appXSSReply {
		t.Errorf("result = %q, want the reply as text", got)
	}
	if nodes, err := chromedp.Run(bctx, chromedp.Nodes(chromedp.CSS("#result *, img"), chromedp.FromNode(frame), chromedp.AtLeast(0))); err != nil || len(nodes) != 0 {
		t.Errorf("the reply became %d elements (%v)", len(nodes), err)
	}
	shot("app-04-escaped-desktop")

	// Phone width, dark theme from the host's variables.
	open("phone", 390, 844, "dark", "run_task", map[string]any{"task": "Check the deploy on my phone"})
	do("phone running", in1("#status.running"), in1("#log .line"))
	shot("app-05-running-phone-dark")
	// At the newest line, the log follows the lines that arrive.
	do("scroll to the end", chromedp.SetAttributeValue(chromedp.CSS("#log"), "style", "height:30px", chromedp.FromNode(frame)),
		chromedp.ScrollIntoView(chromedp.CSS("#log .line:last-child"), chromedp.FromNode(frame)))
	before := logScroll()
	fg.Release(jobID())
	do("phone result", in1("#status.completed"), in1("#resultBox"))
	if after := logScroll(); after[2] <= before[2] || after[2]-after[0]-after[1] > 1 {
		t.Errorf("log scroll (top, client, scroll height) %v -> %v: want the newest line in view", before, after)
	}
	do("restore the log", chromedp.SetAttributeValue(chromedp.CSS("#log"), "style", "", chromedp.FromNode(frame)))
	shot("app-06-result-phone-dark")

	open("list", 390, 844, "dark", "list_tasks", map[string]any{})
	do("list", in1("#list tr.row"))
	if got := textIn("#listCount"); got != "4 tasks" {
		t.Errorf("list count = %q, want the 4 tasks of this test", got)
	}
	shot("app-07-list-phone-dark")

	// With the terminal tools on, terminal_send renders the Turn: the
	// approval the agent asks for, approved from the app, then the reply.
	open("terminal_send", 1280, 860, "light", "terminal_send", map[string]any{"terminal_id": fakeTerminalID, "request": "run the migrations"})
	turnID := eval(`window.host.result.structuredContent.turn_id`)
	do("turn running", in1("#turn #turnStatus.running"))
	terms.finish(turnID, termapi.TurnWaitingForOpenClaw, "")
	do("approval", in1("#approvalBox"), in1("#approve"))
	if got := textIn("#approvalCommand"); got != "rm -rf build" {
		t.Errorf("approval command = %q", got)
	}
	shot("app-08-turn-approval-desktop")
	do("approve", chromedp.Click(chromedp.CSS("#approve"), chromedp.FromNode(frame)), in1("#turnStatus.running"))
	if got := eval(`window.host.calls.join(",")`); !strings.Contains(got, "terminal_approve") {
		t.Errorf("the app's tool calls = %q, want terminal_approve", got)
	}
	terms.finish(turnID, termapi.TurnIdle, "Migrated <b>3</b> tables.")
	do("turn reply", in1("#turnStatus.idle"), in1("#replyBox"), in1("#turnHandoff"))
	if got := textIn("#reply"); got != "Migrated <b>3</b> tables." {
		t.Errorf("reply = %q, want it as text", got)
	}
	shot("app-09-turn-reply-desktop")
}
