package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/termapi"
)

// terminalThreadCmds are the native thread commands of `clawconnect terminal`.
func terminalThreadCmds(env Env) []*cobra.Command {
	return []*cobra.Command{
		threadCmd(env, "new-thread TERMINAL_ID", "Start a new native thread in the pane's agent (no Turn)",
			`Start a new native thread in the agent of the pane with its own control
(Claude Code: /clear; Codex: /new), after checking that nothing unresolved is on the
terminal (a running Turn, a pending approval, an undelivered callback, an
uncertain dispatch or transition). The step is recorded before the pane is
touched and verified from the agent's own files: the thread id must change.
The pane's Session is left detached; a new Session is bound at the next
binding generation. No Turn is created: the next ordinary send starts the
first Turn in the new thread. Refused on an agent version the plan was not
proven on (Claude Code 2.1.332, Codex 0.171.0), and on a Codex that has had
no prompt yet (it has no thread to leave).`,
			`  clawconnect terminal new-thread terminal:v2:tmux:claude:work:0.0:4242`,
			func(ctx context.Context, api *terminal.Service, args []string) (any, error) {
				return api.NewThread(ctx, args[0])
			}),
		threadCmd(env, "clear-thread TERMINAL_ID", "Clear the pane agent's context into a new native thread (no Turn)",
			`Like new-thread, with the agent's clear control (/clear).`,
			`  clawconnect terminal clear-thread terminal:v2:tmux:claude:work:0.0:4242`,
			func(ctx context.Context, api *terminal.Service, args []string) (any, error) {
				return api.ClearThread(ctx, args[0])
			}),
		threadCmd(env, "resume-thread TERMINAL_ID NATIVE_THREAD_ID", "Resume an earlier native thread of the pane's workspace (no Turn)",
			`Resume NATIVE_THREAD_ID (a complete id that `+"`terminal threads`"+` lists for the pane)
with the agent's resume control (/resume <id>); verified when the
agent's files name that thread. The thread's detached Session is reactivated
(or a new one bound) at the next binding generation. No Turn is created.`,
			`  clawconnect terminal threads terminal:v2:tmux:claude:work:0.0:4242
  clawconnect terminal resume-thread terminal:v2:tmux:claude:work:0.0:4242 6f1c…-…`,
			func(ctx context.Context, api *terminal.Service, args []string) (any, error) {
				return api.ResumeThread(ctx, args[0], args[1])
			}),
		threadCmd(env, "adopt-thread TERMINAL_ID", "Bind the thread a human switched the pane to",
			`When `+"`terminal list`"+` shows the pane as conflict (someone switched its native
thread by hand), bind the pane's current thread: the old Session is left
detached, the thread gets a Session at the next binding generation. The other
choice is `+"`terminal detach SESSION_ID`"+` (keep the old Session detached).`,
			`  clawconnect terminal adopt-thread terminal:v2:tmux:claude:work:0.0:4242`,
			func(ctx context.Context, api *terminal.Service, args []string) (any, error) {
				return api.AdoptThread(ctx, args[0])
			}),
		threadCmd(env, "transition TRANSITION_ID", "Show a native thread transition",
			`Show a transition: kind, status (prepared, dispatching, submitted, verified,
committed, uncertain, aborted), the binding it left and the one it made, and
the recovery actions of one that is not finished.`,
			`  clawconnect terminal transition transition-6f1c…`,
			func(ctx context.Context, api *terminal.Service, args []string) (any, error) {
				return api.Transition(ctx, args[0])
			}),
		threadsCmd(env), resolveTransitionCmd(env), detachCmd(env),
	}
}

