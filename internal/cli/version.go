package cli

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is the module version recorded in the build, or "devel".
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

func newVersionCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the clawconnect version",
		Long: `Print the clawconnect version (the same as clawconnect --version).

Exit codes: 0 printed, 2 unexpected arguments.`,
		Example: `  clawconnect version
  clawconnect --version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(env.Stdout, "clawconnect %s\n", version())
			return err
		},
	}
}
