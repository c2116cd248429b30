package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

func newLogsCmd(env Env) *cobra.Command { return logsCmd(env, openReadBridge) }

func logsCmd(env Env, open opener) *cobra.Command {
	var followFlag, asJSON bool
	cmd := &cobra.Command{
		Use:   "logs JOB",
		Short: "Print a task's log; --follow keeps printing until it ends",
		Long: `Print the log of a task: the agent's messages, tool calls and lifecycle
events, one per line. With --follow it keeps printing new entries as they
arrive and returns when the task ends. With --json each entry is one JSON
object per line: {"seq": n, "ts": unix ms, "type": "...", "text": "...",
"isError": true when it reports a failure}.

Exit codes: 0 printed, 1 failure, 2 bad arguments, 3 no or invalid agent
configuration, 4 no such job.`,
		Example: `  clawconnect logs 5f0c2a9e-5b7d-4f53-9a55-0d1f3b6c2e11
  clawconnect logs 5f0c2a9e-5b7d-4f53-9a55-0d1f3b6c2e11 --follow
  clawconnect logs 5f0c2a9e-5b7d-4f53-9a55-0d1f3b6c2e11 --json`,
		Args: exactArgs(1, "logs: pass one job id (from clawconnect run)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			b, err := open(ctx, env, newLogger(env))
			if err != nil {
				return err
			}
			defer b.close()
			emit := func(e taskapi.LogEntry) { printEntry(env.Stdout, e) }
			if asJSON {
				enc := json.NewEncoder(env.Stdout)
				emit = func(e taskapi.LogEntry) { _ = enc.Encode(e) }
			}
			return printLogs(ctx, emit, b.tasks, args[0], followFlag)
		},
	}
	cmd.Flags().BoolVarP(&followFlag, "follow", "f", false, "keep printing new entries until the task ends")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print each entry as one JSON object per line")
	return cmd
}

// printLogs pages the raw log of the job's session (when the job is the
// session's latest) and, with follow, waits for more in poll mode.
func printLogs(ctx context.Context, emit func(taskapi.LogEntry), tasks server.Tasks, jobID string, followFlag bool) error {
	d, err := tasks.GetTask(ctx, jobID, taskapi.DetailCore, 0)
	if err != nil {
		return notFound("job", jobID, err)
	}
	var printed int64
	page := func() (latest bool, err error) {
		for {
			r, err := tasks.GetSession(ctx, server.SessionRequest{SessionID: d.SessionKey, Agent: d.Agent, Mode: taskapi.ModeEvents, Limit: 200, After: int(printed)})
			if err != nil {
				return false, fmt.Errorf("logs: read session: %w", err)
			}
			if r.JobID != jobID {
				return false, nil
			}
			for _, e := range r.Events {
				emit(e)
			}
			printed += int64(len(r.Events))
			if len(r.Events) < 200 {
				return true, nil
			}
		}
	}
	// A failed task ends its log with the reason it failed, which the
	// gateway's own events may not carry (a refused connection has none).
	printFailure := func() {
		if f, err := tasks.GetTask(ctx, jobID, taskapi.DetailCore, 0); err == nil && f.Error != "" {
			emit(taskapi.LogEntry{TS: f.LastEventAt, Type: "error", Text: f.Error, IsError: true})
		}
	}
	latest, err := page()
	if err != nil {
		return err
	}
	if !latest {
		// A later task took over the session: the full preset's bounded
		// projection is the best view of this one.
		full, err := tasks.GetTask(ctx, jobID, taskapi.DetailFull, 0)
		if err != nil {
			return notFound("job", jobID, err)
		}
		for _, e := range full.Updates {
			emit(e)
		}
		printFailure()
		return nil
	}
	if !followFlag || d.IsTerminal {
		printFailure()
		return nil
	}
	var cursor int64
	for {
		snap, err := tasks.Check(ctx, server.CheckRequest{JobID: jobID, Agent: d.Agent, KnownLogCount: cursor, Mode: server.ModePoll, Wait: 30 * time.Second}, nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("logs: follow: %w", err)
		}
		cursor = max(cursor, snap.LogCursor)
		if _, err := page(); err != nil {
			return err
		}
		if snap.IsTerminal {
			printFailure()
			return nil
		}
	}
}

func printEntry(w io.Writer, e taskapi.LogEntry) {
	ts := ""
	if e.TS > 0 {
		ts = time.UnixMilli(e.TS).UTC().Format("15:04:05") + " "
	}
	mark := ""
	if e.IsError {
		mark = " (error)"
	}
	fmt.Fprintf(w, "%s%s%s: %s\n", ts, termSafe(e.Type), mark, termSafe(e.Text))
}
