package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/internal/config"
)

func newAgentsCmd(env Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List the configured agents",
		Long: `List the agents of CLAWCONNECT_HOME/agents.json (or the single agent of
OPENCLAW_URL + OPENCLAW_PASSWORD), marking the default. Passwords and tokens
are never printed.

Exit codes: 0 listed, 3 no or invalid agent configuration.`,
		Example: `  clawconnect agents
  clawconnect agents --json`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			r, err := loadRegistry(env)
			if err != nil {
				return err
			}
			if asJSON {
				type row struct {
					ID              string   `json:"id"`
					Default         bool     `json:"default"`
					URL             string   `json:"url"`
					OpenClawAgentID string   `json:"openclawAgentId"`
					Emoji           string   `json:"emoji,omitempty"`
					Role            string   `json:"role,omitempty"`
					Description     string   `json:"description,omitempty"`
					WhenToUse       string   `json:"whenToUse,omitempty"`
					Collections     []string `json:"collections,omitempty"`
				}
				rows := make([]row, 0, len(r.Agents))
				for _, a := range r.Agents {
					rows = append(rows, row{a.ID, a.ID == r.Default, config.RedactURL(a.URL), a.OpenClawAgentID, a.Emoji, a.Role, a.Description, a.WhenToUse, a.Collections})
				}
				return printJSON(env.Stdout, map[string]any{"source": r.Source, "default": r.Default, "agents": rows})
			}
			tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "\tAGENT\tOPENCLAW AGENT\tURL\tROLE")
			for _, a := range r.Agents {
				mark := ""
				if a.ID == r.Default {
					mark = "*"
				}
				role := a.Role
				if role == "" {
					role = a.Description
				}
				name := a.ID
				if a.Emoji != "" {
					name = a.Emoji + " " + a.ID
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", mark, name, a.OpenClawAgentID, config.RedactURL(a.URL), truncate(firstLine(role), 50))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, w := range r.Warnings {
				fmt.Fprintln(env.Stderr, "warning:", w)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the agents as JSON")
	return cmd
}
