package server

// The task center as an MCP App (the io.modelcontextprotocol/ui
// extension): one HTML resource, ui://clawconnect/task-center-v1.html,
// that a host renders in a sandboxed iframe for a run_task or list_tasks
// call, and that reads and stops tasks through the host by calling
// get_task, get_session, list_tasks and cancel_task.
//
// Only a client that declared the extension sees it: tools/list carries
// the tools' _meta and resources/list the resource for such a client, and
// is exactly today's for every other one (Options.AppForAll shows it to
// every client, for hosts such as ChatGPT that render it without declaring
// it). Where the declaration is found depends on the protocol:
//
//   - 2026-07-28: in every request's
//     _meta["io.modelcontextprotocol/clientCapabilities"].extensions;
//   - 2025-11-25 over stdio: in initialize, which the one session keeps;
//   - 2025-11-25 over stateless HTTP: in initialize only, and nothing of
//     that session is kept between requests. withAppSession answers such an
//     initialize with an Mcp-Session-Id that carries the declaration
//     itself (appSessionPrefix + random), and the client sends it back on
//     every later request, as the transport requires. Nothing is stored, so
//     any replica reads it and no retention applies; a forged id gains
//     nothing but the tools' _meta and the resource's listing, which every
//     declaring client gets anyway.

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// AppExtension is the MCP Apps extension's identifier, under which a
// client declares {"mimeTypes": ["text/html;profile=mcp-app"]}.
const AppExtension = "io.modelcontextprotocol/ui"

// AppMIMEType is the MIME type of an MCP App's HTML resource.
const AppMIMEType = "text/html;profile=mcp-app"

// AppURI is the task center's resource. A change of its content that an
// older host's cache must not keep gets a new version in the name.
const AppURI = "ui://clawconnect/task-center-v1.html"

//go:embed app/task-center.html
var appHTML string

// appSessionPrefix starts the Mcp-Session-Id given to a 2025-11-25 HTTP
// client that declared the extension at initialize.
const appSessionPrefix = "ccapp1-"

// appCSP is the resource's _meta.ui: no external origin of any kind (the
// app is one self-contained document and talks only to its host), and a
// border from the host.
func appUIMeta() map[string]any {
	return map[string]any{
		"csp": map[string]any{
			"connectDomains": []string{}, "resourceDomains": []string{},
			"frameDomains": []string{}, "baseUriDomains": []string{},
		},
		"prefersBorder": true,
	}
}

// appResource is the task center's resource declaration.
func appResource() *mcp.Resource {
	return &mcp.Resource{
		URI: AppURI, Name: "task-center", Title: "ClawConnect task center",
		Description: "Live view of a task: status, elapsed time, streaming log, result, session and a Cancel button; and a list of tasks.",
		MIMEType:    AppMIMEType,
		Meta:        mcp.Meta{"ui": appUIMeta()},
	}
}

func readApp(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	if req.Params == nil || req.Params.URI != AppURI {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
		URI: AppURI, MIMEType: AppMIMEType, Text: appHTML, Meta: mcp.Meta{"ui": appUIMeta()},
	}}}, nil
}

// appToolMeta is the _meta a declaring client sees on each tool, by name;
// a tool not named carries none (check_task, as before, and the rest).
// run_task, list_tasks and terminal_send render in the app (the MCP Apps
// resourceUri, and the ChatGPT Apps SDK's outputTemplate); the app calls
// get_task, get_session, list_tasks and cancel_task, and for a terminal
// Turn terminal_status, terminal_approve, terminal_respond and
// terminal_cancel (visibility "app", and ChatGPT's widgetAccessible).
func appToolMeta(name string) mcp.Meta {
	callable := func(ui map[string]any) mcp.Meta {
		ui["visibility"] = []string{"model", "app"}
		return mcp.Meta{"ui": ui, "openai/widgetAccessible": true}
	}
	rendered := func(invoking, invoked string) mcp.Meta {
		m := callable(map[string]any{"resourceUri": AppURI})
		m["ui/resourceUri"] = AppURI // the flat key of hosts older than _meta.ui
		m["openai/outputTemplate"] = AppURI
		m["openai/toolInvocation/invoking"] = invoking
		m["openai/toolInvocation/invoked"] = invoked
		return m
	}
	switch name {
	case "run_task":
		return rendered("Handing the task to the agent…", "The agent is on it")
	case "list_tasks":
		return rendered("Listing tasks…", "Tasks listed")
	case "terminal_send":
		return rendered("Typing into the terminal…", "The agent has the request")
	case "get_task", "get_session", "cancel_task",
		"terminal_status", "terminal_approve", "terminal_respond", "terminal_cancel":
		return callable(map[string]any{})
	}
	return nil
}

