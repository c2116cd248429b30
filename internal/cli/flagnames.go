package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// renameFlags keeps the old spellings of cmd's renamed flags working for
// one release: each old name in oldToNew parses as its new name, and help
// shows only the new one. The names each surface uses are in
// docs/VOCABULARY.md.
func renameFlags(cmd *cobra.Command, oldToNew map[string]string) {
	cmd.Flags().SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if n, ok := oldToNew[name]; ok {
			return pflag.NormalizedName(n)
		}
		return pflag.NormalizedName(name)
	})
}
