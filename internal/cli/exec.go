package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/runtime/claudecode"
	"github.com/clawconnect/clawconnect/runtime/codex"
	"github.com/clawconnect/clawconnect/runtime/openclaw"
	rtterminal "github.com/clawconnect/clawconnect/runtime/terminal"
)

// Exit codes of exec beyond the shared ones.
const (
	ExitMaxTurns = 6   // the run stopped at its turn limit
	ExitAborted  = 130 // the run was aborted (Ctrl-C), as a shell reports SIGINT
)

// execAbortWait bounds how long exec waits for the aborted terminal after
// Ctrl-C (the subprocess adapters escalate to SIGKILL after 3 s).
const execAbortWait = 15 * time.Second

// execPassEnv are the variables a CLI runtime inherits when the embedder
// gave only Env.Getenv (no Env.Environ to list the environment): what the
// runtimes need to find their binaries, homes, credentials and proxies.
var execPassEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
	"XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "NODE_OPTIONS",
	"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL",
	"ANTHROPIC_SMALL_FAST_MODEL", "ANTHROPIC_CUSTOM_HEADERS", "ANTHROPIC_DEFAULT_OPUS_MODEL",
	"ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_VERTEX_PROJECT_ID",
	"CLAUDE_CONFIG_DIR", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX",
	"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER", "DISABLE_TELEMETRY",
	"DISABLE_ERROR_REPORTING", "IS_SANDBOX", "CLOUD_ML_REGION", "GOOGLE_APPLICATION_CREDENTIALS",
	"AWS_REGION", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
	"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "CODEX_HOME",
	"OPENROUTER_API_KEY", "AZURE_OPENAI_API_KEY", "GEMINI_API_KEY", "MISTRAL_API_KEY",
}

// execEnviron builds a CLI runtime's environment by the executor's rule:
// the user's environment (Env.Environ) minus ClawConnect's own secrets,
// which the adapters scrub, so a provider key in any variable (a Codex
// env_key = "MY_KEY") reaches the runtime. An embedder that gave only
// Env.Getenv gets the names in execPassEnv plus those listed (comma or space
// separated) in CLAWCONNECT_EXEC_PASSENV.
func execEnviron(env Env) []string {
	if env.Environ != nil {
		return env.Environ()
	}
	get := getenv(env)
	names := append(slices.Clone(execPassEnv), settingsOf(env).ExecPassEnv...)
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if v := get(n); v != "" {
			out = append(out, n+"="+v)
		}
	}
	return out
}

type execFlags struct {
	runtime, model, resume, cwd, session string
	terminal                             string
	asJSON                               bool
	gw                                   gatewayFlags
}

