package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// appCaps is the MCP Apps declaration of a host that renders the app.
const appCaps = `{"extensions":{"` + server.AppExtension + `":{"mimeTypes":["` + server.AppMIMEType + `"]}}}`

func legacyInit(caps string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + legacyVersion + `","capabilities":` + caps + `,"clientInfo":{"name":"host","version":"1"}}}`
}

// modernReq is a 2026-07-28 request whose per-request capabilities are caps.
func modernReq(method, params, caps string) string {
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + modernVersion + `","io.modelcontextprotocol/clientInfo":{"name":"host","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	if params == "{}" {
		params = "{" + meta + "}"
	} else {
		params = strings.TrimSuffix(params, "}") + "," + meta + "}"
	}
	return `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":` + params + `}`
}

func modernHdr(method string) map[string]string {
	h := map[string]string{"Mcp-Protocol-Version": modernVersion, "Mcp-Method": method}
	if method == "resources/read" {
		h["Mcp-Name"] = server.AppURI
	}
	return h
}

// toolMetas maps each tool of a tools/list result to its _meta.
func toolMetas(t *testing.T, payload string) map[string]map[string]any {
	t.Helper()
	var res struct {
		Tools []struct {
			Name string         `json:"name"`
			Meta map[string]any `json:"_meta"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(rawResult(t, payload), &res); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl.Meta
	}
	return out
}

// checkAppMeta checks the tools' _meta as a declaring client sees it.
func checkAppMeta(t *testing.T, metas map[string]map[string]any) {
	t.Helper()
	for _, name := range []string{"run_task", "list_tasks"} {
		m := metas[name]
		ui, _ := m["ui"].(map[string]any)
		if ui["resourceUri"] != server.AppURI || m["openai/outputTemplate"] != server.AppURI {
			t.Errorf("%s _meta = %v, want ui.resourceUri and openai/outputTemplate %s", name, m, server.AppURI)
		}
	}
	for _, name := range []string{"get_task", "get_session", "list_tasks", "cancel_task"} {
		ui, _ := metas[name]["ui"].(map[string]any)
		vis, _ := ui["visibility"].([]any)
		if !strings.Contains(jsonText(t, vis), `"app"`) || metas[name]["openai/widgetAccessible"] != true {
			t.Errorf("%s is not callable from the app: _meta %v", name, metas[name])
		}
	}
	for _, name := range []string{"check_task", "list_sessions", "list_agents", "get_connection_info"} {
		if metas[name] != nil {
			t.Errorf("%s carries _meta %v, want none", name, metas[name])
		}
	}
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// goldenToolsList is today's tools/list, as the golden file pins it
// (testdata/tools.golden.json, or the file named).
func goldenToolsList(t *testing.T, file ...string) string {
	t.Helper()
	name := "testdata/tools.golden.json"
	if len(file) > 0 {
		name = file[0]
	}
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var tools any
	if err := json.Unmarshal(data, &tools); err != nil {
		t.Fatal(err)
	}
	return jsonText(t, tools)
}

func listedTools(t *testing.T, payload string) string {
	t.Helper()
	var res struct {
		Tools any `json:"tools"`
	}
	if err := json.Unmarshal(rawResult(t, payload), &res); err != nil {
		t.Fatal(err)
	}
	return jsonText(t, res.Tools)
}

// TestAppHiddenFromClientsThatDoNotDeclare: a client of either protocol
// that does not declare MCP Apps gets today's initialize (no resources
// capability, no session id), today's tools/list (the golden file) and an
// empty resources/list.
func TestAppHiddenFromClientsThatDoNotDeclare(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(setup(t, nil).srv.Handler())
	defer ts.Close()
	url := ts.URL + "/mcp"

	code, hdr, payload := rpc(t, url, legacyInit(`{}`), nil)
	if code != http.StatusOK || hdr.Get("Mcp-Session-Id") != "" {
		t.Fatalf("initialize: status %d, session id %q", code, hdr.Get("Mcp-Session-Id"))
	}
	if strings.Contains(string(rawResult(t, payload)), `"resources"`) {
		t.Errorf("initialize of a client without MCP Apps advertises resources: %s", payload)
	}
	golden := goldenToolsList(t)
	for name, tc := range map[string]struct {
		body string
		hdr  map[string]string
	}{
		"2025-11-25":                             {toolsListReq, nil},
		"2026-07-28":                             {modernReq("tools/list", "{}", `{}`), modernHdr("tools/list")},
		"2026-07-28 declaring another extension": {modernReq("tools/list", "{}", `{"extensions":{"`+server.AppExtension+`":{"mimeTypes":["text/html"]}}}`), modernHdr("tools/list")},
	} {
		_, _, payload := rpc(t, url, tc.body, tc.hdr)
		if diff := cmp.Diff(golden, listedTools(t, payload)); diff != "" {
			t.Errorf("%s: tools/list differs from the golden file (-want +got):\n%s", name, diff)
		}
	}
	_, _, payload = rpc(t, url, `{"jsonrpc":"2.0","id":3,"method":"resources/list","params":{}}`, nil)
	var list struct {
		Resources []any `json:"resources"`
	}
	if err := json.Unmarshal(rawResult(t, payload), &list); err != nil || list.Resources == nil || len(list.Resources) != 0 {
		t.Errorf("resources/list = %s, want an empty list", payload)
	}
}

// TestAppLegacyHTTPSession: a 2025-11-25 client that declares MCP Apps at
// initialize gets an app session id; with it, every later request (on any
// replica: the id alone carries the declaration) sees the app; without
// it, the same client sees today's surface.
func TestAppLegacyHTTPSession(t *testing.T) {
	t.Parallel()
	replica := func() string {
		ts := httptest.NewServer(setup(t, nil).srv.Handler())
		t.Cleanup(ts.Close)
		return ts.URL + "/mcp"
	}
	first, second := replica(), replica()
	code, hdr, payload := rpc(t, first, legacyInit(appCaps), nil)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || !strings.HasPrefix(sid, "ccapp1-") {
		t.Fatalf("initialize: status %d, session id %q: %s", code, sid, payload)
	}
	if !strings.Contains(string(rawResult(t, payload)), `"resources"`) {
		t.Errorf("initialize does not advertise resources: %s", payload)
	}
	withSID := map[string]string{"Mcp-Session-Id": sid}
	_, hdr, payload = rpc(t, second, toolsListReq, withSID)
	checkAppMeta(t, toolMetas(t, payload))
	if hdr.Get("Mcp-Session-Id") != sid {
		t.Errorf("tools/list answered session id %q, want %q", hdr.Get("Mcp-Session-Id"), sid)
	}
	_, _, payload = rpc(t, second, toolsListReq, nil)
	if diff := cmp.Diff(goldenToolsList(t), listedTools(t, payload)); diff != "" {
		t.Errorf("tools/list without the session id differs from the golden file:\n%s", diff)
	}
	checkAppResource(t, second, func(string) map[string]string { return withSID }, nil)

	req, err := http.NewRequest(http.MethodDelete, second, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE of the app session: status %d, want 204", resp.StatusCode)
	}
}

// checkAppResource checks resources/list and resources/read: the MCP Apps
// MIME type, the HTML, and a CSP that names no external origin.
func checkAppResource(t *testing.T, url string, hdrOf func(method string) map[string]string, wrap func(method, params string) string) {
	t.Helper()
	if hdrOf == nil {
		hdrOf = func(string) map[string]string { return nil }
	}
	if wrap == nil {
		wrap = func(method, params string) string {
			return `{"jsonrpc":"2.0","id":4,"method":"` + method + `","params":` + params + `}`
		}
	}
	_, _, payload := rpc(t, url, wrap("resources/list", "{}"), hdrOf("resources/list"))
	var list struct {
		Resources []struct {
			URI, MIMEType string
			Meta          map[string]any `json:"_meta"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(rawResult(t, payload), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Resources) != 1 || list.Resources[0].URI != server.AppURI || list.Resources[0].MIMEType != server.AppMIMEType {
		t.Errorf("resources/list = %s, want the task center as %s", payload, server.AppMIMEType)
	}
	_, _, payload = rpc(t, url, wrap("resources/read", `{"uri":"`+server.AppURI+`"}`), hdrOf("resources/read"))
	var read struct {
		Contents []struct {
			URI, MIMEType, Text string
			Meta                struct {
				UI struct {
					CSP map[string][]string `json:"csp"`
				} `json:"ui"`
			} `json:"_meta"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(rawResult(t, payload), &read); err != nil {
		t.Fatal(err)
	}
	if len(read.Contents) != 1 {
		t.Fatalf("resources/read = %s", payload)
	}
	c := read.Contents[0]
	if c.URI != server.AppURI || c.MIMEType != server.AppMIMEType || !strings.HasPrefix(c.Text, "<!doctype html>") {
		t.Errorf("resources/read: uri %q, mime %q, text %.40q", c.URI, c.MIMEType, c.Text)
	}
	wantCSP := map[string][]string{"connectDomains": {}, "resourceDomains": {}, "frameDomains": {}, "baseUriDomains": {}}
	if diff := cmp.Diff(wantCSP, c.Meta.UI.CSP); diff != "" {
		t.Errorf("resources/read _meta.ui.csp (-want +got):\n%s", diff)
	}
	for _, ref := range []string{"http:", "https:", "//cdn", "src=\""} {
		if strings.Contains(c.Text, ref) {
			t.Errorf("the app's HTML refers to %q: it must be self-contained", ref)
		}
	}
}

// TestAppModernPerRequest: a 2026-07-28 client declares MCP Apps in each
// request; the request that declares it sees the app, the one that does
// not sees today's tools.
func TestAppModernPerRequest(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(setup(t, nil).srv.Handler())
	defer ts.Close()
	url := ts.URL + "/mcp"
	_, hdr, payload := rpc(t, url, modernReq("tools/list", "{}", appCaps), modernHdr("tools/list"))
	checkAppMeta(t, toolMetas(t, payload))
	if hdr.Get("Mcp-Session-Id") != "" {
		t.Errorf("a 2026-07-28 answer carries session id %q", hdr.Get("Mcp-Session-Id"))
	}
	checkAppResource(t, url, modernHdr, func(method, params string) string {
		return modernReq(method, params, appCaps)
	})
	for caps, want := range map[string]bool{appCaps: true, `{}`: false} {
		_, _, payload := rpc(t, url, modernReq("server/discover", "{}", caps), modernHdr("server/discover"))
		var res struct {
			Capabilities map[string]any `json:"capabilities"`
		}
		if err := json.Unmarshal(rawResult(t, payload), &res); err != nil {
			t.Fatal(err)
		}
		if _, got := res.Capabilities["resources"]; got != want {
			t.Errorf("server/discover with capabilities %s advertises resources: %v, want %v", caps, got, want)
		}
	}
}

// TestAppStdio: over stdio the one session keeps what initialize declared.
func TestAppStdio(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// clawconnect mcp's own loop: declared at initialize, seen in tools/list.
	checkAppMeta(t, toolMetas(t, `{"result":`+string(stdioToolsListWith(t, b.srv, appCaps))+`}`))
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension(server.AppExtension, map[string]any{"mimeTypes": []string{server.AppMIMEType}})
	cs := connect(t, b.srv.MCPServer(testRegistry(t).FullScope(), taskapi.Identity{}), &mcp.ClientOptions{Capabilities: caps})
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	metas := map[string]map[string]any{}
	for _, tl := range res.Tools {
		if tl.Meta != nil {
			var m map[string]any
			if err := json.Unmarshal([]byte(jsonText(t, tl.Meta)), &m); err != nil {
				t.Fatal(err)
			}
			metas[tl.Name] = m
		}
	}
	checkAppMeta(t, metas)
	rr, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: server.AppURI})
	if err != nil || len(rr.Contents) != 1 || rr.Contents[0].MIMEType != server.AppMIMEType {
		t.Errorf("resources/read over stdio: %v, %v", rr, err)
	}
}

// TestAppForAll: with AppForAll (ENABLE_CHATGPT_UI_WIDGET) a client that
// declares nothing, as ChatGPT's Apps SDK does not, sees the app.
func TestAppForAll(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(setup(t, func(o *server.Options) { o.AppForAll = true }).srv.Handler())
	defer ts.Close()
	url := ts.URL + "/mcp"
	_, _, payload := rpc(t, url, toolsListReq, nil)
	checkAppMeta(t, toolMetas(t, payload))
	checkAppResource(t, url, nil, nil)
}

// TestAppTerminalTools: with the terminal tools on, terminal_send renders
// in the app and the Turn tools it calls are callable from it; a client
// that does not declare MCP Apps sees the terminal tools' golden file.
func TestAppTerminalTools(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(setup(t, func(o *server.Options) { o.Terminals = newFakeTerminals() }).srv.Handler())
	defer ts.Close()
	url := ts.URL + "/mcp"
	_, _, payload := rpc(t, url, modernReq("tools/list", "{}", appCaps), modernHdr("tools/list"))
	metas := toolMetas(t, payload)
	checkAppMeta(t, metas)
	if ui, _ := metas["terminal_send"]["ui"].(map[string]any); ui["resourceUri"] != server.AppURI || metas["terminal_send"]["openai/outputTemplate"] != server.AppURI {
		t.Errorf("terminal_send _meta = %v", metas["terminal_send"])
	}
	for _, name := range []string{"terminal_status", "terminal_approve", "terminal_respond", "terminal_cancel"} {
		if metas[name]["openai/widgetAccessible"] != true {
			t.Errorf("%s is not callable from the app: %v", name, metas[name])
		}
	}
	if metas["terminal_list"] != nil {
		t.Errorf("terminal_list carries _meta %v", metas["terminal_list"])
	}
	_, _, payload = rpc(t, url, toolsListReq, nil)
	if diff := cmp.Diff(goldenToolsList(t, "testdata/tools_terminal.golden.json"), listedTools(t, payload)); diff != "" {
		t.Errorf("tools/list of a client without MCP Apps differs from the golden file:\n%s", diff)
	}
}
