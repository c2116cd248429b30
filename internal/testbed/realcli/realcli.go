// Package realcli prepares the real Claude Code and Codex CLIs (installed by
// package peers) to run against the project's fake model server: a
// throwaway HOME seeded so that no dialog, login, update check or network
// call gets in the way, a trusted work directory, and a hermetic
// environment. It returns the binary, arguments and environment for the
// non-interactive modes (`claude -p … --output-format stream-json
// --verbose` and `codex exec --json …`) and for the TUIs.
//
// Claude Code talks Anthropic Messages to ANTHROPIC_BASE_URL with
// ANTHROPIC_API_KEY=dummy; its HOME holds .claude.json with onboarding
// done, the key approved and the work directory trusted, and
// .claude/settings.json accepting bypass-permissions mode (IS_SANDBOX=1 lets
// root use it). Codex talks OpenAI Responses to a custom provider declared in
// $CODEX_HOME/config.toml (key from FAKE_API_KEY), with update checks off,
// the work directory trusted and the app-server daemon disabled, so nothing
// outlives a run; [CLI.Close] still kills a daemon if one was started.
package realcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
)

// Kind names a CLI.
type Kind string

// The CLIs this package prepares.
const (
	ClaudeCode Kind = "claude-code"
	Codex      Kind = "codex"
)

// APIKey is the dummy key both CLIs send to the fake model.
const APIKey = "dummy"

// Options configures Prepare. ModelServer is required.
type Options struct {
	// ModelServer is the fake model the CLI talks to.
	ModelServer *fakemodel.Server
	// Dir holds the throwaway HOME (Dir/home) and, by default, the work
	// directory (Dir/work). Default: a new temporary directory, removed by
	// Close.
	Dir string
	// WorkDir is the directory the CLI runs in, seeded as trusted; default
	// Dir/work (created).
	WorkDir string
	// Model is the model name the CLI requests; default the server's model.
	Model string
	// Installer provides the installed CLIs; default peers.NewInstaller with
	// the default cache. Prepare installs the CLI if missing.
	Installer *peers.Installer
	// ExtraEnv is appended to the CLI's environment.
	ExtraEnv []string
}

// CLI is one prepared CLI: how to start it, and where its files go.
type CLI struct {
	// Kind says which CLI this is.
	Kind Kind
	// Path and Args start the CLI (Args come before the caller's own).
	Path string
	Args []string
	// Env is the CLI's complete environment (not merged with the current
	// process's): PATH with the pinned Node first, HOME, the model settings.
	Env []string
	// Home is the throwaway HOME; Claude Code keeps ~/.claude.json and
	// ~/.claude/ there, Codex ~/.codex/ (sessions, config.toml).
	Home string
	// WorkDir is the trusted working directory.
	WorkDir string
	// Model is the model name the CLI requests.
	Model string

	removeDir string
}