func newExecCmd(env Env) *cobra.Command {
	f := &execFlags{}
	cmd := &cobra.Command{
		Use:   "exec --runtime openclaw|claude-code|codex|codex-tmux|claude-code-tmux [flags] PROMPT...",
		Short: "Run one prompt on a runtime and stream its normalized events",
		Long: `Run one prompt on an agent runtime through the executor and stream what it
does: assistant text as it arrives on standard output, tool calls, status and
the final result on standard error. With --json every normalized event is one
JSON line on standard output (fields kind, runId, sessionId, ts, seq and the
kind's payload, such as text, toolCallId or reason).

Runtimes:
  openclaw     an agent on an OpenClaw Gateway (OPENCLAW_URL,
               OPENCLAW_GATEWAY_TOKEN or OPENCLAW_PASSWORD; --session or
               --resume names the session key)
  claude-code  the claude CLI (CLAWCONNECT_CLAUDE_BIN, default claude on PATH)
  codex        the codex CLI (CLAWCONNECT_CODEX_BIN, default codex on PATH)
  codex-tmux, claude-code-tmux
               a Codex or Claude Code TUI already running in a tmux pane:
               --terminal TERMINAL_ID (from clawconnect terminal list) names
               the pane, --resume SESSION_ID a terminal Session instead; the
               run is one Turn, its events read from the agent's session
               file, and the pane stays yours to watch

The CLI runtimes inherit your environment (PATH, HOME, provider keys such as
a Codex env_key), minus ClawConnect's own secrets (OPENCLAW_PASSWORD,
OPENCLAW_GATEWAY_TOKEN, MCP tokens, CLAWCONNECT_* tokens and passwords).

Ctrl-C aborts the run; the stream then ends with done: aborted. The exit
code follows the done reason.

Exit codes: 0 success, 1 the run ended in an error, 2 bad flags or no
PROMPT, 3 an unusable setting, 6 max_turns, 130 aborted (Ctrl-C).`,
		Example: `  clawconnect exec --runtime claude-code "explain what main.go does"
  clawconnect exec --runtime codex --cwd ~/src/app --model gpt-5 "fix the failing test"
  clawconnect exec --runtime codex --resume THREAD_ID "now add a test"
  clawconnect exec --runtime openclaw --json "Say hello" | jq -r .kind
  clawconnect exec --runtime codex-tmux --terminal terminal:v2:tmux:codex:work:0.0:4242 "run the tests"`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &ExitError{Code: ExitUsage, Err: errors.New("exec needs a PROMPT")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExec(cmd.Context(), env, f, strings.Join(args, " "))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.runtime, "runtime", "", "runtime: openclaw, claude-code, codex, codex-tmux or claude-code-tmux (required)")
	fl.StringVar(&f.model, "model", "", "model for the run (default: the runtime's)")
	fl.StringVar(&f.resume, "resume", "", "continue a session: the native session/thread id (claude-code, codex) or session key (openclaw)")
	fl.StringVar(&f.cwd, "cwd", "", "working directory of a CLI runtime (default: the current directory)")
	fl.StringVar(&f.session, "session", "", "openclaw session key (default: a new agent:<OPENCLAW_AGENT_ID or main>:exec-<id>)")
	fl.StringVar(&f.terminal, "terminal", "", "codex-tmux, claude-code-tmux: the pane's terminal id (see clawconnect terminal list)")
	fl.BoolVar(&f.asJSON, "json", false, "print normalized events as JSON lines")
	fl.StringVar(&f.gw.url, "url", "", "openclaw gateway URL (default OPENCLAW_URL, then "+DefaultGatewayURL+")")
	fl.DurationVar(&f.gw.timeout, "connect-timeout", 30*time.Second, "openclaw: bound on connecting and on each gateway call")
	return cmd
}

// cliBinary is the binary exec starts for a CLI runtime
// (CLAWCONNECT_CLAUDE_BIN, CLAWCONNECT_CODEX_BIN); "" means the adapter's
// name on PATH.
func cliBinary(sv settings.Values, id executor.RuntimeID) string {
	switch id {
	case claudecode.ID:
		return sv.ClaudeBin
	case codex.ID:
		return sv.CodexBin
	}
	return ""
}

// execRuntime builds the adapter for f.runtime and the session key to use,
// plus a cleanup to run when done.
func execRuntime(ctx context.Context, env Env, f *execFlags) (executor.RuntimeAdapter, string, func(), error) {
	sv := settingsOf(env)
	logger := newLogger(env)
	environ := execEnviron(env)
	switch executor.RuntimeID(f.runtime) {
	case claudecode.ID:
		a := claudecode.New(claudecode.Options{Binary: cliBinary(sv, claudecode.ID), Environ: environ, Dir: f.cwd,
			Logger: logger})
		return a, "exec", func() { dispose(a) }, nil
	case codex.ID:
		a := codex.New(codex.Options{Binary: cliBinary(sv, codex.ID), Environ: environ, Dir: f.cwd,
			Logger: logger})
		return a, "exec", func() { dispose(a) }, nil
	case openclaw.ID:
		c, err := f.gw.dial(ctx, env)
		if err != nil {
			return nil, "", nil, &ExitError{Code: ExitFailure, Err: fmt.Errorf("connect to the gateway: %w", err)}
		}
		a := openclaw.New(c, openclaw.Options{Logger: logger})
		key := f.session
		if key == "" {
			key = f.resume
		}
		if key == "" {
			agent := sv.OpenClawAgentID
			b := make([]byte, 6)
			_, _ = rand.Read(b)
			key = "agent:" + agent + ":exec-" + hex.EncodeToString(b)
		}
		return a, key, func() { dispose(a); c.Close() }, nil
	case rtterminal.IDCodex, rtterminal.IDClaudeCode:
		if f.terminal == "" && f.resume == "" {
			return nil, "", nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("--runtime %s needs --terminal TERMINAL_ID (see `clawconnect terminal list`) or --resume SESSION_ID", f.runtime)}
		}
		ts, err := openTerminal(ctx, env, logger)
		if err != nil {
			return nil, "", nil, err
		}
		stopHost := func() {}
		if ts.host != nil {
			// No monitor host runs: follow the Turn from here.
			hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			done := make(chan struct{})
			go func() { defer close(done); _ = ts.host.Run(hctx) }()
			stopHost = func() { cancel(); <-done }
		}
		a := rtterminal.New(rtterminal.Options{ID: executor.RuntimeID(f.runtime), Turns: ts.svc, TerminalID: f.terminal, Logger: logger})
		return a, "exec", func() { dispose(a); stopHost(); ts.close() }, nil
	case "":
		return nil, "", nil, &ExitError{Code: ExitUsage, Err: errors.New("--runtime is required: openclaw, claude-code, codex, codex-tmux or claude-code-tmux")}
	default:
		return nil, "", nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("unknown runtime %q: use openclaw, claude-code, codex, codex-tmux or claude-code-tmux", f.runtime)}
	}
}

