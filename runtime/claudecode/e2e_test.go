package claudecode

import (
	"log/slog"
	"testing"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/executor/contract"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/runtime/internal/fakecli"
)

// TestContractWithRealCLI runs the contract suite against the real Claude
// Code CLI talking to the fake model server: a turn with text, a tool call
// (a real Bash run), an abort. Gated by CLAWCONNECT_E2E=1.
func TestContractWithRealCLI(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	cli := realcli.Require(t, realcli.ClaudeCode, model)
	contract.RunAdapterContract(t, fakecli.RealHarness(fakecli.RealHarnessConfig{
		Label:   "claude-code real CLI",
		WorkDir: cli.WorkDir,
		New: func(t *testing.T, logger *slog.Logger) executor.RuntimeAdapter {
			return New(Options{
				Binary: cli.Path, BinaryArgs: cli.Args, Environ: cli.Env, Dir: cli.WorkDir,
				Logger: logger,
			})
		},
	}))
}
