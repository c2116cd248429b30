// Package cli builds the clawconnect command tree. It is the only place that
// turns flags and environment variables into the option structs of the
// library packages; main hands it the process environment and nothing else.
package cli

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"
)

// Env is everything a command may read from the process: its arguments, its
// standard streams and its environment. Tests build one by hand.
type Env struct {
	Args   []string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv looks up an environment variable; nil means an empty environment.
	Getenv func(string) string
}

// ExitError carries a process exit code chosen by a command.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Exit codes shared by every command.
const (
	ExitOK      = 0 // success
	ExitFailure = 1 // the operation failed (task failed, gateway refused, ...)
	ExitUsage   = 2 // bad flags or arguments
)

// ExitCode maps an error returned by Run to a process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitFailure
}

// Run executes the command line in env.Args and returns when it finishes or
// ctx is cancelled.
func Run(ctx context.Context, env Env) error {
	root := newRootCmd(env)
	root.SetArgs(env.Args)
	return root.ExecuteContext(ctx)
}

func newRootCmd(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "clawconnect",
		Short: "Connect AI clients to agent runtimes",
		Long: `clawconnect connects AI clients to agent runtimes.

It serves MCP tools that hand a task to an agent on an OpenClaw Gateway and
follow it to a result, drives OpenClaw, Claude Code and Codex through one
normalized event stream, and attaches tasks to agent sessions that another
system manages.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	root.AddCommand(
		newVersionCmd(env),
		newExecCmd(env),
		newGatewayCmd(env),
		newMCPCmd(env), newServeCmd(env), newTerminalCmd(env), newRunCmd(env), newStatusCmd(env), newLogsCmd(env), newSessionsCmd(env), newAgentsCmd(env), newDoctorCmd(env),
	)
	return root
}
