package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

func newRunCmd(env Env) *cobra.Command { return runCmd(env, openBridge) }

func runCmd(env Env, open opener) *cobra.Command {
	var (
		agent, session, taskContext string
		fromStdin, wait, asJSON     bool
		timeout                     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run TASK...",
		Short: "Hand a task to an agent and (with --wait) follow it to its result",
		Long: `Hand a task to an OpenClaw agent. Without --wait it prints the job id and
session key and returns at once; the task keeps running and "clawconnect
status JOB" or "clawconnect logs JOB --follow" follow it later. With --wait it
shows live progress on standard error (elapsed time and the last event) and
prints the result on standard output.

Context for the agent comes from --context, or from standard input with
--stdin. --session continues an earlier thread.

Exit codes: 0 submitted and accepted by the gateway (or, with --wait,
completed), 1 the gateway refused the task, or it failed or was cancelled,
2 bad arguments, 3 no or invalid agent configuration, 5 --timeout elapsed
while the task is still running (it keeps running), or without --wait the
gateway did not accept the task within 15s (it is stored, and a running
clawconnect mcp or serve, or the next one to start, sends it).`,
		Example: `  clawconnect run "summarise the open pull requests" --wait
  git diff | clawconnect run "review this diff" --stdin --wait --agent reviewer
  clawconnect run "now fix the first finding" --session agent:main:clawconnect:1a2b --wait
  clawconnect run "nightly report" --json`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			text := strings.TrimSpace(strings.Join(args, " "))
			if text == "" {
				return &ExitError{Code: ExitUsage, Err: errors.New("run: say what the agent should do, e.g. clawconnect run \"fix the failing test\"")}
			}
			if fromStdin && taskContext != "" {
				return &ExitError{Code: ExitUsage, Err: errors.New("run: --context and --stdin are exclusive")}
			}
			if fromStdin {
				if env.Stdin == nil {
					return &ExitError{Code: ExitUsage, Err: errors.New("run: --stdin given but there is no standard input")}
				}
				data, err := io.ReadAll(io.LimitReader(env.Stdin, server.MaxTextBytes+1))
				if err != nil {
					return fmt.Errorf("run: read stdin: %w", err)
				}
				if len(data) > server.MaxTextBytes {
					return &ExitError{Code: ExitUsage, Err: fmt.Errorf("run: standard input exceeds %d bytes", server.MaxTextBytes)}
				}
				taskContext = string(data)
			}
			ctx := cmd.Context()
			b, err := open(ctx, env, newLogger(env))
			if err != nil {
				return err
			}
			defer b.close()
			a, err := b.registry.Resolve(agent)
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: err}
			}
			res, err := b.tasks.Run(ctx, server.RunRequest{Agent: a.ID, Task: text, Context: taskContext, SessionKey: session, SenderName: "clawconnect run"})
			if err != nil {
				return fmt.Errorf("run: submit: %w", err)
			}
			if !wait {
				// The process is about to exit: make sure the gateway has the
				// run before the task manager stops following it.
				snap, acked := awaitDispatch(ctx, b.tasks, res, dispatchWait)
				if asJSON {
					if err := printJSON(env.Stdout, res); err != nil {
						return err
					}
				} else {
					fmt.Fprintf(env.Stdout, "job %s\nsession %s\n", res.JobID, res.SessionKey)
				}
				return submitted(env, res, snap, acked)
			}
			snap, err := follow(ctx, env, b.tasks, res, timeout)
			if err != nil {
				return err
			}
			return finishRun(env, snap, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "", "agent id (default: the configured default agent)")
	f.StringVar(&session, "session", "", "continue this session key instead of starting a new thread")
	f.StringVar(&taskContext, "context", "", "background for the agent")
	f.BoolVar(&fromStdin, "stdin", false, "read the context from standard input")
	f.BoolVar(&wait, "wait", false, "wait for the result, showing progress on standard error")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.DurationVar(&timeout, "timeout", 0, "with --wait, stop waiting after this long (exit 5; the task keeps running); 0 waits until it ends")
	return cmd
}

// finishRun prints a terminal (or still running) snapshot and picks the
// exit code.
func finishRun(env Env, snap taskapi.Snapshot, asJSON bool) error {
	if asJSON {
		if err := printJSON(env.Stdout, snap); err != nil {
			return err
		}
	} else if snap.IsTerminal {
		out := snap.Summary
		if snap.Status == "error" {
			out = "" // a failure is printed once, on stderr, as the returned error
		}
		if out != "" {
			fmt.Fprintln(env.Stdout, termSafe(out))
		}
	}
	switch {
	case !snap.IsTerminal:
		return &ExitError{Code: ExitPending, Err: fmt.Errorf("task %s is still running; follow it with: clawconnect logs %s --follow", snap.JobID, snap.JobID)}
	case snap.Status == "error":
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("task %s failed: %s", snap.JobID, strings.TrimSpace(snap.Error))}
	case snap.Status == "cancelled":
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("task %s was cancelled", snap.JobID)}
	}
	return nil
}

// dispatchWait bounds how long run without --wait waits for the gateway to
// accept the task.
const dispatchWait = 15 * time.Second

