package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
	"github.com/clawconnect/clawconnect/termapi"
)

// terminalStack is an opened terminal service: the Service over the
// shared store and, when no long-lived monitor host is live, a Host the
// command runs while it follows its own Turn.
type terminalStack struct {
	svc   *terminal.Service
	host  *hostpkg.Host // nil when a live host follows the work
	close func()
}

// openTerminalStore opens the shared store: PostgreSQL at
// CLAWCONNECT_DATABASE_URL, else the SQLite file under CLAWCONNECT_HOME.
func openTerminalStore(ctx context.Context, env Env) (store.Store, func() error, error) {
	sv := settingsOf(env)
	if u := sv.DatabaseURL; u != "" {
		db, err := postgres.Open(ctx, postgres.Options{URL: u})
		if err != nil {
			return nil, nil, err
		}
		return db, db.Close, nil
	}
	db, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(sv.Home, sqlite.FileName)})
	if err != nil {
		return nil, nil, err
	}
	return db, db.Close, nil
}

// newTerminalService builds the Service over st with the real panes and
// agent readers.
func newTerminalService(env Env, st store.Store, logger *slog.Logger) (*terminal.Service, config.Terminal, error) {
	c := config.TerminalFrom(settingsOf(env))
	terms, err := terminal.NewTmuxTerminals(tmux.Options{TMUX: c.TMUX, Sockets: c.Sockets, NoDefaultServer: c.NoDefaultServer, Logger: logger})
	if err != nil {
		return nil, c, err
	}
	rules, err := terminal.LoadAutoApprove(c.AutoApproveFile)
	if err != nil {
		return nil, c, fmt.Errorf("CLAWCONNECT_TERMINAL_AUTO_APPROVE_FILE: %w", err)
	}
	gw, _ := callbackGateway(env)
	host, key, err := terminalHost(env)
	if err != nil {
		return nil, c, err
	}
	terms.Host = host
	svc := terminal.NewService(terminal.Options{Store: st, Terminals: terms, Agents: terminal.DefaultAgents(), Logger: logger,
		InactivityTimeout: c.InactivityTimeout, HardTimeout: c.HardTimeout, CallbackGateway: gw.URL,
		AllowUnproven: c.AllowUnproven, AutoApprove: rules, Host: host, HostKey: key})
	return svc, c, nil
}

// openTerminal opens the Service over the shared store. Every command
// works on the store itself; a long-lived host (serve, mcp, terminal
// daemon) follows the Turns it sends, told through the store's feed. When
// none is live, the stack carries a Host the command runs while it
// follows its own Turn.
func openTerminal(ctx context.Context, env Env, logger *slog.Logger) (*terminalStack, error) {
	st, closeStore, err := openTerminalStore(ctx, env)
	if err != nil {
		return nil, err
	}
	svc, c, err := newTerminalService(env, st, logger)
	if err != nil {
		_ = closeStore()
		return nil, err
	}
	s := &terminalStack{svc: svc, close: func() { _ = closeStore() }}
	if !hostLiveHere(ctx, st, svc) {
		s.host = hostpkg.New(svc, hostpkg.Options{Store: st, Logger: logger, Recheck: c.Recheck, LeaseTTL: c.HostLease, Role: "terminal command"})
	}
	return s, nil
}

// hostLive reports whether a long-lived monitor host is live on st; a
// store without a process registry, or one that cannot be read, has none
// as far as a command can tell, so the command follows its Turn itself.
func hostLive(ctx context.Context, st any) bool {
	reg, ok := st.(hostpkg.Registered)
	if !ok {
		return false
	}
	_, live, err := hostpkg.Live(ctx, reg)
	return err == nil && live
}

// terminalExit maps the service's errors to exit codes.
func terminalExit(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, termapi.ErrBadInput):
		return &ExitError{Code: ExitUsage, Err: err}
	case errors.Is(err, termapi.ErrNotFound):
		return &ExitError{Code: ExitNotFound, Err: err}
	}
	return &ExitError{Code: ExitFailure, Err: err}
}

func newTerminalCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "terminal",
		Short: "Drive Codex and Claude Code running in tmux panes, one Turn at a time",
		Long: `Send a request to a Codex or Claude Code TUI running in a tmux pane as a new
Turn, and follow it from the agent's own session files until it is done (with
the reply), waits for approval, stalls or fails.

Panes are found on tmux's default server, the server of $TMUX and the sockets
in CLAWCONNECT_TMUX_SOCKETS (comma-separated). Every command works on the
shared store; Turns are followed by any monitor host on it: ` + "`clawconnect serve`" + `,
` + "`clawconnect terminal daemon`" + ` or an mcp with the terminal tools. Without one,
send --wait, approve, respond and status --wait follow the Turn in their own
process until it ends, and a command that leaves a running Turn says so.

` + terminalExitCodes + `

Try it locally, with Codex and Claude Code on the project's fake model: see
"Trying terminal Turns" in the README.`,
		Example: `  clawconnect terminal list
  clawconnect terminal send --terminal terminal:v2:tmux:codex:work:0.0:4242 --wait "Summarise README.md"
  clawconnect terminal status turn-20260101T120000-1a2b3c4d --json`,
	}
	groupCmd(cmd)
	cmd.AddCommand(terminalListCmd(env), terminalSendCmd(env), terminalStatusCmd(env), terminalRespondCmd(env),
		terminalApproveCmd(env), terminalCancelCmd(env), terminalRenewCmd(env), terminalCloseCmd(env), terminalRetryCallbackCmd(env),
		terminalDaemonCmd(env), terminalModuleCmd(env))
	cmd.AddCommand(terminalDelegateCmd(env))
	cmd.AddCommand(terminalWatchCmds(env)...)
	cmd.AddCommand(terminalThreadCmds(env)...)
	// Every subcommand's help ends with the exit codes, as the top-level
	// commands' do; the two long-running ones have their own.
	for _, sub := range cmd.Commands() {
		switch sub.Name() {
		case "daemon", "module":
			sub.Long += "\n\nExit codes: 0 stopped by a signal (or, for module, standard input closed), 1 failure,\n2 bad flags, 3 invalid settings."
		default:
			sub.Long += "\n\n" + terminalExitCodes
		}
	}
	return cmd
}

// terminalExitCodes are the exit codes of the terminal commands (see
// terminalExit).
const terminalExitCodes = `Exit codes: 0 success, 1 the operation failed or was refused (pane busy,
dialog open, process changed, Turn failed), 2 bad arguments or a malformed id,
3 an unusable setting (clawconnect doctor names it), 4 no such Session, Turn or
terminal, 5 --timeout elapsed while the Turn runs.`

// withTerminal opens the service for one command.
func withTerminal(cmd *cobra.Command, env Env, f func(ctx context.Context, s *terminalStack) error) error {
	ctx := cmd.Context()
	s, err := openTerminal(ctx, env, newLogger(env))
	if err != nil {
		return err
	}
	defer s.close()
	return terminalExit(f(ctx, s))
}

