// Package server is ClawConnect's MCP server: the nine task-bridge tools
// (plus the terminal tools when Options.Terminals is set), declared once
// and served identically over stdio and stateless streamable HTTP, with
// HTTP authentication, per-connection agent scopes, CORS, a health endpoint
// and Prometheus metrics. It is public so that a host can embed it with
// its own task service (Tasks), agent list (taskapi.Registry), credential
// check (Authenticator) and Turn service (Terminals): its API names only
// its own types and those of taskapi and termapi, and it links no store
// (see Example_embed). The clawconnect commands pass it the bundled
// bridge of stores, gateways and task managers, which is internal.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/taskapi"
)

// DefaultVersion is reported when Options.Version is empty.
const DefaultVersion = "0.2.0"

// Options configures a Server. Tasks and Registry are required; every other
// zero value is a documented default.
type Options struct {
	// Tasks is the task service behind the tools.
	Tasks Tasks
	// Registry is the agent configuration: the agents the tools offer, their
	// groups (for /mcp?group=) and the default agent.
	Registry *taskapi.Registry
	// CheckWait is how long check_task waits when the call names no waitMs;
	// zero means 45 s.
	CheckWait time.Duration
	// CheckMaxWait caps every check_task and terminal_status wait (and so
	// the HTTP write timeout); zero means 120 s.
	CheckMaxWait time.Duration
	// Auth checks HTTP credentials; nil means an open HTTP server. stdio
	// never authenticates.
	Auth Authenticator
	// OAuth, when set, turns on OAuth mode: access tokens of the
	// operator's authorization server are accepted (see ResourceServer),
	// and Auth's credentials only beside them.
	OAuth *ResourceServer
	// NoPassParam ignores the ?pass= query credential: a token in a URL
	// ends up in proxy and browser logs. Credentials are then taken only
	// from the Authorization header.
	NoPassParam bool
	// AllowUnauthenticatedRemote lets ListenAndServe bind a non-loopback
	// address while Auth requires nothing. Off by default.
	AllowUnauthenticatedRemote bool
	// AllowedOrigins lists the browser origins ("http://localhost:5173")
	// that may call /mcp besides the server's own origin; a request whose
	// Origin header is anything else is refused with 403. "*" allows every
	// origin, and is honoured only when Auth requires a credential. Nil
	// means none (CLAWCONNECT_ALLOWED_ORIGINS).
	AllowedOrigins []string
	// SharedTaskView lets every HTTP credential see and control every task
	// and session (a team view; CLAWCONNECT_SHARED_TASK_VIEW). Off by
	// default: a personal token, and the shared PUBLIC_MCP_PASS as one
	// identity, sees only the tasks and sessions it started. A caller with
	// no credential (stdio, an open server) always sees everything.
	SharedTaskView bool
	// Limits bounds the connections of ListenAndServe (timeouts and a
	// connection cap) and the streams of each identity; the zero value
	// takes the documented defaults.
	Limits Limits
	// TrustedProxies are the reverse proxies whose X-Forwarded-For and
	// X-Forwarded-Proto are believed (CLAWCONNECT_TRUSTED_PROXIES): a
	// request from one counts against the forwarded client's address, and
	// is secure when the proxy says it came over https. They are exempt
	// from Limits.PreAuthPerAddress. Nil means none.
	TrustedProxies []netip.Prefix
	// Version is reported as serverVersion; empty means DefaultVersion.
	Version string
	// Build is reported as build (CLAWCONNECT_BUILD_SHA); empty means "unknown".
	Build string
	// Logger receives operational logs; nil discards them. Never stdout.
	Logger *slog.Logger
	// TaskRetention is how long the task service keeps an ended task (the
	// store's retention); the MCP Tasks extension reports it in each task's
	// ttlMs. Zero reports ttlMs null (kept without limit).
	TaskRetention time.Duration
	// Terminals, when set, adds the terminal tools (terminal_list,
	// terminal_send, terminal_status, terminal_respond, terminal_approve,
	// terminal_cancel) to every connection. Nil (the default) leaves them
	// out, and tools/list is exactly the nine task-bridge tools.
	Terminals Terminals
	// AppForAll shows the task center (the MCP App, see AppURI) to every
	// client, also one that does not declare the MCP Apps extension, as
	// ChatGPT's Apps SDK hosts do not (ENABLE_CHATGPT_UI_WIDGET). Off, only
	// a declaring client sees it, and every other one sees the tools and
	// resources exactly as without the app.
	AppForAll bool
}