// binHint names the variable that points exec at a CLI runtime's binary.
func binHint(id executor.RuntimeID) string {
	switch id {
	case claudecode.ID:
		return " (exec runs CLAWCONNECT_CLAUDE_BIN, default claude on PATH: set it to the claude executable)"
	case codex.ID:
		return " (exec runs CLAWCONNECT_CODEX_BIN, default codex on PATH: set it to the codex executable)"
	}
	return ""
}

func dispose(a executor.RuntimeAdapter) {
	if d, ok := a.(executor.Disposer); ok {
		ctx, cancel := context.WithTimeout(context.Background(), execAbortWait)
		defer cancel()
		_ = d.Dispose(ctx)
	}
}

func runExec(ctx context.Context, env Env, f *execFlags, prompt string) error {
	a, key, cleanup, err := execRuntime(ctx, env, f)
	if err != nil {
		return err
	}
	defer cleanup()
	if h := executor.CheckHealth(ctx, a); !h.OK {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("%s is not available: %s%s", a.ID(), h.Message, binHint(a.ID()))}
	}
	opts := executor.StartOptions{SessionKey: key, Message: prompt, Model: f.model, Cwd: f.cwd}
	if a.ID() != openclaw.ID {
		opts.Resume = f.resume
	}
	run, err := a.Start(ctx, executor.Task{}, opts)
	if err != nil {
		if ctx.Err() != nil {
			return &ExitError{Code: ExitAborted, Err: errors.New("aborted before the run started")}
		}
		return fmt.Errorf("start %s: %w", a.ID(), err)
	}
	s, err := a.Events(context.WithoutCancel(ctx), run)
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	defer s.Close()

	// Ctrl-C cancels ctx: abort the run and keep reading until its
	// terminal, bounded by execAbortWait.
	readCtx, stopRead := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRead()
	var wg sync.WaitGroup
	finished := make(chan struct{})
	defer func() { close(finished); wg.Wait() }()
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-finished:
			return
		case <-ctx.Done():
		}
		actx, cancel := context.WithTimeout(context.Background(), execAbortWait)
		defer cancel()
		if err := a.Abort(actx, run); err != nil {
			fmt.Fprintf(env.Stderr, "abort: %v\n", err)
		}
		t := time.NewTimer(execAbortWait)
		defer t.Stop()
		select {
		case <-finished:
		case <-t.C:
			stopRead()
		}
	}()

	out := newExecPrinter(env, f.asJSON)
	for {
		ev, err := s.Next(readCtx)
		if err != nil {
			out.flush()
			if ctx.Err() != nil {
				return &ExitError{Code: ExitAborted, Err: errors.New("aborted; the runtime did not confirm in time")}
			}
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("the %s stream ended without a result", a.ID())}
		}
		if err := out.event(ev); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		d, ok := ev.Payload.(executor.Done)
		if !ok {
			continue
		}
		out.flush()
		switch d.Reason {
		case executor.DoneSuccess:
			return nil
		case executor.DoneAborted:
			return &ExitError{Code: ExitAborted, Err: errors.New("aborted")}
		case executor.DoneMaxTurns:
			return &ExitError{Code: ExitMaxTurns, Err: errors.New("the run stopped at its turn limit")}
		default:
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("run failed: %s", firstLine(d.Summary))}
		}
	}
}