func terminalListCmd(env Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the live Codex and Claude Code panes and what may be sent to each",
		Long: `List one row per live agent pane: its terminal id, agent, pid, working
directory, activity (idle, working, awaiting_approval, awaiting_answer, unknown), whether a
Session manages it (managed, unmanaged, conflict), the Session and its current
Turn, and the send actions allowed now with their arguments prefilled. It
changes nothing.`,
		Example: `  clawconnect terminal list
  clawconnect terminal list --json | jq '.terminals[].available_actions'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withTerminal(cmd, env, func(ctx context.Context, s *terminalStack) error {
				res, err := s.svc.List(ctx)
				if err != nil {
					return err
				}
				if s.svc.HostName() != "" {
					return printHostList(ctx, env, s.svc, res, asJSON)
				}
				if asJSON {
					return printJSON(env.Stdout, res)
				}
				printTerminalRows(env.Stdout, res.Terminals)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the rows as JSON")
	return cmd
}

func printTerminalRows(w io.Writer, rows []termapi.TerminalRow) {
	if len(rows) == 0 {
		fmt.Fprintln(w, "no Codex or Claude Code pane found. Start codex or claude inside tmux; for a tmux server on a socket\n"+
			"of its own, put the socket's path in CLAWCONNECT_TMUX_SOCKETS (tmux -L NAME uses /tmp/tmux-UID/NAME;\n"+
			"clawconnect doctor shows the settings in effect). To try it locally: README, \"Trying terminal Turns\".")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAGENT\tPID\tACTIVITY\tMANAGED\tSESSION\tTURN\tSEND")
	for _, r := range rows {
		turn := "-"
		if r.CurrentTurn != nil {
			turn = r.CurrentTurn.TurnID + " (" + cmp.Or(r.CurrentTurn.Shown, string(r.CurrentTurn.Status)) + ")"
		}
		var scopes []string
		for _, a := range r.AvailableActions {
			scopes = append(scopes, a.Scope)
		}
		send := strings.Join(scopes, ",")
		if send == "" {
			send = "none: " + r.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Agent, r.PID, r.ActivityState, r.ManagementState,
			orDash(r.SessionID), turn, send)
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printTurn(w io.Writer, v termapi.TurnView) {
	fmt.Fprintf(w, "turn:     %s\nsession:  %s\nstatus:   %s\n", v.TurnID, v.SessionID, terminal.ShownStatus(v))
	if v.Approval != nil {
		fmt.Fprintf(w, "approval: %s (fingerprint %s)", v.Approval.Kind, v.Approval.Fingerprint)
		if v.Approval.Command != "" {
			fmt.Fprintf(w, ": %s", v.Approval.Command)
		}
		fmt.Fprintf(w, "\n          approve with: clawconnect terminal approve %s --fingerprint %s\n", v.TurnID, v.Approval.Fingerprint)
	}
	if v.StalledReason != "" {
		fmt.Fprintf(w, "stalled:  %s", v.StalledReason)
		if slices.Contains(v.NextSteps, "renew") {
			fmt.Fprintf(w, " (renew with: clawconnect terminal renew %s)", v.TurnID)
		}
		fmt.Fprintln(w)
	}
	if len(v.NextSteps) > 0 {
		// What the Turn accepts now (a stall past its hard deadline takes
		// no renew).
		fmt.Fprintf(w, "next:     %s\n", strings.Join(v.NextSteps, ", "))
	}
	if cb := v.CallbackDelivery; cb != nil {
		fmt.Fprintf(w, "callback: %s %s to %s (attempts %d)", cb.Type, cb.Status, cb.SessionKey, cb.Attempts)
		if cb.NextAttemptAt != "" {
			fmt.Fprintf(w, ", next attempt %s", cb.NextAttemptAt)
		}
		if cb.LastError != "" {
			fmt.Fprintf(w, "\n          last error: %s", cb.LastError)
		}
		fmt.Fprintln(w)
	}
	if v.Result != nil {
		fmt.Fprintf(w, "outcome:  %s\n\n%s\n", v.Result.Outcome, v.Result.Text)
	}
}

// turnExit is the exit status of a Turn that left the running statuses.
func turnExit(v termapi.TurnView) error {
	switch v.Status {
	case termapi.TurnFailed, termapi.TurnCancelled, termapi.TurnStalled:
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("turn %s is %s", v.TurnID, v.Status)}
	}
	return nil
}

// startHostHint names the commands that start a monitor host.
const startHostHint = "`clawconnect terminal daemon` or `clawconnect serve`"

// unfollowedNote is the one line a command prints when it returns while
// its Turn still needs following and no monitor host runs.
func unfollowedNote(w io.Writer, turnID string) {
	fmt.Fprintf(w, "clawconnect: no monitor host runs; turn %s is followed once %s starts\n", turnID, startHostHint)
}

// followHere follows a Turn that still runs in this process when no
// monitor host runs, so that no command leaves its work unfollowed; with a
// host it returns v as it is.
func followHere(ctx context.Context, env Env, s *terminalStack, v termapi.TurnView) (termapi.TurnView, error) {
	if s.host == nil || !terminal.Running(v.Status) {
		return v, nil
	}
	return waitTurn(ctx, env, s, v.TurnID, 0)
}

// waitTurn waits for the Turn (hosting its monitor when no host runs) up to
// timeout (0 = no limit).
func waitTurn(ctx context.Context, env Env, s *terminalStack, turnID string, timeout time.Duration) (termapi.TurnView, error) {
	if s.host != nil {
		fmt.Fprintf(env.Stderr, "clawconnect: no monitor host runs; following turn %s here until it ends (interrupted, it waits for %s)\n", turnID, startHostHint)
		hctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = s.host.Run(hctx) }()
		defer func() { cancel(); <-done }()
		s.host.Watch(turnID)
	}
	wctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	v, err := s.svc.Wait(wctx, turnID)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return v, &ExitError{Code: ExitPending, Err: fmt.Errorf("turn %s is still %s after %s; follow it with `clawconnect terminal status %s`", turnID, v.Status, timeout, turnID)}
	}
	return v, err
}

func terminalSendCmd(env Env) *cobra.Command {
	var (
		sessionID, terminalID string
		o                     sendOpts
	)
	cmd := &cobra.Command{
		Use:   "send (--session ID | --terminal TERMINAL_ID) [--wait] REQUEST",
		Short: "Send a request to an agent pane as a new Turn",
		Long: `Send REQUEST to a coding agent as a new Turn, in one of two scopes:

  --session ID           session_exact: that Session's exact native context; refused
                         (before any text is typed) if the pane's foreground thread
                         changed or someone typed in the pane since its last Turn.
  --terminal TERMINAL_ID terminal_follow_current: whatever context the pane shows now;
                         the Session is created or adopted as needed.

The request is typed into the pane, Enter is pressed once the composer shows
exactly that draft, and the agent's session file must show it took the request
within 5 s. A request whose first line is a slash command, that starts with '!',
or that holds a control character other than line feed and tab (a terminal would
take it as a key press) is refused before anything is typed. Input whose outcome
is uncertain is never sent again. Prints session_id, turn_id and
submission_outcome; with --wait it returns when the Turn leaves the running
statuses and prints the Turn.`,
		Example: `  clawconnect terminal send --terminal terminal:v2:tmux:codex:work:0.0:4242 "Add a test for parse()"
  clawconnect terminal send --session session-20260101120000-1a2b3c4d --wait "Now run it"
  clawconnect terminal send --terminal terminal:v2:tmux:claude:dev:1.0:777 --wait --json "Explain main.go" | jq -r .result.text`,
		Args: exactArgs(1, "send: pass the request as one argument (quote it)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkGatewayURLFlag("send", o.gatewayURL); err != nil {
				return err
			}
			return withTerminal(cmd, env, func(ctx context.Context, s *terminalStack) error {
				req, err := o.request(termapi.SendRequest{SessionID: sessionID, TerminalID: terminalID, Request: args[0]})
				if err != nil {
					return fmt.Errorf("send: %w", err)
				}
				res, err := s.svc.Send(ctx, req)
				if err != nil {
					if o.asJSON && res.TurnID != "" {
						_ = printJSON(env.Stdout, res)
					}
					return err
				}
				if !o.wait {
					return printSent(env, s, res, o.asJSON, res)
				}
				return o.waitAndPrint(ctx, env, s, res.TurnID)
			})
		},
	}
	cmd.Flags().StringVar(&sessionID, "session", "", "send in this Session's exact context (session_exact)")
	cmd.Flags().StringVar(&terminalID, "terminal", "", "send to whatever context this pane shows (terminal_follow_current)")
	o.flags(cmd)
	return cmd
}

// turnCmd builds a command that takes one TURN_ID.
func turnCmd(env Env, use, short, long, example string, flags func(cmd *cobra.Command),
	run func(ctx context.Context, s *terminalStack, id string, rest []string) (any, error)) *cobra.Command {
	var (
		asJSON     bool
		forSession string
	)
	nargs := strings.Count(use, " ")
	cmd := &cobra.Command{
		Use: use, Short: short, Long: long, Example: example,
		Args: exactArgs(nargs, strings.Fields(use)[0]+": usage: clawconnect terminal "+use),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withTerminal(cmd, env, func(ctx context.Context, s *terminalStack) error {
				if forSession != "" {
					v, err := s.svc.Status(ctx, args[0])
					if err != nil {
						return err
					}
					if err := sentBy(args[0], v.OriginSession, forSession); err != nil {
						return err
					}
				}
				out, err := run(ctx, s, args[0], args[1:])
				if err != nil {
					return err
				}
				if v, ok := out.(termapi.TurnView); ok && s.host != nil && terminal.Running(v.Status) {
					unfollowedNote(env.Stderr, v.TurnID)
				}
				if asJSON {
					return printJSON(env.Stdout, out)
				}
				switch v := out.(type) {
				case termapi.TurnView:
					printTurn(env.Stdout, v)
				case termapi.SendResult:
					fmt.Fprintf(env.Stdout, "session_id: %s\nturn_id: %s\nsubmission_outcome: %s\n", v.SessionID, v.TurnID, v.SubmissionOutcome)
				}
				return nil
			})
		},
	}
	if flags != nil {
		flags(cmd)
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&forSession, "for-session", "", forSessionUsage)
	return cmd
}

const forSessionUsage = "act for this OpenClaw session key: refuse what it did not start (the OpenClaw plugin passes the calling session)"

// sentBy refuses, to a caller acting for the OpenClaw session key, a Turn
// or watch that another session (or an operator, without one) started:
// one conversation must not read, answer or stop another's work. The
// origin is fixed when the record is created, so checking before acting
// is not a race.
func sentBy(id, origin, key string) error {
	if origin != key {
		return fmt.Errorf("%s: %w: it was not started from this OpenClaw session; only the session that started it, or an operator at the command line, can use it",
			id, termapi.ErrRefused)
	}
	return nil
}

func terminalStatusCmd(env Env) *cobra.Command {
	var (
		wait    bool
		timeout time.Duration
	)
	return turnCmd(env, "status TURN_ID", "Show a Turn: status, result, approval, timestamps",
		`Show a Turn: turn_id, session_id, status (created, running,
waiting_for_agent, waiting_for_openclaw, idle, stalled, failed, closed,
cancelled, cancelling), result (outcome completed|failed, text), the approval
prompt when one waits, and timestamps. With --wait it first waits until the
Turn leaves the running statuses, following it here when no monitor host runs.`,
		`  clawconnect terminal status turn-20260101T120000-1a2b3c4d
  clawconnect terminal status turn-20260101T120000-1a2b3c4d --wait --timeout 10m
  clawconnect terminal status turn-20260101T120000-1a2b3c4d --json | jq .result.text`,
		func(cmd *cobra.Command) {
			cmd.Flags().BoolVar(&wait, "wait", false, "wait until the Turn leaves the running statuses, then print it")
			cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --wait, give up waiting after this long (exit 5); 0 waits until the Turn ends")
		},
		func(ctx context.Context, s *terminalStack, id string, _ []string) (any, error) {
			if wait {
				return waitTurn(ctx, env, s, id, timeout)
			}
			return s.svc.Status(ctx, id)
		})
}

func terminalRespondCmd(env Env) *cobra.Command {
	return turnCmd(env, "respond TURN_ID ANSWER", "Answer a Turn that waits for OpenClaw, in the same Turn",
		`Type ANSWER into the pane as the next message of a Turn in status
waiting_for_openclaw. When the agent asks in its own question dialog (status
shows the question and its options), ANSWER picks an option by its number or
label, or is typed into the dialog's free-text row when it has one (Claude
Code). Refused while an approval prompt is open (use approve or cancel) and
for a Turn in any other status. When no monitor host runs, it follows the
Turn here until it ends and prints it.`,
		`  clawconnect terminal respond turn-20260101T120000-1a2b3c4d "Use the staging database"
  clawconnect terminal respond turn-20260101T120000-1a2b3c4d 2`, nil,
		func(ctx context.Context, s *terminalStack, id string, rest []string) (any, error) {
			res, err := s.svc.Respond(ctx, id, rest[0])
			if err != nil || s.host == nil {
				return res, err
			}
			return followHere(ctx, env, s, termapi.TurnView{TurnID: id, Status: termapi.TurnRunning})
		})
}

func terminalApproveCmd(env Env) *cobra.Command {
	var fingerprint string
	return turnCmd(env, "approve TURN_ID", "Approve the exact approval prompt a Turn reported",
		`Answer "yes, once" to the approval prompt of a Turn in status
