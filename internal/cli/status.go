package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
	"github.com/spf13/cobra"
)

func newStatusCmd(env Env) *cobra.Command { return statusCmd(env, openReadBridge) }

func statusCmd(env Env, open opener) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status JOB",
		Short: "Show a task's status and result",
		Long: `Show one task's status, agent, session and result without waiting.

Exit codes: 0 shown (whatever the task's status), 1 failure, 2 bad arguments,
3 no or invalid agent configuration, 4 no such job.`,
		Example: `  clawconnect status 5f0c2a9e-5b7d-4f53-9a55-0d1f3b6c2e11
  clawconnect status 5f0c2a9e-5b7d-4f53-9a55-0d1f3b6c2e11 --json | jq .status`,
		Args: exactArgs(1, "status: pass one job id (from clawconnect run)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			b, err := open(ctx, env, newLogger(env))
			if err != nil {
				return err
			}
			defer b.close()
			d, err := b.tasks.GetTask(ctx, args[0], taskapi.DetailFull, 0)
			if err != nil {
				return notFound("job", args[0], err)
			}
			if asJSON {
				return printJSON(env.Stdout, d)
			}
			printDetail(env.Stdout, d)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the task as JSON")
	return cmd
}

func printDetail(w io.Writer, d taskapi.TaskDetail) {
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-10s %s\n", k, termSafe(v))
		}
	}
	row("job", d.JobID)
	row("agent", d.Agent)
	row("session", d.SessionKey)
	status := d.Status
	if d.TerminalReason != "" {
		status += " (" + d.TerminalReason + ")"
	}
	row("status", status)
	row("started", msTime(d.StartedAt))
	row("last event", msTime(d.LastEventAt))
	row("ended", msTime(d.EndedAt))
	row("error", firstNonEmpty(d.Error, diagnosticsError(d)))
	if d.Artifacts != nil {
		row("files", strings.Join(d.Artifacts.FilesChanged, ", "))
		row("pr", d.Artifacts.PRURL)
	}
	if d.Summary != "" {
		fmt.Fprintf(w, "\n%s\n", termSafe(d.Summary))
	}
}

func diagnosticsError(d taskapi.TaskDetail) string {
	if d.Diagnostics == nil {
		return ""
	}
	return d.Diagnostics.Error
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func msTime(ms int64) string {
	if ms <= 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

// exactArgs is cobra.ExactArgs with a usage exit code and a helpful message.
func exactArgs(n int, msg string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s", msg)}
		}
		return nil
	}
}