// Server serves the tools. It is safe for concurrent use by any number of
// connections; it owns no goroutines of its own.
type Server struct {
	tasks     Tasks
	registry  *taskapi.Registry
	waits     waits
	auth      Authenticator
	oauth     *resource // nil outside OAuth mode
	noPass    bool
	allowRem  bool
	version   string
	build     string
	logger    *slog.Logger
	metrics   *metrics
	origins   originPolicy
	limits    Limits // with defaults
	proxies   []netip.Prefix
	shared    bool
	pages     http.Handler // SetPages; nil serves a plain "OK" at /
	terminals Terminals
	retention time.Duration // Options.TaskRetention
	appForAll bool          // Options.AppForAll

	mu    sync.Mutex
	cache map[string]*mcp.Server // per scope+identity, bounded by maxCachedServers

	streams  streams
	failures failures

	drainOnce sync.Once
	draining  chan struct{} // closed by Drain
}

// maxCachedServers bounds the per-scope MCP server cache of the HTTP handler.
const maxCachedServers = 64

// New validates opts and returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Tasks == nil {
		return nil, errors.New("server: Options.Tasks is required")
	}
	if opts.Registry == nil || len(opts.Registry.Agents) == 0 {
		return nil, errors.New("server: Options.Registry with at least one agent is required")
	}
	s := &Server{
		tasks:     opts.Tasks,
		registry:  opts.Registry,
		waits:     newWaits(opts.CheckWait, opts.CheckMaxWait),
		auth:      opts.Auth,
		noPass:    opts.NoPassParam,
		allowRem:  opts.AllowUnauthenticatedRemote,
		proxies:   opts.TrustedProxies,
		shared:    opts.SharedTaskView,
		terminals: opts.Terminals,
		retention: opts.TaskRetention,
		appForAll: opts.AppForAll,
		version:   opts.Version,
		build:     opts.Build,
		logger:    opts.Logger,
		cache:     make(map[string]*mcp.Server),
		draining:  make(chan struct{}),
	}
	if s.version == "" {
		s.version = DefaultVersion
	}
	if s.build == "" {
		s.build = "unknown"
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.auth == nil {
		s.auth = openAuth{}
	}
	if opts.OAuth != nil {
		rs, err := newResource(opts.OAuth)
		if err != nil {
			return nil, err
		}
		s.oauth = rs
	}
	s.limits = opts.Limits.withDefaults(s.waits.max)
	s.streams = streams{per: map[taskapi.Identity]int{}, perMax: s.limits.StreamsPerIdentity, max: s.limits.MaxConns - s.limits.StreamReserve}
	s.metrics = newMetrics(s.tasks)
	s.origins = newOriginPolicy(opts.AllowedOrigins, s.authRequired())
	return s, nil
}

// Drain makes every waiting check_task return at once (asking the client to
// check again) and every later wait return immediately. ListenAndServe
// calls it when shutdown starts; it is idempotent and safe to call from any
// goroutine.
func (s *Server) Drain() {
	s.drainOnce.Do(func() { close(s.draining) })
}

// MCPServer returns the MCP server for a connection with the given scope and
// identity. Servers are cached, so repeated calls with the same arguments
// return the same value.
func (s *Server) MCPServer(scope taskapi.Scope, id taskapi.Identity) *mcp.Server {
	return s.mcpServer(scope, id, false)
}

// mcpServer is MCPServer for a caller whose MCP Apps declaration app
// carries from an earlier initialize (withAppSession).
func (s *Server) mcpServer(scope taskapi.Scope, id taskapi.Identity, app bool) *mcp.Server {
	key := strings.Join(scope.Allowed, ",") + "|" + scope.Default + "|" + scope.ServerName + "|" + id.User + fmt.Sprintf("|%t|%t", id.Legacy, app)
	s.mu.Lock()
	defer s.mu.Unlock()
	if ms, ok := s.cache[key]; ok {
		return ms
	}
	if len(s.cache) >= maxCachedServers {
		for k := range s.cache { // evict an arbitrary entry
			delete(s.cache, k)
			break
		}
	}
	ms := s.newMCPServer(&conn{s: s, scope: scope, identity: id, app: app})
	s.cache[key] = ms
	return ms
}

// newMCPServer returns the MCP server of c with every tool registered.
func (s *Server) newMCPServer(c *conn) *mcp.Server {
	ms := s.bareMCPServer(c)
	c.register(ms)
	ms.AddReceivingMiddleware(s.metrics.middleware)
	return ms
}