waiting_for_openclaw, only if the pane still shows exactly the prompt that
status reported (its fingerprint; pass --fingerprint to pin the one you saw).
A prompt that changed, closed or does not have the known safe shape is refused.
When no monitor host runs, it follows the Turn here until it ends.`,
		`  clawconnect terminal status turn-20260101T120000-1a2b3c4d
  clawconnect terminal approve turn-20260101T120000-1a2b3c4d --fingerprint 3f2a…`,
		func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&fingerprint, "fingerprint", "", "the approval fingerprint status showed")
		},
		func(ctx context.Context, s *terminalStack, id string, _ []string) (any, error) {
			v, err := s.svc.Approve(ctx, id, fingerprint)
			if err != nil {
				return v, err
			}
			return followHere(ctx, env, s, v)
		})
}

func terminalCancelCmd(env Env) *cobra.Command {
	return turnCmd(env, "cancel TURN_ID", "Interrupt the agent and cancel the Turn",
		`Send the agent its interrupt key (Codex Ctrl-C, Claude Code Escape) and mark the
Turn cancelled at once. Refused while a dialog that cannot be dismissed safely
covers the pane.`,
		`  clawconnect terminal cancel turn-20260101T120000-1a2b3c4d`, nil,
		func(ctx context.Context, s *terminalStack, id string, _ []string) (any, error) {
			return s.svc.Cancel(ctx, id)
		})
}

func terminalRenewCmd(env Env) *cobra.Command {
	var (
		inactivity time.Duration
		minutes    float64
	)
	return turnCmd(env, "renew TURN_ID", "Resume following a stalled Turn",
		`Give a stalled Turn a new inactivity deadline (before its hard deadline) and