// declaresApp reports whether caps declare the extension with the app's
// MIME type (the extension's one required setting).
func declaresApp(caps *mcp.ClientCapabilities) bool {
	if caps == nil || caps.Extensions[AppExtension] == nil {
		return false
	}
	// The settings arrive decoded from JSON, or as Go values from a client
	// in the same process: one round trip reads both.
	data, err := json.Marshal(caps.Extensions[AppExtension])
	var settings struct {
		MIMETypes []string `json:"mimeTypes"`
	}
	if err != nil || json.Unmarshal(data, &settings) != nil {
		return false
	}
	return slices.Contains(settings.MIMETypes, AppMIMEType)
}

// appOn reports whether the caller of req sees the app.
func (c *conn) appOn(req mcp.Request) bool {
	if c.s.appForAll || c.app {
		return true
	}
	r, ok := req.(tasksRequest)
	return ok && declaresApp(r.ClientCapabilities())
}

// appMiddleware shows the app to a caller that declared it, and keeps
// tools/list, resources/list, initialize and server/discover exactly as
// before for every other caller.
func (c *conn) appMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.ListToolsResult:
			if !c.appOn(req) {
				break
			}
			tools := make([]*mcp.Tool, len(r.Tools))
			for i, t := range r.Tools {
				tools[i] = t
				if m := appToolMeta(t.Name); m != nil {
					cp := *t // the registered tool is shared by every caller
					cp.Meta = m
					tools[i] = &cp
				}
			}
			out := *r
			out.Tools = tools
			return &out, nil
		case *mcp.ListResourcesResult:
			if !c.appOn(req) {
				out := *r
				out.Resources = []*mcp.Resource{}
				return &out, nil
			}
		case *mcp.DiscoverResult:
			if c.appOn(req) || r.Capabilities == nil {
				break
			}
			caps := *r.Capabilities
			caps.Resources = nil
			out := *r
			out.Capabilities = &caps
			return &out, nil
		case *mcp.InitializeResult:
			ir, ok := req.(*mcp.InitializeRequest)
			if c.s.appForAll || c.app || (ok && ir.Params != nil && declaresApp(ir.Params.Capabilities)) || r.Capabilities == nil {
				break
			}
			caps := *r.Capabilities
			caps.Resources = nil
			out := *r
			out.Capabilities = &caps
			return &out, nil
		}
		return res, nil
	}
}

// addApp registers the resource and the middleware on ms.
func (c *conn) addApp(ms *mcp.Server) {
	ms.AddResource(appResource(), readApp)
	ms.AddReceivingMiddleware(c.appMiddleware)
}

type appKey struct{}

// appDeclared reports whether withAppSession found the declaration in the
// request's session id.
func appDeclared(ctx context.Context) bool {
	v, _ := ctx.Value(appKey{}).(bool)
	return v
}

// withAppSession carries a 2025-11-25 HTTP client's MCP Apps declaration
// from its initialize to its later requests (see the file comment): an
// initialize that declares it is answered with an app session id, a
// request that carries one is marked, and a DELETE of one is acknowledged
// (there is nothing to end). Every other request passes untouched, so a
// client that declares nothing sees no session id, as before.
func withAppSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("Mcp-Session-Id")
		legacy := r.Header.Get("Mcp-Protocol-Version") < tasksProtocol
		switch {
		case !legacy:
		case strings.HasPrefix(id, appSessionPrefix) && r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
			return
		case strings.HasPrefix(id, appSessionPrefix):
			w.Header().Set("Mcp-Session-Id", id)
			r = r.WithContext(context.WithValue(r.Context(), appKey{}, true))
		case id == "" && r.Method == http.MethodPost:
			if initializeDeclaresApp(r) {
				w.Header().Set("Mcp-Session-Id", newAppSessionID())
				r = r.WithContext(context.WithValue(r.Context(), appKey{}, true))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// initializeDeclaresApp reports whether r's body is an initialize that
// declares the extension, leaving the body for the next reader. Only a
// body that names the extension at all is decoded, so other requests pay
// one byte search.
func initializeDeclaresApp(r *http.Request) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || !bytes.Contains(body, []byte(AppExtension)) {
		return false
	}
	var msg struct {
		Method string                `json:"method"`
		Params *mcp.InitializeParams `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "initialize" || msg.Params == nil {
		return false
	}
	return declaresApp(msg.Params.Capabilities)
}

func newAppSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return appSessionPrefix + hex.EncodeToString(b[:])
}
