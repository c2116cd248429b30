// Package cli builds the clawconnect command tree. It is the only place that
// turns flags and settings into the option structs of the library packages:
// main hands it the process environment, it reads that through the settings
// registry (internal/settings) and passes values on, never the environment.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/internal/config"
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
	// Environ lists the whole environment as KEY=value (os.Environ), for
	// the CLI runtimes exec starts; nil means only the variables exec knows
	// by name, read through Getenv.
	Environ func() []string
	// OwnProcess says the command runs alone in its process (the binary's
	// main), so it may tune process-wide runtime settings: mcp runs on one
	// CPU at a time unless GOMAXPROCS is set, and lets go of the binary's
	// pages it touched only while starting (see releaseStartPages).
	OwnProcess bool

	// settings holds the settings read through Getenv once for a whole
	// Run (nil, as in an Env built by hand: read at each use).
	settings *loadedSettings
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
	env.settings = &loadedSettings{}
	root := newRootCmd(env)
	root.SetArgs(env.Args)
	if err := root.ExecuteContext(ctx); err != nil {
		return redactedError{err}
	}
	return nil
}

// redactedError hides credentials of URLs quoted in an error's text (a
// gateway URL with "user:pass@" or "?token=") and neutralizes terminal
// control characters (an agent's error text), keeping the chain for
// errors.Is and errors.As.
type redactedError struct{ err error }

func (e redactedError) Error() string { return termSafe(config.RedactText(e.err.Error())) }
func (e redactedError) Unwrap() error { return e.err }

func newRootCmd(env Env) *cobra.Command {
	root := &cobra.Command{
		Use:   "clawconnect",
		Short: "Connect AI clients to agent runtimes",
		Long: `clawconnect connects AI clients to agent runtimes.

It serves MCP tools that hand a task to an agent on an OpenClaw Gateway and
follow it to a result, drives OpenClaw, Claude Code and Codex through one
normalized event stream, and attaches tasks to agent sessions that another
system manages.`,
		Example: `  clawconnect doctor
  clawconnect run --wait "Say hello"
  clawconnect help run`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	groupCmd(root)
	root.PersistentPreRunE = checkSettings(env)
	root.SetVersionTemplate("clawconnect {{.Version}}\n")
	root.SetHelpCommand(skipSettingsCheck(newHelpCmd(root)))
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	cmds := topCommands()
	if len(env.Args) > 0 {
		for _, c := range cmds {
			if c.name == env.Args[0] {
				cmds = []topCommand{c}
				// Nor does cobra build its completion command and
				// one per shell at Execute (Run of version: 145 → 84
				// allocations): the command line runs the named one.
				root.CompletionOptions.DisableDefaultCmd = true
				break
			}
		}
	}
	for _, c := range cmds {
		root.AddCommand(c.build(env))
	}
	usageArgs(root)
	markNoJSON(root)
	return root
}

// topCommand is one of the root's commands: its name and its constructor.
type topCommand struct {
	name  string
	build func(Env) *cobra.Command
}

// topCommands lists the root's commands. A command line whose first
// argument names one of them builds that one alone: building the whole tree
// (the terminal group alone has some forty commands) cost a start of
// clawconnect mcp ~0.5 ms of CPU before it could answer initialize. Any other
// command line (help, completion, a flag first, an unknown name) builds
// them all. TestTopCommandsAreNamedAsBuilt keeps the names true.
func topCommands() []topCommand {
	return []topCommand{
		{"version", func(env Env) *cobra.Command { return skipSettingsCheck(newVersionCmd(env)) }},
		{"exec", newExecCmd},
		{"gateway", newGatewayCmd},
		{"mcp", newMCPCmd},
		{"serve", newServeCmd},
		{"terminal", newTerminalCmd},
		{"run", newRunCmd},
		{"status", newStatusCmd},
		{"logs", newLogsCmd},
		{"sessions", newSessionsCmd},
		{"agents", newAgentsCmd},
		{"doctor", func(env Env) *cobra.Command { return skipSettingsCheck(newDoctorCmd(env)) }},
	}
}

// noJSON annotates a command without --json, saying why: it serves a
// protocol or prints help, not a result a script would read.
const noJSON = "clawconnect/no-json"

// markNoJSON marks the commands that have no --json. Every other command
// that prints has one (a test walks the tree).
func markNoJSON(root *cobra.Command) {
	why := map[string]string{
		"mcp":             "speaks MCP on standard output",
		"serve":           "serves HTTP; its output is logs on standard error",
		"terminal daemon": "follows terminal work until stopped; its output is logs",
		"terminal module": "speaks the runtime-module protocol on standard output",
	}
	for path, reason := range why {
		cmd, _, err := root.Find(strings.Fields(path))
		if err != nil || cmd == root {
			continue // a renamed command: TestEveryCommandHasJSON names it
		}
		if cmd.Annotations == nil {
			cmd.Annotations = map[string]string{}
		}
		cmd.Annotations[noJSON] = reason
	}
}

// usageArgs makes the argument check of cmd and every command under it fail
// with ExitUsage, as a flag error does (cobra's own checks, cobra.NoArgs
// among them, return a plain error: exit 1). A command that takes no
// arguments says so, rather than cobra's "unknown command".
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			err := check(c, args)
			if err == nil {
				return nil
			}
			var ee *ExitError
			if errors.As(err, &ee) {
				return err
			}
			if len(args) > 0 && !c.HasSubCommands() && check(c, nil) == nil {
				err = fmt.Errorf("%s takes no arguments, got %q", c.CommandPath(), args)
			}
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%w; see %s --help", err, c.CommandPath())}
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// groupCmd makes cmd, a command that only groups subcommands, show its help
// when called alone and refuse an unknown subcommand with ExitUsage (cobra
// would print the help and exit 0, or fail with a plain error, exit 1).
func groupCmd(cmd *cobra.Command) {
	cmd.Args = cobra.ArbitraryArgs
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which SuggestionsFor does not apply
	}
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		return unknownCommand(c, args[0])
	}
}

// unknownCommand is the ExitUsage error for a name that is no subcommand of
// parent, with cobra's suggestions.
func unknownCommand(parent *cobra.Command, name string) error {
	hint := ""
	if s := parent.SuggestionsFor(name); len(s) > 0 {
		hint = fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf("unknown command %q for %q%s; run '%s --help' for the list",
		name, parent.CommandPath(), hint, parent.CommandPath())}
}

// newHelpCmd replaces cobra's help command, which exits 0 on an unknown
// topic: "help nosuch" is a usage error here.
func newHelpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:         "help [command]",
		Short:       "Help about any command",
		Annotations: map[string]string{noJSON: "prints help text"},
		Long: `Help prints the help of any command, e.g. clawconnect help gateway call.

Exit codes: 0 printed, 2 no such command.`,
		Example: `  clawconnect help
  clawconnect help run
  clawconnect help gateway call`,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			target, rest, err := root.Find(args)
			if err != nil || target == nil {
				return &ExitError{Code: ExitUsage, Err: fmt.Errorf("help: no command %q; run 'clawconnect help' for the list", strings.Join(args, " "))}
			}
			if len(rest) > 0 {
				return unknownCommand(target, rest[0])
			}
			return target.Help()
		},
	}
}
