package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/clawconnect/clawconnect/taskapi"
	"github.com/spf13/cobra"
)

func newSessionsCmd(env Env) *cobra.Command { return sessionsCmd(env, openReadBridge) }

func sessionsCmd(env Env, open opener) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List known sessions (threads) and their last result",
		Long: `List the known sessions with their agent, last job and the start of the last
result. Pass a session key to "clawconnect run --session" to continue a thread.

Exit codes: 0 listed, 1 failure, 3 no or invalid agent configuration.`,
		Example: `  clawconnect sessions
  clawconnect sessions --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			b, err := open(ctx, env, newLogger(env))
			if err != nil {
				return err
			}
			defer b.close()
			list, err := b.tasks.ListSessions(ctx, nil)
			if err != nil {
				return fmt.Errorf("sessions: %w", err)
			}
			if asJSON {
				return printJSON(env.Stdout, taskapi.SessionList{Sessions: list, ConfiguredAgents: b.registry.IDs()})
			}
			if len(list) == 0 {
				fmt.Fprintln(env.Stderr, "No sessions yet. Start one with: clawconnect run \"...\"")
				return nil
			}
			tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "SESSION\tAGENT\tLAST JOB\tLAST RESULT")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", termSafe(s.SessionKey), s.Agent, s.LastJobID, termSafe(truncate(firstLine(s.LastSummary), 60)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the sessions as JSON")
	return cmd
}
