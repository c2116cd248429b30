// Package claudecode is the executor adapter for Claude Code: each run is a
// `claude -p --output-format stream-json --verbose` process whose lines are
// normalized into executor events (text and thinking deltas, tool calls and
// results, the result with its real USD cost, max turns), with exactly one
// terminal event per run.
package claudecode

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/runtime/internal/oneshot"
)

// ID is the adapter's runtime id.
const ID = executor.RuntimeClaudeCode

// Options configure the adapter. Zero values are the documented defaults.
type Options struct {
	// Binary is the claude executable; empty means "claude" on PATH.
	Binary string
	// BinaryArgs come before the run's own arguments (for example the
	// script when Binary is node).
	BinaryArgs []string
	// Environ is the environment runs inherit before scrubbing; nil means
	// the process environment. ClawConnect's own secrets are always removed
	// (OPENCLAW_PASSWORD, OPENCLAW_GATEWAY_TOKEN, MCP_USER_TOKENS,
	// PUBLIC_MCP_PASS, CLAWCONNECT_* tokens and passwords); the runtime's own
	// configuration (PATH, HOME, ANTHROPIC_*, OPENAI_*, CODEX_HOME, provider
	// keys) passes.
	Environ []string
	// ExtraEnv is laid over the scrubbed environment (KEY=value).
	ExtraEnv []string
	// Dir is the working directory when StartOptions.Cwd is empty; empty
	// means the current directory.
	Dir string
	// PermissionMode is passed as --permission-mode (for example
	// "bypassPermissions", "acceptEdits"); empty leaves the CLI default.
	PermissionMode string
	// MaxTurns is passed as --max-turns when positive.
	MaxTurns int
	// WholeMessages turns off --include-partial-messages: each assistant
	// message then arrives as one synthetic text delta and the capabilities
	// report no streaming. By default text streams as true deltas.
	WholeMessages bool
	// Logger receives one record per side effect (abort, set model, write
	// context) and per process start and end; nil discards.
	Logger *slog.Logger
	// KillGrace is the wait between SIGTERM and SIGKILL on abort; 0 means
	// 3 s.
	KillGrace time.Duration
	// MaxLineBytes bounds one stdout line; longer lines are skipped and
	// reported as a non-fatal error event. 0 means 16 MiB.
	MaxLineBytes int
	// QueueMax bounds each event stream; 0 means executor.DefaultQueueMax.
	QueueMax int
}

// Adapter drives Claude Code. It implements executor.RuntimeAdapter,
// executor.SessionCodec and executor.Disposer, and is safe for concurrent
// use.
//
// Every method is the shared one-process-per-run engine's: one binary per
// run in its own process group, abort by SIGTERM then SIGKILL after the
// grace period, a model set with SetModel applying to the session's next
// run (a resume), WriteContext writing a file in the run's directory,
// Forget dropping what is kept about a session (sessions idle for an hour
// are dropped by themselves).
type Adapter struct {
	*oneshot.Engine
}

// New returns an adapter.
func New(o Options) *Adapter {
	bin := o.Binary
	if bin == "" {
		bin = "claude"
	}
	environ := o.Environ
	if environ == nil {
		environ = os.Environ()
	}
	spec := oneshot.Spec{
		ID:   ID,
		Name: "claude",
		Caps: executor.Capabilities{
			Streaming: !o.WholeMessages, MCP: true, Worktrees: true, Resume: true, ToolApproval: true,
			Models:              []string{"sonnet", "opus", "haiku"},
			ContextWindowTokens: 200_000,
			RuntimeClass:        executor.ClassWrappedOneshot,
			NativeSkills:        executor.PreserveNone,
			NativeMemory:        executor.PreserveNone,
			NativeChannels:      executor.ChannelsNone,
		},
		Command: func(opts executor.StartOptions, model string) (oneshot.Command, error) {
			path, err := oneshot.LookPath(bin, oneshot.ScrubEnv(environ, o.ExtraEnv))
			if err != nil {
				return oneshot.Command{}, err
			}
			dir := opts.Cwd
			if dir == "" {
				dir = o.Dir
			}
			return oneshot.Command{
				Path:  path,
				Args:  append(append([]string{}, o.BinaryArgs...), Args(opts, model, o)...),
				Dir:   dir,
				Env:   oneshot.ScrubEnv(environ, o.ExtraEnv),
				Stdin: opts.Prompt(),
			}, nil
		},
		NewDecoder: func(executor.StartOptions, string) oneshot.Decoder { return newDecoder() },
		LookPath:   func() (string, error) { return oneshot.LookPath(bin, oneshot.ScrubEnv(environ, o.ExtraEnv)) },
	}
	return &Adapter{Engine: oneshot.New(spec, oneshot.Options{Logger: o.Logger, KillGrace: o.KillGrace, MaxLineBytes: o.MaxLineBytes, QueueMax: o.QueueMax})}
}

// Args returns the claude arguments of a run (the prompt goes to stdin, so
// no prompt text can be mistaken for a flag).
func Args(opts executor.StartOptions, model string, o Options) []string {
	args := []string{"-p", "--output-format", "stream-json", "--verbose"}
	if !o.WholeMessages {
		args = append(args, "--include-partial-messages")
	}
	if model != "" {
		args = append(args, "--model", model)
	}
	if opts.Resume != "" {
		args = append(args, "--resume", opts.Resume)
	}
	if o.PermissionMode != "" {
		args = append(args, "--permission-mode", o.PermissionMode)
	}
	if o.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(o.MaxTurns))
	}
	if len(opts.ChildToolBlocklist) > 0 {
		args = append(args, "--disallowedTools", strings.Join(opts.ChildToolBlocklist, ","))
	}
	return args
}