// threadCmd builds a command over the Turn service that prints a TransitionView.
func threadCmd(env Env, use, short, long, example string, run func(ctx context.Context, api *terminal.Service, args []string) (any, error)) *cobra.Command {
	var asJSON bool
	nargs := len(strings.Fields(use)) - 1
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Example: example,
		Args: exactArgs(nargs, strings.Fields(use)[0]+": usage: clawconnect terminal "+use),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withTerminal(cmd, env, func(ctx context.Context, s *terminalStack) error {
				api := s.svc
				out, err := run(ctx, api, args)
				if v, ok := out.(termapi.TransitionView); ok && v.TransitionID != "" {
					if asJSON {
						_ = printJSON(env.Stdout, v)
					} else {
						printTransition(env.Stdout, v)
					}
					return err
				}
				if err != nil {
					return err
				}
				if asJSON {
					return printJSON(env.Stdout, out)
				}
				if v, ok := out.(terminal.SessionView); ok {
					fmt.Fprintf(env.Stdout, "session:  %s\nstatus:   %s\n", v.SessionID, v.Status)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printTransition(w io.Writer, v termapi.TransitionView) {
	fmt.Fprintf(w, "transition: %s\nkind:       %s\nstatus:     %s\nterminal:   %s\n", v.TransitionID, v.Kind, v.Status, v.TerminalID)
	if v.FromSessionID != "" {
		fmt.Fprintf(w, "from:       session %s (generation %d, thread %s)\n", v.FromSessionID, v.FromGeneration, orDash(v.FromThreadID))
	}
	fmt.Fprintf(w, "to:         session %s (generation %d, thread %s)\n", v.SessionID, v.Generation, orDash(v.ThreadID))
	if v.Reason != "" {
		fmt.Fprintf(w, "reason:     %s\n", v.Reason)
	}
	for _, a := range v.RecoveryActions {
		fmt.Fprintf(w, "recover:    %s\n", a)
	}
}

func threadsCmd(env Env) *cobra.Command {
	return threadCmdWith(env, "threads TERMINAL_ID", "List the native threads the pane's agent could resume",
		`List the native threads of the pane's workspace, newest first: the id (pass
it to resume-thread), the title or first prompt, times, whether it is the
pane's current thread, and its managed Session. Claude Code: the transcripts
of the workspace's project directory; Codex: the TUI rollouts whose
session_meta names the workspace. It changes nothing.`,
		`  clawconnect terminal threads terminal:v2:tmux:claude:work:0.0:4242 --json | jq -r '.threads[].native_thread_id'`,
		func(ctx context.Context, api *terminal.Service, args []string, w io.Writer, asJSON bool) error {
			res, err := api.Threads(ctx, args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(w, res)
			}
			if len(res.Threads) == 0 {
				fmt.Fprintf(w, "no resumable thread in %s\n", res.Workspace)
				return nil
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "THREAD\tUPDATED\tSESSION\tTITLE")
			for _, t := range res.Threads {
				id := t.ID
				if t.Current {
					id += " (current)"
				}
				sess := orDash(t.SessionID)
				if t.SessionStatus != "" {
					sess += " (" + t.SessionStatus + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", id, time.UnixMilli(t.UpdatedAt).UTC().Format(time.RFC3339), sess, t.Title)
			}
			return tw.Flush()
		})
}

func resolveTransitionCmd(env Env) *cobra.Command {
	var adopt, abort bool
	cmd := threadCmdWith(env, "resolve-transition TRANSITION_ID", "Settle a transition left uncertain (or whose process died)",
		`Settle a native thread transition that is uncertain, or whose process died
mid-way, so the terminal takes input again:

  --adopt  re-verify it from the agent's files now and commit it only if they
           prove it (the thread changed, or is the one asked to resume)
  --abort  end it without changing any Session; if the pane did switch, its
           row then shows a conflict (adopt-thread or detach)`,
		`  clawconnect terminal resolve-transition transition-6f1c… --adopt`,
		func(ctx context.Context, api *terminal.Service, args []string, w io.Writer, asJSON bool) error {
			if adopt == abort {
				return fmt.Errorf("resolve-transition: %w: pass exactly one of --adopt or --abort", termapi.ErrBadInput)
			}
			v, err := api.ResolveTransition(ctx, args[0], adopt)
			if v.TransitionID != "" {
				if asJSON {
					_ = printJSON(w, v)
				} else {
					printTransition(w, v)
				}
			}
			return err
		})
	cmd.Flags().BoolVar(&adopt, "adopt", false, "commit it if the agent's files prove it")
	cmd.Flags().BoolVar(&abort, "abort", false, "end it without changing any Session")
	return cmd
}

func detachCmd(env Env) *cobra.Command {
	var reason string
	cmd := threadCmdWith(env, "detach SESSION_ID", "Leave a Session detached (keep it out of its pane)",
		`Mark the Session detached: no session_exact send reaches it again and its pane
may be followed afresh. Its open Turn, if it ended with the agent, is closed;
a Turn still with the agent is refused (cancel it first). The pane is not
touched. This is the "keep the old Session" choice of a thread conflict.`,
		`  clawconnect terminal detach session-20260101120000-1a2b3c4d`,
		func(ctx context.Context, api *terminal.Service, args []string, w io.Writer, asJSON bool) error {
			v, err := api.Detach(ctx, args[0], reason)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(w, v)
			}
			fmt.Fprintf(w, "session:  %s\nstatus:   %s\n", v.SessionID, v.Status)
			return nil
		})
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded on a Turn it closes)")
	return cmd
}

// threadCmdWith builds a command over the Turn service whose run prints its own
// output.
func threadCmdWith(env Env, use, short, long, example string, run func(ctx context.Context, api *terminal.Service, args []string, w io.Writer, asJSON bool) error) *cobra.Command {
	var asJSON bool
	f := strings.Fields(use)
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Example: example,
		Args: exactArgs(len(f)-1, f[0]+": usage: clawconnect terminal "+use),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withTerminal(cmd, env, func(ctx context.Context, s *terminalStack) error {
				api := s.svc
				return run(ctx, api, args, env.Stdout, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