follow it again.`,
		`  clawconnect terminal renew turn-20260101T120000-1a2b3c4d --inactivity-timeout 30m`,
		func(cmd *cobra.Command) {
			cmd.Flags().DurationVar(&inactivity, "inactivity-timeout", 0, "new inactivity timeout, as send's (default: the Turn's own)")
			// --minutes was renew's own unit until send's duration became
			// the one spelling; kept, hidden, for one release.
			cmd.Flags().Float64Var(&minutes, "minutes", 0, "new inactivity timeout in minutes")
			_ = cmd.Flags().MarkHidden("minutes")
		},
		func(ctx context.Context, s *terminalStack, id string, _ []string) (any, error) {
			m, err := renewMinutes(inactivity, minutes)
			if err != nil {
				return nil, err
			}
			return s.svc.Renew(ctx, id, m)
		})
}

func terminalCloseCmd(env Env) *cobra.Command {
	var reason string
	return turnCmd(env, "close TURN_ID", "Close a Turn that is no longer with the agent",
		`Close an idle, failed, stalled or waiting Turn. Closing the Turn whose input
was not accepted or whose outcome is uncertain releases the pane for new sends
(look at the pane first).`,
		`  clawconnect terminal close turn-20260101T120000-1a2b3c4d --reason "checked the pane"`,
		func(cmd *cobra.Command) {
			cmd.Flags().StringVar(&reason, "reason", "", "why (recorded on the Turn)")
		},
		func(ctx context.Context, s *terminalStack, id string, _ []string) (any, error) {
			return s.svc.Close(ctx, id, reason)
		})
}

// runTerminalHost runs a long-lived monitor host over svc, with the
// callback outbox, until ctx ends. Every long-lived process runs one on
// the shared store; the leases decide which follows each Turn.
func runTerminalHost(ctx context.Context, env Env, st store.Store, svc *terminal.Service, c config.Terminal, role string) error {
	ho := hostpkg.Options{Store: st, Logger: newLogger(env), Recheck: c.Recheck, LeaseTTL: c.HostLease, Role: hostpkg.Role + " (" + role + ")"}
	warm := configuredCallbackGateway(env)
	if role == "mcp" {
		// An mcp (one per MCP client) dials the gateway at its first
		// callback instead: an idle one keeps no connection, and serve or
		// the daemon usually delivers first anyway.
		warm = ""
	}
	x := outbox.New(outbox.Options{Store: st, Dial: callbackDialer(env), Logger: ho.Logger,
		WarmURL: warm, Delivers: callbackRoute(env, svc.HostName() != "")})
	defer func() { _ = x.Close() }()
	ho.Outbox = x
	return hostpkg.New(svc, ho).Run(ctx)
}

// startTerminalHost runs a terminal monitor host on shared (the store the
// process opened) in the background and returns its Service (nil when
// none runs); the returned func stops it. Terminal turns are optional for
// serve: a failure is logged, never fatal.
func startTerminalHost(ctx context.Context, env Env, st store.Store, logger *slog.Logger, role string) (*terminal.Service, func()) {
	if st == nil {
		return nil, func() {}
	}
	svc, c, err := newTerminalService(env, st, logger)
	if err != nil {
		logger.Warn("terminal turns disabled", "err", err)
		return nil, func() {}
	}
	return svc, goTerminalHost(ctx, env, st, svc, c, role, logger)
}

// goTerminalHost runs runTerminalHost in the background until the
// returned func, which waits for it, is called.
func goTerminalHost(ctx context.Context, env Env, st store.Store, svc *terminal.Service, c config.Terminal, role string, logger *slog.Logger) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := runTerminalHost(ctx, env, st, svc, c, role); err != nil && ctx.Err() == nil {
			logger.Warn("terminal monitor host stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

func terminalDaemonCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "daemon",
		Short: "Run only the terminal monitor host",
		Long: `Run a monitor host of terminal turns until interrupted: it resumes every open
