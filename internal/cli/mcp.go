package cli

import (
	"context"
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/server"
)

func newMCPCmd(env Env) *cobra.Command { return mcpCmd(env, openStdioBridge) }

func mcpCmd(env Env, open opener) *cobra.Command {
	var terminalTools bool
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the task-bridge MCP tools over stdio",
		Long: `Serve the task-bridge MCP tools (run_task, check_task, get_task, list_tasks,
get_session, list_sessions, cancel_task, list_agents, get_connection_info)
over stdio, for MCP clients that start a local command.

Standard output carries only the MCP protocol; logs go to standard error
(level from CLAWCONNECT_LOG_LEVEL). The command exits when the client closes
standard input. With --terminal-tools (or CLAWCONNECT_TERMINAL_TOOLS=1) it
also serves terminal_list, terminal_send, terminal_status, terminal_respond,
terminal_approve and terminal_cancel, which drive the Codex and Claude Code
TUIs in tmux panes (see clawconnect terminal). Agents come from CLAWCONNECT_HOME/agents.json or from
OPENCLAW_URL + OPENCLAW_PASSWORD.

Exit codes: 0 clean exit, 1 failure, 3 no or invalid agent configuration.`,
		Example: `  # Claude Code (~/.claude.json or .mcp.json):
  #   {"mcpServers": {"clawconnect": {"command": "clawconnect", "args": ["mcp"]}}}
  OPENCLAW_URL=ws://127.0.0.1:18789 OPENCLAW_PASSWORD=secret clawconnect mcp

  # Inspect the tools with the MCP Inspector:
  npx @modelcontextprotocol/inspector --cli clawconnect mcp --method tools/list`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if env.OwnProcess && env.Getenv("GOMAXPROCS") == "" {
				// An mcp process serves one client, whose calls hardly
				// overlap; with a P per core, its idle Ps spin looking
				// for work after every wake, and with several clients
				// (each its own mcp) on a small machine that spinning
				// was a third of their CPU: ten processes on one store
				// used 20 ms of CPU per task, 13 ms with one P each.
				// The binary's main has done this already, while its
				// packages initialized, where it costs less
				// (cmd/clawconnect/internal/oneproc); then this call
				// changes nothing and stops nothing.
				runtime.GOMAXPROCS(1)
			}
			logger := newLogger(env)
			// The configuration is checked before serving (a missing one
			// exits 3); the store, the task managers and the runtime modules
			// open in the background once ServeStdio has answered the first
			// message and registered the tools (pending is a server.Starter),
			// or at the first tool call that needs them.
			reg, err := loadRegistry(env)
			if err != nil {
				fmt.Fprintln(env.Stderr, "clawconnect mcp:", configHint)
				return err
			}
			fmt.Fprintf(env.Stderr, "clawconnect mcp: %s\n", describeRegistry(reg))
			var terms *lazyTerminals
			if terminalToolsOn(env, terminalTools) {
				terms = &lazyTerminals{env: env, logger: logger, ctx: ctx, host: mcpHostsTerminals(env, true)}
			}
			pending := newPending(ctx, func(ctx context.Context) (*backend, error) {
				b, err := open(ctx, env, logger)
				if err != nil {
					fmt.Fprintln(env.Stderr, "clawconnect mcp: task service unavailable:", err)
					return nil, err
				}
				if env.OwnProcess {
					releaseStartPages()
				}
				if len(b.runtimes) > 0 {
					fmt.Fprintf(env.Stderr, "clawconnect mcp: agent-session runtimes: %s\n", strings.Join(b.runtimes, ", "))
				}
				if terms != nil && terms.host {
					// A long-lived process follows terminal work from
					// the start, not from its first terminal tool call.
					if _, err := terms.opened(b.shared); err != nil {
						logger.Warn("terminal monitor host not started", "err", err)
					}
				}
				return b, nil
			})
			defer pending.close()
			sv := settingsOf(env)
			opts := serverOptions(sv)
			opts.Tasks, opts.Registry, opts.Logger = pending, reg, logger
			if terms != nil {
				defer terms.close() // deferred after pending.close: the host stops before the store closes
				terms.shared = pending.sharedStore
				opts.Terminals = terms
			}
			srv, err := server.New(opts)
			if err != nil {
				return err
			}
			stdin, closeStdin := pollableStdin(env.Stdin)
			defer closeStdin()
			return srv.ServeStdio(ctx, stdin, env.Stdout)
		},
	}
	cmd.Flags().BoolVar(&terminalTools, "terminal-tools", false, "also serve the terminal_* tools (CLAWCONNECT_TERMINAL_TOOLS=1)")
	return cmd
}