// Prepare installs the CLI if needed and lays out its HOME and work
// directory for opts.ModelServer. ctx bounds the install.
func Prepare(ctx context.Context, kind Kind, opts Options) (*CLI, error) {
	if opts.ModelServer == nil {
		return nil, errors.New("realcli: prepare: Options.ModelServer is required")
	}
	id := peers.ClaudeCode
	switch kind {
	case ClaudeCode:
	case Codex:
		id = peers.Codex
	default:
		return nil, fmt.Errorf("realcli: prepare: unknown CLI %q", kind)
	}
	in := opts.Installer
	if in == nil {
		var err error
		if in, err = peers.NewInstaller(peers.Options{}); err != nil {
			return nil, fmt.Errorf("realcli: %w", err)
		}
	}
	if err := in.Ensure(ctx, id); err != nil {
		return nil, fmt.Errorf("realcli: %w", err)
	}
	cmd, err := in.Command(id)
	if err != nil {
		return nil, fmt.Errorf("realcli: %w", err)
	}
	c := &CLI{Kind: kind, Path: cmd.Path, Args: cmd.Args, Model: opts.Model}
	if c.Model == "" {
		c.Model = opts.ModelServer.Model()
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "clawconnect-"+string(kind)+"-"); err != nil {
			return nil, fmt.Errorf("realcli: %w", err)
		}
		c.removeDir = dir
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("realcli: %w", err)
	}
	c.Home = filepath.Join(dir, "home")
	c.WorkDir = opts.WorkDir
	if c.WorkDir == "" {
		c.WorkDir = filepath.Join(dir, "work")
	}
	if c.WorkDir, err = filepath.Abs(c.WorkDir); err != nil {
		return nil, fmt.Errorf("realcli: %w", err)
	}
	for _, d := range []string{c.Home, c.WorkDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("realcli: %w", err)
		}
	}
	pathEnv := ""
	for _, kv := range cmd.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	c.Env = []string{
		"PATH=" + pathEnv,
		"HOME=" + c.Home,
		"TERM=xterm-256color",
		"LANG=C.UTF-8",
		"XDG_CONFIG_HOME=" + filepath.Join(c.Home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(c.Home, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(c.Home, ".local", "share"),
		"XDG_STATE_HOME=" + filepath.Join(c.Home, ".local", "state"),
	}
	if tmp := os.Getenv("TMPDIR"); tmp != "" {
		c.Env = append(c.Env, "TMPDIR="+tmp)
	}
	switch kind {
	case ClaudeCode:
		err = c.seedClaude(opts.ModelServer)
	case Codex:
		err = c.seedCodex(opts.ModelServer)
	}
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	c.Env = append(c.Env, opts.ExtraEnv...)
	return c, nil
}

func (c *CLI) seedClaude(m *fakemodel.Server) error {
	c.Env = append(c.Env,
		"ANTHROPIC_BASE_URL="+m.AnthropicBaseURL(), // Claude Code appends /v1/messages
		"ANTHROPIC_API_KEY="+APIKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		// Otherwise a git clone of the official plugin marketplace runs in
		// the background, writing into the test's home as it is removed.
		"CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
		"IS_SANDBOX=1", // lets root use --dangerously-skip-permissions
	)
	key := APIKey
	if len(key) > 20 {
		key = key[len(key)-20:] // Claude Code records the key's last 20 characters
	}
	state := map[string]any{
		"hasCompletedOnboarding": true,
		"customApiKeyResponses":  map[string]any{"approved": []string{key}, "rejected": []string{}},
		"projects":               map[string]any{c.WorkDir: map[string]any{"hasTrustDialogAccepted": true}},
	}
	if err := writeJSON(filepath.Join(c.Home, ".claude.json"), state); err != nil {
		return err
	}
	return writeJSON(filepath.Join(c.Home, ".claude", "settings.json"), map[string]any{"skipDangerousModePermissionPrompt": true})
}

func (c *CLI) seedCodex(m *fakemodel.Server) error {
	codexHome := filepath.Join(c.Home, ".codex")
	c.Env = append(c.Env, "CODEX_HOME="+codexHome, "FAKE_API_KEY="+APIKey)
	toml := fmt.Sprintf(`# Written by the ClawConnect testbed: Codex against the local fake model.
model = %s
model_provider = "fake"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake local"
base_url = %s
env_key = "FAKE_API_KEY"
wire_api = "responses"

[features]
daemon_auto_start = false

[tui]
screen_reader_detection_done = true

[projects.%s]
trust_level = "trusted"
`, strconv.Quote(c.Model), strconv.Quote(m.OpenAIBaseURL()), strconv.Quote(c.WorkDir))
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		return fmt.Errorf("realcli: %w", err)
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(toml), 0o600); err != nil {
		return fmt.Errorf("realcli: %w", err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("realcli: encode %s: %w", filepath.Base(path), err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("realcli: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("realcli: %w", err)
	}
	return nil
}

// PrintArgs are the arguments of a non-interactive run of prompt whose
// stdout is JSON lines: `claude -p <prompt> --output-format stream-json
// --verbose --model <model>` or `codex exec --json --skip-git-repo-check
// <prompt>`.
func (c *CLI) PrintArgs(prompt string) []string {
	if c.Kind == Codex {
		return []string{"exec", "--json", "--skip-git-repo-check", prompt}
	}
	return []string{"-p", prompt, "--output-format", "stream-json", "--verbose", "--model", c.Model}
}

// InteractiveArgs are the arguments that start the TUI (for a tmux pane).
func (c *CLI) InteractiveArgs() []string {
	if c.Kind == Codex {
		return nil // the model comes from config.toml; the daemon is off there
	}
	return []string{"--model", c.Model}
}

// Command builds an exec.Cmd that runs the CLI with args in WorkDir with
// the CLI's environment. Stdin is left nil (the null device), which
// `codex exec` needs so it does not wait for input.
func (c *CLI) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Path, append(append([]string{}, c.Args...), args...)...)
	cmd.Dir = c.WorkDir
	cmd.Env = append([]string{}, c.Env...)
	return cmd
}

// ShellCommand is the CLI's command line with its environment, quoted for
// a POSIX shell ("env K=V … path args…"), for starting it in a tmux pane.
func (c *CLI) ShellCommand(args ...string) string {
	parts := []string{"env", "-i"}
	for _, kv := range c.Env {
		parts = append(parts, shellQuote(kv))
	}
	parts = append(parts, shellQuote(c.Path))
	for _, a := range append(append([]string{}, c.Args...), args...) {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Close kills a Codex app-server daemon (and its updater) if one was
// started despite the config, and removes the directory Prepare created.
// It is idempotent.
func (c *CLI) Close() error {
	var errs []error
	if c.Kind == Codex {
		for _, f := range []string{"daemon.pid", "daemon-updater.pid"} {
			path := filepath.Join(c.Home, ".codex", "app-server-daemon", f)
			data, err := os.ReadFile(path)
			if err != nil {
				continue
			}
			var pid struct {
				PID int `json:"pid"`
			}
			if json.Unmarshal(data, &pid) == nil && pid.PID > 1 {
				if err := syscall.Kill(pid.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
					errs = append(errs, fmt.Errorf("realcli: kill codex daemon %d: %w", pid.PID, err))
				}
			}
			_ = os.Remove(path)
		}
	}
	if c.removeDir != "" {
		if err := os.RemoveAll(c.removeDir); err != nil {
			errs = append(errs, fmt.Errorf("realcli: %w", err))
		}
		c.removeDir = ""
	}
	return errors.Join(errs...)
}
