package cli

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/dashboard"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/server"
)

// DefaultServeAddr is where serve listens unless --addr says otherwise.
const DefaultServeAddr = "127.0.0.1:7331"

func newServeCmd(env Env) *cobra.Command { return serveCmd(env, openServerBridge) }

// listenError turns the listen failures a user can fix into what to do:
// a non-loopback address without credentials names the flag that allows it,
// a busy port suggests --addr.
func listenError(addr string, err error) error {
	switch {
	case errors.Is(err, server.ErrInsecureRemote):
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("serve: refusing to listen on %s, beyond loopback, without authentication: "+
			"set MCP_USER_TOKENS, MCP_USER_TOKENS_FILE or PUBLIC_MCP_PASS, or pass --allow-unauthenticated-remote to serve an open /mcp anyway", addr)}
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("serve: %s is already in use (another clawconnect serve?): stop that process, or listen elsewhere with --addr, e.g. --addr 127.0.0.1:7332: %w", addr, err)
	}
	return err
}

func serveCmd(env Env, open opener) *cobra.Command {
	var (
		addr        string
		allowRemote bool
		grace       time.Duration
		termTools   bool
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the task-bridge MCP tools over streamable HTTP, and the dashboard",
		Long: `Serve the task-bridge MCP tools over stateless streamable HTTP at /mcp, with
/health, Prometheus /metrics and a live web dashboard at / (tasks, sessions,
health; a browser signs in with the same token as /mcp), until interrupted
(SIGINT or SIGTERM), then shut down gracefully.

Authentication: personal tokens from MCP_USER_TOKENS ("Name:token,...") and
MCP_USER_TOKENS_FILE (JSON, re-read when it changes), or the shared
PUBLIC_MCP_PASS, presented as "Authorization: Bearer <token>" or ?pass=<token>;
each at least 16 characters. Without any of them /mcp is open, and serve refuses
to listen beyond loopback unless --allow-unauthenticated-remote is given. An
address whose tokens are refused more than 10 times is answered 429 for a while.

OAuth mode: with CLAWCONNECT_OAUTH_ISSUER and CLAWCONNECT_OAUTH_RESOURCE set,
/mcp and the dashboard also accept access tokens of that authorization
server (JWTs checked against its published keys, or opaque tokens by
introspection), and /.well-known/oauth-protected-resource tells MCP clients
where to sign in; a request without a valid token is answered 401 with a
WWW-Authenticate: Bearer challenge. ?pass= is then off unless
CLAWCONNECT_PASS_PARAM=on. See the README's "Remote access with your
identity provider".

Isolation: each personal token sees and controls only the tasks and sessions
it started (the shared PUBLIC_MCP_PASS counts as one identity); others read as
not found. CLAWCONNECT_SHARED_TASK_VIEW=1 turns on a team view in which every
credential sees and controls every task.

Browsers: a request whose Origin header is not the server's own origin and
not listed in CLAWCONNECT_ALLOWED_ORIGINS (comma-separated, e.g.
"http://localhost:5173") is refused with 403; on a loopback --addr so is a
request for any Host but a loopback name (or a listed origin's host).

Terminal tools: --terminal-tools (or CLAWCONNECT_TERMINAL_TOOLS=1) adds
terminal_list, terminal_send, terminal_status, terminal_respond,
terminal_approve and terminal_cancel to every connection: any caller allowed
on /mcp can then type into the Codex and Claude Code panes of this machine.

Scopes: /mcp?group=<g>, ?agents=a,b or ?agent=a narrow a connection to some
agents; tasks of other agents then read as not found.

Exit codes: 0 clean shutdown, 1 failure, 2 bad flags, 3 no or invalid agent
configuration.`,
		Example: `  clawconnect serve
  clawconnect serve --addr 127.0.0.1:8080
  MCP_USER_TOKENS="ana:$(openssl rand -hex 16)" clawconnect serve --addr 0.0.0.0:7331
  curl -s http://127.0.0.1:7331/health`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--addr %q: %w", addr, err)}
			}
			ctx := cmd.Context()
			logger := newLogger(env)
			sv := settingsOf(env)
			auth := config.AuthFrom(sv)
			auth.Logger = logger
			authn, err := config.NewAuthenticator(auth)
			if err != nil {
				return &ExitError{Code: ExitConfig, Err: fmt.Errorf("serve: %w", err)}
			}
			oc := oauthFrom(sv)
			var rs *server.ResourceServer
			var signIn *dashboard.OAuthSignIn
			if oc.On {
				if _, rs, signIn, err = oc.build(logger.With("component", "oauth")); err != nil {
					return &ExitError{Code: ExitConfig, Err: fmt.Errorf("serve: oauth: %w", err)}
				}
			}
			b, err := open(ctx, env, logger)
			if err != nil {
				return err
			}
			defer b.close()
			fmt.Fprintf(env.Stderr, "clawconnect serve: %s\n", describeRegistry(b.registry))
			if len(b.runtimes) > 0 {
				fmt.Fprintf(env.Stderr, "clawconnect serve: agent-session runtimes: %s\n", strings.Join(b.runtimes, ", "))
			}
			svc, stopTerminals := startTerminalHost(ctx, env, b.shared, logger, "serve")
			defer stopTerminals()
			var terms server.Terminals
			switch {
			case !terminalToolsOn(env, termTools):
			case svc != nil:
				terms = svc
			default:
				fmt.Fprintln(env.Stderr, "clawconnect serve: terminal tools off: terminal turns are unavailable in this process (see the log)")
			}
			sopts := serverOptions(sv)
			sopts.Terminals, sopts.Tasks, sopts.Registry, sopts.Auth = terms, b.tasks, b.registry, authn
			sopts.CheckWait, sopts.CheckMaxWait = b.timeouts.CheckWait, b.timeouts.CheckMaxWait
			sopts.AllowUnauthenticatedRemote, sopts.Logger = allowRemote, logger
			sopts.OAuth, sopts.NoPassParam = rs, oc.NoPassParam
			srv, err := server.New(sopts)
			if err != nil {
				return err
			}
			dopts := dashboardOptions(sv)
			dopts.Server, dopts.Runtimes, dopts.StoreInfo = srv, b.runtimes, storeInfo(sv, b.shared)
			dopts.Logger = logger.With("component", "dashboard")
			dopts.OAuth = signIn
			if b.shared != nil {
				dopts.Feed, dopts.Processes, dopts.Attachments = b.shared, b.shared, b.shared
			}
			if svc != nil {
				dopts.Terminals, dopts.TerminalRecords = svc, b.shared
			}
			dash, err := dashboard.New(dopts)
			if err != nil {
				return fmt.Errorf("serve: dashboard: %w", err)
			}
			srv.SetPages(dash)
			err = srv.ListenAndServe(ctx, addr, grace, func(a net.Addr) {
				auth := "open: no credentials configured"
				switch {
				case rs != nil:
					auth = "OAuth: access tokens of " + rs.AuthorizationServers[0] + " for " + rs.Resource
				case authn.Required():
					auth = "a token is required"
				}
				fmt.Fprintf(env.Stderr, "clawconnect serve: listening on http://%s/mcp (%s)\n", a, auth)
				fmt.Fprintf(env.Stderr, "clawconnect serve: dashboard at http://%s/\n", a)
			})
			if err != nil {
				return listenError(addr, err)
			}
			fmt.Fprintln(env.Stderr, "clawconnect serve: stopped")
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", DefaultServeAddr, "listen address host:port")
	cmd.Flags().BoolVar(&allowRemote, "allow-unauthenticated-remote", false, "listen beyond loopback even though no credential is configured")
	cmd.Flags().BoolVar(&termTools, "terminal-tools", false, "also serve the terminal_* tools (CLAWCONNECT_TERMINAL_TOOLS=1)")
	cmd.Flags().DurationVar(&grace, "shutdown-grace", 10*time.Second, "how long in-flight requests may take to finish on shutdown")
	return cmd
}

// dashboardOptions is the part of dashboard.Options the settings set.
func dashboardOptions(sv settings.Values) dashboard.Options {
	return dashboard.Options{InsecureCookie: sv.InsecureCookie}
}

// storeInfo describes the store for the dashboard's Health page, without
// credentials.
func storeInfo(sv settings.Values, shared store.Store) string {
	kind := "SQLite under " + sv.Home
	if sv.DatabaseURL != "" {
		kind = "PostgreSQL (CLAWCONNECT_DATABASE_URL)"
	}
	if shared == nil {
		return kind + ", read through another process"
	}
	return kind
}
