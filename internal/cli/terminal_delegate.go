package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/termapi"
)

// delegateOutput is what `terminal delegate --json` prints: the pane it
// chose and the send's result, or the refusal with its candidates.
type delegateOutput struct {
	TerminalID string `json:"terminal_id,omitempty"`
	Agent      string `json:"agent,omitempty"`
	Cwd        string `json:"cwd,omitempty"`
	termapi.SendResult
	Error      string              `json:"error,omitempty"`
	Candidates []termapi.Candidate `json:"candidates,omitempty"`
}

func terminalDelegateCmd(env Env) *cobra.Command {
	var (
		agent string
		o     sendOpts
	)
	cmd := &cobra.Command{
		Use:   "delegate [--agent codex|claude] [--wait] TASK",
		Short: "Hand a task to the one idle agent pane, whichever it is",
		Long: `Send TASK as a new Turn to the one agent pane that can take work now (its
agent idle, nothing typed, no Turn running), as send --terminal would. With
--agent only panes of that agent count. When no pane or more than one can take
it, nothing is typed and the refusal lists the candidates (terminal id, agent,
working directory, and why a pane cannot take work): send to one of them by
its terminal id instead. Output as send's, with the chosen terminal_id.`,
		Example: `  clawconnect terminal delegate "Run the tests and summarise the failures"
  clawconnect terminal delegate --agent claude --wait "Explain main.go"`,
		Args: exactArgs(1, "delegate: pass the task as one argument (quote it)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkGatewayURLFlag("delegate", o.gatewayURL); err != nil {
				return err
			}
			req, err := o.request(termapi.SendRequest{Request: args[0]})
			if err != nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("delegate: %w", err)}
			}
			return withTerminal(cmd, env, func(ctx context.Context, s *terminalStack) error {
				res, row, err := terminal.Delegate(ctx, s.svc, agent, req)
				out := delegateOutput{TerminalID: row.ID, Agent: row.Agent, Cwd: row.Cwd, SendResult: res}
				if err != nil {
					var ref *termapi.DelegateRefusal
					if o.asJSON && (errors.As(err, &ref) || res.TurnID != "") {
						out.Error = err.Error()
						if ref != nil {
							out.Candidates = ref.Candidates
						}
						_ = printJSON(env.Stdout, out)
					}
					return err
				}
				if !o.wait {
					if !o.asJSON {
						fmt.Fprintf(env.Stdout, "terminal_id: %s (%s, %s)\n", row.ID, row.Agent, row.Cwd)
					}
					return printSent(env, s, res, o.asJSON, out)
				}
				return o.waitAndPrint(ctx, env, s, res.TurnID)
			})
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "only panes running this agent (codex or claude) count")
	o.flags(cmd)
	return cmd
}

// sendOpts are the flags send and delegate share.
type sendOpts struct {
	origin, gatewayURL string
	wait, asJSON       bool
	timeout            time.Duration
	// A send's own timeouts (0 = the service's defaults).
	inactivity, hard time.Duration
}

func (o *sendOpts) flags(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.wait, "wait", false, "wait until the Turn leaves the running statuses, then print it")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "with --wait, give up waiting after this long (exit 5); 0 waits until the Turn ends")
	cmd.Flags().DurationVar(&o.inactivity, "inactivity-timeout", 0, "stall the Turn after this long without activity in the agent's session file (default 60m)")
	cmd.Flags().DurationVar(&o.hard, "hard-timeout", 0, "stall the Turn this long after it started, active or not (default 12h)")
	cmd.Flags().BoolVar(&o.asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&o.origin, "origin-session", "", "OpenClaw session key that receives the Turn's callbacks (done, question, blocked, error)")
	cmd.Flags().StringVar(&o.gatewayURL, "gateway-url", "", "gateway serving --origin-session (default: the configured agent's gateway, or OPENCLAW_URL)")
}

// request completes r with the flags after checking the timeouts.
func (o sendOpts) request(r termapi.SendRequest) (termapi.SendRequest, error) {
	r.OriginSession, r.GatewayURL = o.origin, o.gatewayURL
	r.InactivityTimeout, r.HardTimeout = o.inactivity, o.hard
	return r, terminal.CheckTimeouts(r)
}

// waitAndPrint waits for the Turn a send started (see waitTurn), prints
// it, and exits as the Turn ended.
func (o sendOpts) waitAndPrint(ctx context.Context, env Env, s *terminalStack, turnID string) error {
	v, err := waitTurn(ctx, env, s, turnID, o.timeout)
	if err != nil {
		return err
	}
	if o.asJSON {
		if err := printJSON(env.Stdout, v); err != nil {
			return err
		}
	} else {
		printTurn(env.Stdout, v)
	}
	return turnExit(v)
}

// printSent prints what a send without --wait returns: js as JSON, or the
// Turn's ids; and says when no monitor host follows the Turn.
func printSent(env Env, s *terminalStack, res termapi.SendResult, asJSON bool, js any) error {
	if s.host != nil {
		unfollowedNote(env.Stderr, res.TurnID)
	}
	if asJSON {
		return printJSON(env.Stdout, js)
	}
	fmt.Fprintf(env.Stdout, "session_id: %s\nturn_id: %s\nsubmission_outcome: %s\n", res.SessionID, res.TurnID, res.SubmissionOutcome)
	return nil
}
