package cli

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/server"
)

// DefaultServeAddr is where serve listens unless --addr says otherwise.
const DefaultServeAddr = "127.0.0.1:7331"

func newServeCmd(env Env) *cobra.Command { return serveCmd(env, openServerBridge) }

func serveCmd(env Env, open opener) *cobra.Command {
	var (
		addr        string
		allowRemote bool
		grace       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the task-bridge MCP tools over streamable HTTP",
		Long: `Serve the task-bridge MCP tools over stateless streamable HTTP at /mcp, with
/health and Prometheus /metrics, until interrupted (SIGINT or SIGTERM), then
shut down gracefully.

Authentication: personal tokens from MCP_USER_TOKENS ("Name:token,...") and
MCP_USER_TOKENS_FILE (JSON, re-read when it changes), or the shared
PUBLIC_MCP_PASS, presented as "Authorization: Bearer <token>" or ?pass=<token>.
Without any of them /mcp is open, and serve refuses to listen beyond loopback
unless --allow-unauthenticated-remote is given.

Scopes: /mcp?group=<g>, ?agents=a,b or ?agent=a narrow a connection to some
agents; tasks of other agents then read as not found.

Exit codes: 0 clean shutdown, 1 failure, 2 bad flags, 3 no or invalid agent
configuration.`,
		Example: `  clawconnect serve
  clawconnect serve --addr 127.0.0.1:8080
  MCP_USER_TOKENS="ana:s3cret" clawconnect serve --addr 0.0.0.0:7331
  curl -s http://127.0.0.1:7331/health`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, _, err := net.SplitHostPort(addr); err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--addr %q: %w", addr, err)}
			}
			ctx := cmd.Context()
			logger := newLogger(env)
			auth := config.AuthFromEnv(getenv(env))
			auth.Logger = logger
			authn := config.NewAuthenticator(auth)
			b, err := open(ctx, env, logger)
			if err != nil {
				return err
			}
			defer b.close()
			fmt.Fprintf(env.Stderr, "clawconnect serve: %s\n", describeRegistry(b.registry))
			if len(b.runtimes) > 0 {
				fmt.Fprintf(env.Stderr, "clawconnect serve: agent-session runtimes: %s\n", strings.Join(b.runtimes, ", "))
			}
			stopTerminals := startTerminalHost(ctx, env, b.shared, logger)
			defer stopTerminals()
			srv, err := server.New(server.Options{
				Tasks: b.tasks, Registry: b.registry, Timeouts: &b.timeouts, Auth: authn,
				AllowUnauthenticatedRemote: allowRemote,
				Version:                    version(), Build: config.BuildSHA(getenv(env)), Logger: logger,
			})
			if err != nil {
				return err
			}
			err = srv.ListenAndServe(ctx, addr, grace, func(a net.Addr) {
				auth := "open (no credentials configured)"
				if authn.Required() {
					auth = "token required"
				}
				fmt.Fprintf(env.Stderr, "clawconnect serve: listening on http://%s/mcp (%s)\n", a, auth)
			})
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Stderr, "clawconnect serve: stopped")
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", DefaultServeAddr, "listen address host:port")
	cmd.Flags().BoolVar(&allowRemote, "allow-unauthenticated-remote", false, "listen beyond loopback even though no credential is configured")
	cmd.Flags().DurationVar(&grace, "shutdown-grace", 10*time.Second, "how long in-flight requests may take to finish on shutdown")
	return cmd
}