Turn and watch in the store that no live host follows (after a restart or
kill -9 too), follows new ones as commands announce them, and delivers their
callbacks. ` + "`clawconnect serve`" + ` and ` + "`clawconnect mcp`" + ` (with the terminal tools) host the
same work; any number of hosts share one store, each Turn followed by one of
them under a lease.`,
		Example: `  clawconnect terminal daemon &
  clawconnect terminal send --terminal terminal:v2:tmux:codex:work:0.0:4242 "Fix the failing test"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			logger := newLogger(env)
			st, closeStore, err := openTerminalStore(ctx, env)
			if err != nil {
				return err
			}
			defer func() { _ = closeStore() }()
			svc, c, err := newTerminalService(env, st, logger)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stderr, "clawconnect terminal daemon: following terminal turns of %s\n", storeName(env))
			return runTerminalHost(ctx, env, st, svc, c, "terminal daemon")
		},
	}
}

// storeName names the shared store for a reader: the PostgreSQL store, or
// the SQLite file's path.
func storeName(env Env) string {
	sv := settingsOf(env)
	if sv.DatabaseURL != "" {
		return "the PostgreSQL store"
	}
	return filepath.Join(sv.Home, sqlite.FileName)
}

func terminalRetryCallbackCmd(env Env) *cobra.Command {
	return turnCmd(env, "retry-callback TURN_ID", "Deliver a Turn's failed callback again",
		`Make the Turn's latest callback due again with a fresh retry budget. The same
message and ids are reused, so OpenClaw never receives it twice (the gateway
dedups the injection and the wake by their idempotency keys). A delivered
callback is left as it is. The monitor host delivers it.`,
		`  clawconnect terminal retry-callback turn-20260101T120000-1a2b3c4d`, nil,
		func(ctx context.Context, s *terminalStack, id string, _ []string) (any, error) {
			return s.svc.RetryCallback(ctx, id)
		})
}