// bareMCPServer returns the MCP server of c without tools, with the MCP
// Tasks extension and the task center's resource. Its capabilities are
// fixed (tools, without list-changed notifications, resources and the
// extension), so what initialize and server/discover
// answer does not depend on whether the tools are registered yet, and
// registering them later sends no notification.
func (s *Server) bareMCPServer(c *conn) *mcp.Server {
	ms := mcp.NewServer(&mcp.Implementation{Name: c.serverName(), Title: "ClawConnect", Version: s.version}, &mcp.ServerOptions{
		Logger:       s.logger,
		Instructions: "Hand tasks to OpenClaw agents: run_task returns at once with a jobId; check_task waits for the result. list_agents shows who can help.",
		Capabilities: &mcp.ServerCapabilities{
			Tools:      &mcp.ToolCapabilities{},
			Resources:  &mcp.ResourceCapabilities{},
			Extensions: map[string]any{TasksExtension: map[string]any{}},
		},
	})
	// Added first, so it is the innermost: see direct.go. The stdio calls
	// run the same middleware around a tools/call (stdioCalls.around).
	c.direct = &directCalls{}
	ms.AddReceivingMiddleware(c.direct.middleware)
	c.addTasksExtension(ms)
	c.addApp(ms)
	return ms
}

// register adds every tool of c to ms, and their direct calls to c's
// middleware.
func (c *conn) register(ms *mcp.Server) {
	defs := c.tools()
	for _, d := range defs {
		d.handler.add(ms, d.tool)
	}
	c.direct.set(defs)
}

// Tools returns the tool declarations of a connection with the full scope
// and no identity, in declaration order. The result is a copy.
func (s *Server) Tools() []*mcp.Tool {
	c := &conn{s: s, scope: s.registry.FullScope()}
	var out []*mcp.Tool
	for _, d := range c.tools() {
		t := *d.tool
		out = append(out, &t)
	}
	return out
}

// ToolsetVersion returns the toolset hash that get_connection_info reports
// for a full-scope, anonymous connection.
func (s *Server) ToolsetVersion() string {
	return toolsetVersion((&conn{s: s, scope: s.registry.FullScope()}).tools())
}

// ServeStdio serves one MCP connection over newline-delimited JSON on r and
// w with every agent in scope. It returns nil when r reaches end of file
// (the client closed stdin) or ctx is cancelled; w carries only protocol. A
// malformed line is answered with a JSON-RPC error and does not end the
// session.
//
// The tools are registered once the first message has been handled (for
// a client, its initialize request): inferring and resolving their schemas
// is the largest piece of work before a fresh process can answer, and
// initialize does not need them. tools/list and tools/call wait until they
// are registered, so every client sees the same tools as on HTTP. If the
// Tasks value is a Starter, it is started once the tools are registered.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	return s.serveStdio(ctx, r, w, stdioOptions{})
}

// stdioOptions are what the tests of the stdio calls (stdio_calls.go)
// change; the zero value is ServeStdio's.
type stdioOptions struct {
	viaSDK bool          // hand every message to go-sdk, none past it
	direct *atomic.Int64 // counts the calls answered past go-sdk
}

func (s *Server) serveStdio(ctx context.Context, r io.Reader, w io.Writer, opts stdioOptions) error {
	c := &conn{s: s, scope: s.registry.FullScope()}
	ms := s.bareMCPServer(c)
	gate := newToolGate()
	// The stdio calls run the same middleware around a tools/call
	// (stdioCalls.around).
	ms.AddReceivingMiddleware(gate.middleware, s.metrics.middleware)
	out := &lineWriter{w: w}
	t := &stdioTransport{guard: newStdioGuard(r, out), out: out, listens: newStdioListens(c, out)}
	if !opts.viaSDK {
		t.calls = newStdioCalls(ctx, c, ms, gate, out)
		t.calls.counted = opts.direct
		defer t.calls.shutdown()
	}
	done := make(chan error, 1)
	go func() {
		done <- ms.Run(ctx, t)
	}()
	var err error
	select {
	case <-gate.due:
		// Registered here, not in a goroutine of its own: this goroutine
		// is idle while the session runs, and its stack has long grown,
		// where a fresh one would be copied several times over the deep
		// calls of schema inference (measured: tools/list answered ~2 ms
		// sooner, the first store-backed call ~6 ms sooner).
		c.register(ms)
		if st, ok := s.tasks.(Starter); ok {
			st.Start()
		}
		close(gate.ready)
		err = <-done
	case err = <-done:
	}
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return fmt.Errorf("serve stdio: %w", err)
}