// execPrinter renders events: JSON lines, or text on stdout with the other
// events as short lines on stderr. A stderr line that arrives while a
// stdout line is open waits until that line ends, so a terminal showing both
// streams never splits a reply around a status line.
type execPrinter struct {
	stdout, stderr io.Writer
	asJSON         bool
	midLine        bool            // stdout text without its final newline yet
	thinking       strings.Builder // reasoning deltas not shown yet
	pending        []string        // stderr lines held back while midLine
}

func newExecPrinter(env Env, asJSON bool) *execPrinter {
	p := &execPrinter{stdout: env.Stdout, stderr: env.Stderr, asJSON: asJSON}
	if p.stdout == nil {
		p.stdout = io.Discard
	}
	if p.stderr == nil {
		p.stderr = io.Discard
	}
	return p
}

// flush ends a pending stdout line, then shows what waited for it.
func (p *execPrinter) flush() {
	if p.asJSON {
		return
	}
	if p.midLine {
		fmt.Fprintln(p.stdout)
		p.midLine = false
	}
	p.drain()
}

// drain shows pending reasoning as one line, then the held-back notes.
func (p *execPrinter) drain() {
	if p.thinking.Len() > 0 {
		fmt.Fprintf(p.stderr, "· thinking: %s\n", truncate(strings.Join(strings.Fields(p.thinking.String()), " "), 160))
		p.thinking.Reset()
	}
	for _, l := range p.pending {
		fmt.Fprintln(p.stderr, l)
	}
	p.pending = p.pending[:0]
}

func (p *execPrinter) note(format string, args ...any) {
	line := fmt.Sprintf("· "+format, args...)
	if p.midLine {
		p.pending = append(p.pending, line)
		return
	}
	p.drain()
	fmt.Fprintln(p.stderr, line)
}

func (p *execPrinter) event(ev executor.Event) error {
	if p.asJSON {
		b, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_, err = p.stdout.Write(append(b, '\n'))
		return err
	}
	switch e := ev.Payload.(type) {
	case executor.TextDelta:
		if e.Channel == executor.ChannelReasoning {
			if p.thinking.Len() < 4096 {
				p.thinking.WriteString(e.Text)
			}
			return nil
		}
		if e.Text == "" {
			return nil
		}
		if !p.midLine {
			p.drain()
		}
		if _, err := io.WriteString(p.stdout, e.Text); err != nil {
			return err
		}
		p.midLine = !strings.HasSuffix(e.Text, "\n")
		if !p.midLine {
			p.drain()
		}
	case executor.ToolCall:
		p.note("tool %s %s", e.Name, truncate(string(e.Input), 120))
	case executor.ToolResult:
		word := "ok"
		if e.IsError {
			word = "failed"
		}
		p.note("tool %s %s: %s", e.Name, word, truncate(firstLine(e.Output), 120))
	case executor.Status:
		detail := strings.TrimSpace(string(e.Phase) + " " + e.Model + " " + e.Detail)
		p.note("status %s", detail)
	case executor.Cost:
		usd := "n/a"
		if e.CostUSD != nil {
			usd = fmt.Sprintf("$%.4f", *e.CostUSD)
		}
		p.note("cost %s (%d in, %d out tokens)", usd, e.Usage.InputTokens, e.Usage.OutputTokens)
	case executor.Error:
		level := "warning"
		if e.Fatal {
			level = "error"
		}
		p.note("%s: %s", level, e.Message)
	case executor.Done:
		p.note("done: %s (run %s)", e.Reason, ev.RunID)
	}
	return nil
}