// callbackGateway is the gateway callbacks go to: the default agent of
// agents.json, else OPENCLAW_URL (+ OPENCLAW_PASSWORD / token), else the
// local default.
func callbackGateway(env Env) (gateway.Options, error) {
	o := (&gatewayFlags{}).options(env)
	if r, err := config.LoadRegistry(settingsOf(env)); err == nil {
		if a, err := r.Resolve(""); err == nil && a.URL != "" {
			o.URL, o.Password = a.URL, a.Password
		}
	}
	return o, nil
}

// configuredCallbackGateway returns the URL Turns record for callbacks
// when a gateway is configured (a URL other than the default, or
// credentials: the plugin's service sets both), else "": the host connects
// to it before the first callback.
func configuredCallbackGateway(env Env) string {
	o, err := callbackGateway(env)
	if err != nil || (o.URL == DefaultGatewayURL && o.Token == "" && o.Password == "") {
		return ""
	}
	return o.URL
}

// checkGatewayURLFlag refuses a --gateway-url no gateway can have, before
// a Turn or watch records it for its callbacks.
func checkGatewayURLFlag(op, u string) error {
	if u == "" {
		return nil
	}
	if _, err := gateway.NormalizeURL(u); err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s: --gateway-url %q is not a gateway URL (%w); give its ws:// or wss:// URL, or leave it out for the configured gateway", op, u, err)}
	}
	return nil
}

