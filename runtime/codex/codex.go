// Package codex is the executor adapter for the Codex CLI: each run is a
// `codex exec --json` process whose lines are normalized into executor
// events (agent messages, reasoning, command executions, file changes and
// MCP calls as tool calls with results, usage as an estimated cost,
// turn.completed and turn.failed), with exactly one terminal event per run.
package codex

import (
	"context"
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
type Adapter struct {
	e *oneshot.Engine
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
			Streaming: true, MCP: true, Worktrees: true, Resume: true, ToolApproval: true,
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
	return &Adapter{e: oneshot.New(spec, oneshot.Options{Logger: o.Logger, KillGrace: o.KillGrace, MaxLineBytes: o.MaxLineBytes, QueueMax: o.QueueMax})}
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

// ID implements executor.RuntimeAdapter.
func (a *Adapter) ID() executor.RuntimeID { return a.e.ID() }

// ParticipantKind implements executor.RuntimeAdapter.
func (a *Adapter) ParticipantKind() executor.ParticipantKind { return a.e.ParticipantKind() }

// Capabilities implements executor.RuntimeAdapter.
func (a *Adapter) Capabilities() executor.Capabilities { return a.e.Capabilities() }

// Health implements executor.RuntimeAdapter: healthy when the codex binary
// resolves to an executable.
func (a *Adapter) Health(ctx context.Context) executor.Health { return a.e.Health(ctx) }

// Start implements executor.RuntimeAdapter: it spawns codex in its own
// process group and returns with the run id unbound (it binds to the
// thread id from thread.started).
func (a *Adapter) Start(ctx context.Context, task executor.Task, opts executor.StartOptions) (*executor.RunHandle, error) {
	return a.e.Start(ctx, task, opts)
}

// Events implements executor.RuntimeAdapter.
func (a *Adapter) Events(ctx context.Context, run *executor.RunHandle) (*executor.Stream, error) {
	return a.e.Events(ctx, run)
}

// Abort implements executor.RuntimeAdapter: SIGTERM to the process group,
// SIGKILL after the grace period.
func (a *Adapter) Abort(ctx context.Context, run *executor.RunHandle) error {
	return a.e.Abort(ctx, run)
}

// SetModel implements executor.RuntimeAdapter; the model applies to the
// session's next run.
func (a *Adapter) SetModel(ctx context.Context, run *executor.RunHandle, model string) error {
	return a.e.SetModel(ctx, run, model)
}

// WriteContext implements executor.RuntimeAdapter by writing key as a file
// in the run's working directory.
func (a *Adapter) WriteContext(ctx context.Context, run *executor.RunHandle, key, value string) error {
	return a.e.WriteContext(ctx, run, key, value)
}

// SerializeSession implements executor.SessionCodec.
func (a *Adapter) SerializeSession(ctx context.Context, run *executor.RunHandle) (string, error) {
	return a.e.SerializeSession(ctx, run)
}

// RestoreSession implements executor.SessionCodec.
func (a *Adapter) RestoreSession(ctx context.Context, blob string) (*executor.RunHandle, error) {
	return a.e.RestoreSession(ctx, blob)
}

// Dispose implements executor.Disposer: it aborts every live run and waits
// for the processes to exit.
func (a *Adapter) Dispose(ctx context.Context) error { return a.e.Dispose(ctx) }

// Forget drops what the adapter keeps about a session (its last run and
// buffered events, the model set on it, its native id); call it when the
// host is done with the session. A live run is not stopped.
func (a *Adapter) Forget(sessionKey string) { a.e.Forget(sessionKey) }

// Wait blocks until no run is live or ctx ends.
func (a *Adapter) Wait(ctx context.Context) error { return a.e.Wait(ctx) }