// submitted picks the outcome of run without --wait from the task after
// awaitDispatch: exit 0 only when the gateway accepted the task.
func submitted(env Env, res taskapi.RunResult, snap taskapi.Snapshot, acked bool) error {
	switch {
	case snap.IsTerminal && snap.Status == "error" && snap.ParentRunID == "":
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("the gateway did not accept task %s: %s", res.JobID, strings.TrimSpace(snap.Error))}
	case snap.IsTerminal && snap.Status == "error":
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("task %s failed: %s", res.JobID, strings.TrimSpace(snap.Error))}
	case !acked:
		return &ExitError{Code: ExitPending, Err: fmt.Errorf("the gateway has not accepted task %s within %s; it is stored, and a running clawconnect mcp or serve (or the next one to start) sends it: check the gateway with clawconnect doctor", res.JobID, dispatchWait)}
	}
	fmt.Fprintf(env.Stderr, "Submitted to %s. Follow it with: clawconnect logs %s --follow\n", res.Agent, res.JobID)
	return nil
}

// awaitDispatch waits until the gateway acknowledged the task's run (it has
// a run id) or the task ended, at most limit. It returns the last snapshot
// and whether either happened.
func awaitDispatch(ctx context.Context, tasks server.Tasks, res taskapi.RunResult, limit time.Duration) (taskapi.Snapshot, bool) {
	deadline := time.Now().Add(limit)
	var cursor int64
	var last taskapi.Snapshot
	for time.Now().Before(deadline) {
		snap, err := tasks.Check(ctx, server.CheckRequest{JobID: res.JobID, Agent: res.Agent, KnownLogCount: cursor,
			Mode: server.ModePoll, Wait: min(time.Until(deadline), 2*time.Second)}, nil)
		if err != nil {
			return last, false
		}
		last = snap
		if snap.ParentRunID != "" || snap.IsTerminal {
			return snap, true
		}
		cursor = max(cursor, snap.LogCursor)
	}
	return last, false
}

// follow waits for the task in poll mode, rendering each new log entry on
// stderr, until it ends, timeout elapses (0: never) or ctx ends.
func follow(ctx context.Context, env Env, tasks server.Tasks, res taskapi.RunResult, timeout time.Duration) (taskapi.Snapshot, error) {
	p := newProgress(env.Stderr, res.JobID)
	defer p.stop()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	var cursor int64
	for {
		wait := 30 * time.Second
		if !deadline.IsZero() {
			wait = min(wait, time.Until(deadline))
		}
		snap, err := tasks.Check(ctx, server.CheckRequest{JobID: res.JobID, SessionKey: res.SessionKey, Agent: res.Agent,
			KnownLogCount: cursor, Mode: server.ModePoll, Wait: max(wait, time.Millisecond)}, nil)
		if err != nil {
			if ctx.Err() != nil {
				return taskapi.Snapshot{}, fmt.Errorf("run: interrupted; task %s keeps running: %w", res.JobID, ctx.Err())
			}
			return taskapi.Snapshot{}, fmt.Errorf("run: check: %w", err)
		}
		for _, l := range snap.Logs {
			if l.Seq > cursor {
				p.event(l)
			}
		}
		cursor = max(cursor, snap.LogCursor)
		if snap.IsTerminal || (!deadline.IsZero() && !time.Now().Before(deadline)) {
			return snap, nil
		}
	}
}

// progress renders live progress on stderr: a spinner line with the elapsed
// time and the last event on a terminal, plain timestamped lines otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	start time.Time

	mu   sync.Mutex
	last string

	done chan struct{}
	wg   sync.WaitGroup
}

func newProgress(w io.Writer, jobID string) *progress {
	p := &progress{w: w, start: time.Now(), done: make(chan struct{}), last: "submitted " + jobID}
	if f, ok := w.(*os.File); ok && isatty.IsTerminal(f.Fd()) {
		p.tty = true
		p.wg.Add(1)
		go p.spin()
	} else {
		fmt.Fprintf(w, "[%5.1fs] submitted %s\n", 0.0, jobID)
	}
	return p
}

func (p *progress) spin() {
	defer p.wg.Done()
	frames := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-p.done:
			fmt.Fprint(p.w, "\r\033[K")
			return
		case <-t.C:
			p.mu.Lock()
			last := p.last
			p.mu.Unlock()
			fmt.Fprintf(p.w, "\r\033[K%c %4.0fs  %s", frames[i%len(frames)], time.Since(p.start).Seconds(), truncate(last, 70))
		}
	}
}

func (p *progress) event(l taskapi.LogEntry) {
	line := termSafe(firstLine(l.Text))
	if l.Type != "" {
		line = termSafe(l.Type) + ": " + line
	}
	if p.tty {
		p.mu.Lock()
		p.last = line
		p.mu.Unlock()
		return
	}
	fmt.Fprintf(p.w, "[%5.1fs] %s\n", time.Since(p.start).Seconds(), truncate(line, 200))
}

// stop ends the spinner; it is idempotent.
func (p *progress) stop() {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	p.wg.Wait()
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