// callbackGatewayFor returns the options a callback recorded for gateway
// url is dialled with. A Turn or watch records whatever --gateway-url its
// caller gave, and any process that can run clawconnect (a coding agent in
// a pane included) may be that caller, while the host delivering the
// callback holds the operator's credentials: the environment's token,
// password and headers go only to the environment's or the default
// agent's gateway, an agents.json agent's password only to its URL, and
// any other URL is dialled with none.
func callbackGatewayFor(env Env, url string) gateway.Options {
	o, _ := callbackGateway(env)
	if url == "" || sameGatewayURL(url, o.URL) {
		return o
	}
	fromEnv := (&gatewayFlags{}).options(env)
	if sameGatewayURL(url, fromEnv.URL) {
		fromEnv.URL = url
		return fromEnv
	}
	out := gateway.Options{URL: url, CallTimeout: o.CallTimeout}
	if r, err := config.LoadRegistry(settingsOf(env)); err == nil {
		for _, a := range r.Agents {
			if sameGatewayURL(url, a.URL) {
				out.Password = a.Password
				break
			}
		}
	}
	return out
}

// sameGatewayURL reports whether a and b name one gateway (after
// NormalizeURL, ignoring a trailing slash).
func sameGatewayURL(a, b string) bool {
	na, errA := gateway.NormalizeURL(a)
	nb, errB := gateway.NormalizeURL(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return strings.TrimSuffix(na, "/") == strings.TrimSuffix(nb, "/")
}

// callbackDialer dials the gateway of a callback: the recorded URL with
// the credentials configured for that gateway (callbackGatewayFor).
func callbackDialer(env Env) func(ctx context.Context, url string) (outbox.Caller, error) {
	return func(ctx context.Context, url string) (outbox.Caller, error) {
		o := callbackGatewayFor(env, url)
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		c, err := gateway.Dial(dctx, o)
		if err != nil {
			return nil, fmt.Errorf("dial gateway %s: %w", o.URL, err)
		}
		return c, nil
	}
}

// renewMinutes is renew's new inactivity timeout in minutes (0: the
// Turn's own), from --inactivity-timeout or the older --minutes.
func renewMinutes(inactivity time.Duration, minutes float64) (float64, error) {
	switch {
	case inactivity != 0 && minutes != 0:
		return 0, fmt.Errorf("renew: %w: give --inactivity-timeout only (--minutes is its older spelling)", termapi.ErrBadInput)
	case inactivity != 0:
		return inactivity.Minutes(), nil
	}
	return minutes, nil
}
