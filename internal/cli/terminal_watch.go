package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
)

// terminalWatchCmds are the inspect, watch, unwatch, watch-status and
// watches commands.
func terminalWatchCmds(env Env) []*cobra.Command {
	return []*cobra.Command{terminalInspectCmd(env), terminalWatchCmd(env), terminalUnwatchCmd(env), terminalWatchStatusCmd(env),
		terminalWatchesCmd(env)}
}

// withWatchAPI opens the service for one watch or inspect command.
func withWatchAPI(cmd *cobra.Command, env Env, f func(ctx context.Context, api *terminal.Service, s *terminalStack) error) error {
	return withTerminal(cmd, env, func(ctx context.Context, s *terminalStack) error {
		return f(ctx, s.svc, s)
	})
}

func terminalInspectCmd(env Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect TERMINAL_ID",
		Short: "Read the agent's own /status card: native session id, model, version, workspace",
		Long: `Type the agent's own /status into an idle pane, read its status card, close
it and check that the pane is back to an idle, empty composer. Prints the
native session (thread) id, model, version, workspace and the card's other rows
(values redacted; credential rows left out).

Refused before anything is typed when the pane is busy, shows a dialog or holds
a draft, when a Turn of ClawConnect runs in it, and for an agent version whose
card format is not proven (Codex 0.171.0 and Claude Code 2.1.332 are).`,
		Example: `  clawconnect terminal inspect terminal:v2:tmux:codex:work:0.0:4242
  clawconnect terminal inspect terminal:v2:tmux:claude:dev:1.0:777 --json | jq -r .native_thread_id`,
		Args: exactArgs(1, "inspect: usage: clawconnect terminal inspect TERMINAL_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWatchAPI(cmd, env, func(ctx context.Context, api *terminal.Service, _ *terminalStack) error {
				res, err := api.Inspect(ctx, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(env.Stdout, res)
				}
				printInspect(env.Stdout, res)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printInspect(w io.Writer, r terminal.InspectResult) {
	fmt.Fprintf(w, "terminal_id: %s\nagent: %s\nversion: %s\nmodel: %s\nnative_thread_id: %s\nworkspace: %s\n",
		r.TerminalID, r.Agent, r.Version, termSafe(r.Model), r.SessionID, termSafe(r.Workspace))
	names := make([]string, 0, len(r.Fields))
	for k := range r.Fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(w, "  %s: %s\n", termSafe(k), termSafe(r.Fields[k]))
	}
}

func terminalWatchCmd(env Env) *cobra.Command {
	var (
		origin, gatewayURL string
		timeout            time.Duration
		asJSON             bool
	)
	cmd := &cobra.Command{
		Use:   "watch TERMINAL_ID --origin-session SESSION_KEY",
		Short: "Watch a task a human started in a pane and notify an OpenClaw session when it ends",
		Long: `Follow the task a human runs in the pane (or the next one they start there) and
notify the OpenClaw session --origin-session once, through the same callback outbox as
Turns: when it completes (with the agent's reply), fails (Codex turn_aborted),
or reaches --hard-timeout, and once per approval prompt it shows. The watch is a
store record followed by the monitor host (` + "`clawconnect terminal daemon`" + ` or
` + "`serve`" + `); it survives a host restart. Stop it with unwatch.

A task that already runs is joined (Codex: its open task_started; Claude Code:
the last human prompt, while its turn is open). Refused while a Turn of
ClawConnect runs in the pane, while the pane already has an active watch, and
when it shows a dialog or holds an unsent draft.`,
		Example: `  clawconnect terminal watch terminal:v2:tmux:codex:work:0.0:4242 --origin-session agent:main:main
  clawconnect terminal watch terminal:v2:tmux:codex:work:0.0:4242 --origin-session agent:main:main --hard-timeout 2h --json`,
		Args: exactArgs(1, "watch: usage: clawconnect terminal watch TERMINAL_ID --origin-session SESSION_KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkGatewayURLFlag("watch", gatewayURL); err != nil {
				return err
			}
			return withWatchAPI(cmd, env, func(ctx context.Context, api *terminal.Service, s *terminalStack) error {
				v, err := api.Watch(ctx, watch.Request{TerminalID: args[0], OriginSession: origin, GatewayURL: gatewayURL, Timeout: timeout})
				if err != nil {
					return err
				}
				if s.host != nil {
					fmt.Fprintln(env.Stderr, "clawconnect: no monitor host runs; the watch is followed once `clawconnect terminal daemon` or `serve` starts")
				}
				return printWatch(env, v, asJSON)
			})
		},
	}
	cmd.Flags().StringVar(&origin, "origin-session", "", "OpenClaw session key notified (required)")
	cmd.Flags().StringVar(&gatewayURL, "gateway-url", "", "gateway serving --origin-session (default: the configured agent's gateway, or OPENCLAW_URL)")
	cmd.Flags().DurationVar(&timeout, "hard-timeout", 0, "give the task this long, then notify timed_out (default 12h)")
	// --origin and --timeout were this command's names until send's
	// spellings became the one vocabulary (--timeout stops a wait elsewhere).
	renameFlags(cmd, map[string]string{"origin": "origin-session", "timeout": "hard-timeout"})
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func terminalUnwatchCmd(env Env) *cobra.Command {
	var (
		asJSON     bool
		forSession string
	)
	cmd := &cobra.Command{
		Use:   "unwatch (WATCH_ID | TERMINAL_ID)",
		Short: "Stop a watch: nothing more is notified for it",
		Long: `Cancel the active watch named by its watch id or by its pane's terminal id.
Notifications already queued are still delivered; none is added. A watch that
already ended is shown unchanged.`,
		Example: `  clawconnect terminal unwatch watch-20260101T120000-1a2b3c4d
  clawconnect terminal unwatch terminal:v2:tmux:codex:work:0.0:4242`,
		Args: exactArgs(1, "unwatch: usage: clawconnect terminal unwatch (WATCH_ID | TERMINAL_ID)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWatchAPI(cmd, env, func(ctx context.Context, api *terminal.Service, _ *terminalStack) error {
				id := args[0]
				if forSession != "" {
					v, err := api.WatchStatus(ctx, id)
					if err != nil {
						return err
					}
					if err := sentBy(v.WatchID, v.OriginSession, forSession); err != nil {
						return err
					}
					id = v.WatchID // the watch checked, even if the pane's changes
				}
				v, err := api.Unwatch(ctx, id)
				if err != nil {
					return err
				}
				return printWatch(env, v, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&forSession, "for-session", "", forSessionUsage)
	return cmd
}

func terminalWatchStatusCmd(env Env) *cobra.Command {
	var (
		asJSON     bool
		forSession string
	)
	cmd := &cobra.Command{
		Use:   "watch-status (WATCH_ID | TERMINAL_ID)",
		Short: "Show a watch: status, the task seen, how it ended, its notifications' delivery",
		Long: `Show the watch named by its watch id, or the active watch of a pane by its
terminal id.`,
		Example: `  clawconnect terminal watch-status watch-20260101T120000-1a2b3c4d --json
  clawconnect terminal watch-status terminal:v2:tmux:codex:work:0.0:4242`,
		Args: exactArgs(1, "watch-status: usage: clawconnect terminal watch-status (WATCH_ID | TERMINAL_ID)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withWatchAPI(cmd, env, func(ctx context.Context, api *terminal.Service, _ *terminalStack) error {
				v, err := api.WatchStatus(ctx, args[0])
				if err != nil {
					return err
				}
				if forSession != "" {
					if err := sentBy(v.WatchID, v.OriginSession, forSession); err != nil {
						return err
					}
				}
				return printWatch(env, v, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&forSession, "for-session", "", forSessionUsage)
	return cmd
}

func terminalWatchesCmd(env Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "watches",
		Short:   "List the active watches: pane, origin session, whether the task was seen, deadline",
		Example: "  clawconnect terminal watches\n  clawconnect terminal watches --json | jq -r '.[].watch_id'",
		Args:    exactArgs(0, "watches: usage: clawconnect terminal watches [--json]"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withWatchAPI(cmd, env, func(ctx context.Context, api *terminal.Service, _ *terminalStack) error {
				list, err := api.Watches(ctx, 0)
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(env.Stdout, list)
				}
				if len(list) == 0 {
					fmt.Fprintln(env.Stdout, "no active watch")
					return nil
				}
				tw := tabwriter.NewWriter(env.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "WATCH\tTERMINAL\tORIGIN SESSION\tTASK SEEN\tDEADLINE")
				for _, v := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", v.WatchID, v.TerminalID, termSafe(v.OriginSession), v.TaskSeen, v.DeadlineAt)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printWatch(env Env, v watch.View, asJSON bool) error {
	if asJSON {
		return printJSON(env.Stdout, v)
	}
	w := env.Stdout
	fmt.Fprintf(w, "watch_id: %s\nstatus: %s\nterminal_id: %s\nagent: %s\nsession_id: %s\norigin_session: %s\ntask_seen: %v\ndeadline_at: %s\n",
		v.WatchID, v.Status, v.TerminalID, v.Agent, v.SessionID, termSafe(v.OriginSession), v.TaskSeen, v.DeadlineAt)
	if st := v.Settlement; st != nil {
		fmt.Fprintf(w, "ended: %s\ntext: %s\n", st.Kind, termSafe(st.Text))
	}
	for _, n := range v.Notifications {
		fmt.Fprintf(w, "notification: %s %s %s (attempts %d)\n", n.MessageID, n.Kind, n.Status, n.Attempts)
	}
	return nil
}
