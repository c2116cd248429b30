package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/spf13/cobra"
)

// version is the module version recorded in the build, or "devel". It is
// read once: debug.ReadBuildInfo parses the whole build record (every
// dependency) at each call, and mcp needed it twice before it answered
// initialize (the root's --version and the server's name).
var version = sync.OnceValue(func() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
})

// versionJSON is what version --json prints.
type versionJSON struct {
	Version string `json:"version"`
	Go      string `json:"go"`
}

func newVersionCmd(env Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the clawconnect version",
		Long: `Print the clawconnect version (the same as clawconnect --version).
With --json: {"version": "...", "go": "go1.x"}.

Exit codes: 0 printed, 2 unexpected arguments.`,
		Example: `  clawconnect version
  clawconnect version --json
  clawconnect --version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if asJSON {
				return printJSON(env.Stdout, versionJSON{Version: version(), Go: runtime.Version()})
			}
			_, err := fmt.Fprintf(env.Stdout, "clawconnect %s\n", version())
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the version as JSON")
	return cmd
}
