// Package codex is the executor adapter for the Codex CLI: each run is a
// `codex exec --json` process whose lines are normalized into executor
// events (agent messages, reasoning, command executions, file changes and
// MCP calls as tool calls with results, usage as an estimated cost,
// turn.completed and turn.failed), with exactly one terminal event per run.
package codex

import (
	"log/slog"
	"os"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/runtime/internal/oneshot"
)

// ID is the adapter's runtime id.
const ID = executor.RuntimeCodex

// Options configure the adapter. Zero values are the documented defaults.
type Options struct {
	// Binary is the codex executable; empty means "codex" on PATH.
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
	// Home, when set, is the per-agent Codex home (exported as CODEX_HOME);
	// empty leaves CODEX_HOME as inherited.
	Home string
	// Dir is the working directory when StartOptions.Cwd is empty; empty
	// means the current directory.
	Dir string
	// Bypass passes --dangerously-bypass-approvals-and-sandbox: no approval
	// prompts and no sandbox (the working directory is the only isolation).
	Bypass bool
	// Sandbox is passed as -s (read-only, workspace-write,
	// danger-full-access) when Bypass is false; empty leaves the CLI default.
	Sandbox string
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

// Adapter drives Codex. It implements executor.RuntimeAdapter,
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
		bin = "codex"
	}
	environ := o.Environ
	if environ == nil {
		environ = os.Environ()
	}
	extra := o.ExtraEnv
	if o.Home != "" {
		extra = append([]string{"CODEX_HOME=" + o.Home}, extra...)
	}
	env := func() []string { return oneshot.ScrubEnv(environ, extra) }
	spec := oneshot.Spec{
		ID:   ID,
		Name: "codex",
		Caps: executor.Capabilities{
			// Not streaming: `codex exec --json` reports an agent message
			// or reasoning item only when it completes (item.completed; the
			// model's token deltas stay inside Codex), so text arrives one
			// whole message at a time.
			Streaming: false, MCP: true, Worktrees: true, Resume: true, ToolApproval: true,
			Models:         []string{"gpt-5-codex", "gpt-5", "o4-mini"},
			RuntimeClass:   executor.ClassWrappedOneshot,
			NativeHome:     &executor.NativeHomeClaim{Scope: executor.HomePerIdentity, Persist: true},
			NativeSkills:   executor.PreserveNone,
			NativeMemory:   executor.PreserveNone,
			NativeChannels: executor.ChannelsNone,
		},
		Command: func(opts executor.StartOptions, model string) (oneshot.Command, error) {
			path, err := oneshot.LookPath(bin, env())
			if err != nil {
				return oneshot.Command{}, err
			}
			dir := opts.Cwd
			if dir == "" {
				dir = o.Dir
			}
			return oneshot.Command{Path: path, Args: append(append([]string{}, o.BinaryArgs...), Args(opts, model, o)...), Dir: dir, Env: env()}, nil
		},
		NewDecoder: func(_ executor.StartOptions, model string) oneshot.Decoder { return newDecoder(model) },
		LookPath:   func() (string, error) { return oneshot.LookPath(bin, env()) },
	}
	return &Adapter{Engine: oneshot.New(spec, oneshot.Options{Logger: o.Logger, KillGrace: o.KillGrace, MaxLineBytes: o.MaxLineBytes, QueueMax: o.QueueMax})}
}

// Args returns the codex arguments of a run, the prompt last (after "--",
// so no prompt text can be mistaken for a flag). Stdin is /dev/null, so
// codex reads no extra input.
func Args(opts executor.StartOptions, model string, o Options) []string {
	args := []string{"exec", "--json", "--skip-git-repo-check"}
	if model != "" {
		args = append(args, "--model", model)
	}
	if o.Bypass {
		args = append(args, "--dangerously-bypass-approvals-and-sandbox")
	} else if o.Sandbox != "" {
		args = append(args, "-s", o.Sandbox)
	}
	if opts.Resume != "" {
		args = append(args, "resume", opts.Resume)
	}
	return append(args, "--", opts.Prompt())
}
