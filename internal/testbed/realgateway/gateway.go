// Package realgateway runs a real OpenClaw gateway (openclaw@2026.9.6 under
// Node 24, installed by package peers) headless on 127.0.0.1 for end-to-end
// tests, with its model provider pointed at the project's fake model server.
//
// [Start] writes a config into a fresh state directory: gateway mode local,
// loopback bind, token auth, two providers on the fake model ("fake",
// openai-completions, the default model fake/fake-model; and "fakeanth",
// anthropic-messages, model fakeanth/fake-claude), model catalog refresh,
// update checks, mDNS and heartbeats off, and a tiny test plugin that
// registers the gateway methods [EchoMethod] and [FailMethod]. It runs
// `openclaw gateway run` on a free loopback port in its own process group,
// with the environment switches that keep it off the network (no channels,
// no cron, no Bonjour, no auto-update, no respawn), and returns once a
// connect handshake gets hello-ok (15–25 s on two cores; the budget is
// Options.StartTimeout). [Gateway.Stop] sends SIGTERM to the process group
// and SIGKILL after a grace period, then kills every helper left that
// carries the gateway's environment; [Gateway.Restart] starts it again on
// the same port and state. The output of each process ends with a line
// saying how it ended. A loaded machine has seen a restarted gateway stop
// listening again after ready; [Gateway.WaitReady] waits until it serves
// again and fails at once if the process ended.
//
// The gateway is heavy (about 1.5 GB resident, 20 s to start): a test
// binary should have one. [Shared] starts one lazily and returns the same
// instance to every test; the binary's TestMain stops it with [StopShared]
// (or uses [Main]). Tests sharing it isolate themselves by session key.
//
// The harness's own minimal protocol client, [Probe], does the readiness
// check; it imports nothing from the product's gateway package, so that
// package's tests can use this harness.
package realgateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
)

// Names the harness configures.
const (
	// PluginID is the id of the test plugin the harness loads.
	PluginID = "clawconnect-test"
	// EchoMethod is a plugin gateway method (scope operator.read) that
	// answers {"echo": <params>, "client": <the caller's connect client>}.
	EchoMethod = "clawconnect-test.echo"
	// FailMethod is a plugin gateway method (scope operator.read) that
	// always answers ok:false with code "CLAWCONNECT_TEST_FAILED" and the
	// params' "message" (default "scripted failure").
	FailMethod = "clawconnect-test.fail"
	// Provider and Model form the agents' default model "fake/fake-model"
	// (OpenAI chat completions on the fake model server).
	Provider = "fake"
	Model    = "fake-model"
	// AnthropicProvider and AnthropicModel are a second provider on the same
	// fake server speaking Anthropic Messages: "fakeanth/fake-claude".
	AnthropicProvider = "fakeanth"
	AnthropicModel    = "fake-claude"
)

// Options configures Start. The zero value is usable.
type Options struct {
	// Dir is the directory for the config, state, HOME, workspace, plugin
	// and logs. Default: a new temporary directory, removed by Close.
	Dir string
	// Port is the gateway port on 127.0.0.1; default a free port (whose
	// next two ports, used by the gateway's canvas and browser control, are
	// free too).
	Port int
	// Token is the gateway's shared auth token; default random.
	Token string
	// ModelServer is the fake model the providers point at; default one
	// started for this gateway and closed by Close.
	ModelServer *fakemodel.Server
	// Installer provides the installed peers; default peers.NewInstaller
	// with the default cache. Start installs Node and OpenClaw if missing.
	Installer *peers.Installer
	// StartTimeout bounds the wait for hello-ok on each start; default 10 min
	// (the gateway needs 15–25 s on an idle 2-core machine, and was seen
	// taking over three minutes when several ran at once).
	StartTimeout time.Duration
	// ExtraEnv is appended to the gateway's environment.
	ExtraEnv []string
	// Plugins are more plugins loaded from their directories (besides the
	// test plugin), each enabled with its config.
	Plugins []Plugin
	// ToolSearchOff sets tools.toolSearch:false and allows the Plugins'
	// optional tools (tools.alsoAllow), so models see plugin tools by name
	// instead of behind tool_search/tool_call.
	ToolSearchOff bool
	// Logger receives lifecycle lines; nil discards.
	Logger *slog.Logger
}

// Plugin is a plugin directory the gateway loads, with its id and config.
type Plugin struct {
	ID     string
	Dir    string
	Config map[string]any
	// Install copies the plugin into the gateway's state with `openclaw
	// plugins install` before the gateway starts, as a user installs it,
	// instead of loading it from Dir through plugins.load.paths; the
	// gateway then runs the installed copy (Gateway.InstalledDir).
	Install bool
}

// Gateway is a running (or stopped) real OpenClaw gateway. Its methods are
// safe for concurrent use.
type Gateway struct {
	dir, token    string
	port          int
	removeDir     bool
	model         *fakemodel.Server
	ownModel      bool
	cmd           peers.Command
	env           []string
	startTimeout  time.Duration
	logger        *slog.Logger
	plugins       []Plugin
	toolSearchOff bool

	mu        sync.Mutex
	proc      *os.Process
	exited    chan struct{} // closed when the current process has been reaped
	hello     json.RawMessage
	startTime time.Duration
	closed    bool
}

// Start installs OpenClaw if needed, writes the config and starts the
// gateway; it returns once the gateway answers hello-ok. ctx bounds the
// install and the start (Options.StartTimeout applies on top).
func Start(ctx context.Context, opts Options) (_ *Gateway, err error) {
	g := &Gateway{dir: opts.Dir, port: opts.Port, token: opts.Token, model: opts.ModelServer,
		startTimeout: opts.StartTimeout, logger: opts.Logger, plugins: opts.Plugins, toolSearchOff: opts.ToolSearchOff}
	if g.logger == nil {
		g.logger = slog.New(slog.DiscardHandler)
	}
	if g.startTimeout <= 0 {
		g.startTimeout = 10 * time.Minute
	}
	defer func() {
		if err != nil {
			_ = g.Close()
		}
	}()
	in := opts.Installer
	if in == nil {
		if in, err = peers.NewInstaller(peers.Options{Logger: g.logger}); err != nil {
			return nil, fmt.Errorf("realgateway: %w", err)
		}
	}
	if err := in.Ensure(ctx, peers.OpenClaw); err != nil {
		return nil, fmt.Errorf("realgateway: %w", err)
	}
	if g.cmd, err = in.Command(peers.OpenClaw); err != nil {
		return nil, fmt.Errorf("realgateway: %w", err)
	}
	if g.dir == "" {
		if g.dir, err = os.MkdirTemp("", "clawconnect-gateway-"); err != nil {
			return nil, fmt.Errorf("realgateway: state dir: %w", err)
		}
		g.removeDir = true
	}
	if g.dir, err = filepath.Abs(g.dir); err != nil {
		return nil, fmt.Errorf("realgateway: state dir: %w", err)
	}
	if g.token == "" {
		g.token = randomToken()
	}
	if g.model == nil {
		if g.model, err = fakemodel.Start(ctx, fakemodel.Options{
			LogPath: filepath.Join(g.dir, "model-requests.jsonl"), Logger: g.logger,
		}); err != nil {
			return nil, fmt.Errorf("realgateway: %w", err)
		}
		g.ownModel = true
	}
	fixedPort := g.port != 0
	for attempt := 1; ; attempt++ {
		if !fixedPort {
			if g.port, err = freePort(3); err != nil {
				return nil, fmt.Errorf("realgateway: %w", err)
			}
		}
		if attempt > 1 && g.removeDir {
			// A start that failed half-way leaves state the next one
			// refuses ("startup migrations did not complete cleanly"):
			// begin again from none, as the first attempt did (only in a
			// directory Start created: a caller's Dir may hold state).
			if err = g.removeState(); err != nil {
				return nil, err
			}
		}
		if err = g.writeFiles(); err != nil {
			return nil, err
		}
		g.env = g.environment(opts.ExtraEnv)
		if err = g.installPlugins(ctx); err != nil {
			return nil, err
		}
		from := g.logSize()
		err = g.startProcess(ctx)
		if err == nil || attempt == startAttempts {
			break
		}
		out := g.logSince(from)
		if !fixedPort && strings.Contains(out, "EADDRINUSE") {
			g.logger.Info("gateway port taken, retrying on another", "port", g.port)
		} else if g.removeDir && errors.Is(err, errExited) && strings.Contains(out, leaseStartFailure) {
			g.logger.Warn("gateway quit during startup on a lease heartbeat; starting it again from fresh state", "attempt", attempt)
		} else {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	return g, nil
}

// URL is the gateway's WebSocket URL, ws://127.0.0.1:<port>.
func (g *Gateway) URL() string { return "ws://127.0.0.1:" + strconv.Itoa(g.port) }

// HTTPURL is the gateway's HTTP URL, http://127.0.0.1:<port>.
func (g *Gateway) HTTPURL() string { return "http://127.0.0.1:" + strconv.Itoa(g.port) }

// Port is the gateway port.
func (g *Gateway) Port() int { return g.port }

// Token is the shared auth token.
func (g *Gateway) Token() string { return g.token }

// ModelServer is the fake model server the gateway's providers use; its
// request log shows what the gateway sent the model.
func (g *Gateway) ModelServer() *fakemodel.Server { return g.model }

// Dir is the gateway's directory (config, state, home, workspace, logs).
func (g *Gateway) Dir() string { return g.dir }

// ConfigPath is the gateway's config file.
func (g *Gateway) ConfigPath() string { return filepath.Join(g.dir, "openclaw.json") }

// LogPath is where the gateway's stdout and stderr go (appended across
// restarts); the gateway's own JSON-lines log is in the same directory as
// openclaw.log.
func (g *Gateway) LogPath() string { return filepath.Join(g.dir, "gateway.out") }

// Hello is the hello-ok payload of the last readiness handshake.
func (g *Gateway) Hello() json.RawMessage {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.hello
}

// StartDuration is how long the last start took from spawn to hello-ok.
func (g *Gateway) StartDuration() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.startTime
}

// PID is the gateway process id, or 0 when it is not running.
func (g *Gateway) PID() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.proc == nil {
		return 0
	}
	return g.proc.Pid
}

// Exited returns a channel that is closed when the current gateway process
// ends (by Stop or on its own); nil when no process is running.
func (g *Gateway) Exited() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.proc == nil {
		return nil
	}
	return g.exited
}

// Dial opens a Probe connection to the gateway with its token.
func (g *Gateway) Dial(ctx context.Context) (*Probe, error) { return DialProbe(ctx, g.URL(), g.token) }

// ErrNotRunning is returned by WaitReady when no gateway process is running
// or the process ended while it waited.
var ErrNotRunning = errors.New("realgateway: the gateway process is not running")

// WaitReady blocks until the running gateway answers a connect handshake
// with hello-ok, as Start and Restart do before they return. It is for a
// test that needs the gateway serving again after it was seen not to be
// (a restarted gateway was seen to stop listening again after ready, and
// a start takes minutes on a loaded machine). It
// returns ErrNotRunning, with the end of the gateway's output, if the
// process ends meanwhile, and fails after Options.StartTimeout or when ctx
// ends.
func (g *Gateway) WaitReady(ctx context.Context) error {
	exited := g.Exited()
	if exited == nil {
		return ErrNotRunning
	}
	wctx, cancel := context.WithTimeout(ctx, g.startTimeout)
	defer cancel()
	if _, err := waitReady(wctx, g.URL(), g.token, exited); err != nil {
		if errors.Is(err, errExited) {
			return fmt.Errorf("%w\n%s", ErrNotRunning, g.logTail(30))
		}
		return fmt.Errorf("realgateway: gateway on port %d not ready: %w\n%s", g.port, err, g.logTail(30))
	}
	return nil
}

// ErrClosed is returned when a closed Gateway is restarted.
var ErrClosed = errors.New("realgateway: closed")

// Restart stops the gateway and starts it again on the same port, config
// and state; it returns once the new process answers hello-ok. A process
// that quits during startup because a lease heartbeat missed its start
// window (a loaded machine) is followed by `openclaw doctor --fix` and
// another start. Clients see a shutdown event and close code 1012, then
// connection refused until the new process listens.
func (g *Gateway) Restart(ctx context.Context) error {
	if err := g.Stop(); err != nil {
		return err
	}
	g.mu.Lock()
	closed := g.closed
	g.mu.Unlock()
	if closed {
		return ErrClosed
	}
	for attempt := 1; ; attempt++ {
		from := g.logSize()
		err := g.startProcess(ctx)
		if err == nil || attempt == startAttempts || !errors.Is(err, errExited) ||
			!strings.Contains(g.logSince(from), leaseStartFailure) {
			return err
		}
		// The failed start left its startup migrations half done, and the
		// next start refuses the state until doctor repairs it, as the
		// gateway itself advises.
		g.logger.Warn("gateway quit during startup on a lease heartbeat; repairing its state and starting it again", "attempt", attempt)
		if err := g.repairState(ctx); err != nil {
			return err
		}
	}
}

// repairState runs `openclaw doctor --fix --non-interactive` on the
// gateway's state, its output appended to the gateway's, then writes the
// harness's config back.
func (g *Gateway) repairState(ctx context.Context) error {
	out, err := os.OpenFile(g.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("realgateway: open log: %w", err)
	}
	defer out.Close()
	args := append(append([]string{}, g.cmd.Args...), "doctor", "--fix", "--non-interactive")
	cmd := exec.CommandContext(ctx, g.cmd.Path, args...)
	cmd.Dir, cmd.Env = g.dir, g.env
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("realgateway: openclaw doctor --fix: %w\n%s", err, g.logTail(30))
	}
	return g.writeFiles() // doctor also edits the config (it disables skills)
}

// stopGrace is how long Stop waits after SIGTERM before SIGKILL (a clean
// shutdown takes 2–5 s).
const stopGrace = 15 * time.Second

// leftoverGrace bounds how long Stop waits for the gateway's leftover
// helpers to die after SIGKILL (milliseconds, unless the machine is loaded).
const leftoverGrace = 10 * time.Second

// Stop ends the gateway process group (SIGTERM, then SIGKILL after a grace
// period), kills the helpers that left the group, and waits (at most
// leftoverGrace) until no process carrying the gateway's environment is
// left. It is idempotent; the
// Gateway can be started again with Restart.
func (g *Gateway) Stop() error {
	g.mu.Lock()
	leader, exited := g.proc, g.exited
	g.mu.Unlock()
	if leader == nil {
		return nil
	}
	pgid := leader.Pid // the gateway leads its own process group
	helpers := descendants(pgid)
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	select {
	case <-exited:
		t.Stop()
	case <-t.C:
		g.logger.Warn("gateway ignored SIGTERM; killing", "pid", pgid)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	// Auxiliary processes exit with the gateway; make sure of it, also for
	// those that left its process group, and for those started after the
	// snapshot whose parent is gone (found by the environment they inherit).
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for _, h := range helpers {
		h.kill()
	}
	// Killed processes can take a while to die (tearing down a large
	// heap on a loaded machine): wait until none is left, so the next start
	// does not meet them. Name those that neither the group nor the
	// snapshot reached.
	known := map[proc]bool{}
	for _, h := range helpers {
		known[h] = true
	}
	for _, h := range reapMarked(g.marker(), leftoverGrace) {
		if h.pgid != pgid && !known[h.proc] {
			g.appendLog(fmt.Sprintf("realgateway: killed gateway process %d that left its group and tree: %.200s", h.pid, h.cmd))
		}
	}
	g.mu.Lock()
	if g.proc == leader {
		g.proc = nil
	}
	g.mu.Unlock()
	return nil
}

// Close stops the gateway, closes the fake model server if Start created
// it, and removes the directory if Start created it. It is idempotent.
func (g *Gateway) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	g.mu.Unlock()
	errs := []error{g.Stop()}
	if g.ownModel && g.model != nil {
		errs = append(errs, g.model.Close())
	}
	if g.removeDir && g.dir != "" {
		errs = append(errs, os.RemoveAll(g.dir))
	}
	return errors.Join(errs...)
}

// startAttempts bounds how often Start spawns the gateway.
const startAttempts = 3

// leaseStartFailure is what the gateway prints when it quits during startup
// because a state lease heartbeat missed its fixed 5 s start window, which
// a loaded machine causes; a new process on fresh state usually starts.
const leaseStartFailure = "heartbeat did not become ready"

// startProcess spawns the gateway and waits for hello-ok.
func (g *Gateway) startProcess(ctx context.Context) error {
	out, err := os.OpenFile(g.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("realgateway: open log: %w", err)
	}
	defer out.Close() // the child keeps its own descriptor
	args := append(append([]string{}, g.cmd.Args...), "gateway", "run", "--port", strconv.Itoa(g.port))
	cmd := exec.Command(g.cmd.Path, args...)
	cmd.Dir = g.dir
	cmd.Env = g.env
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	begin := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("realgateway: start gateway: %w", err)
	}
	exited := make(chan struct{})
	go func() { // owned by the Gateway: ends when the process does (Stop)
		err := cmd.Wait()
		// Say in the log how and when the process ended, so that a gateway
		// that quit on its own is told apart from one that stopped listening.
		g.appendLog(fmt.Sprintf("realgateway: gateway pid %d ended at %s: %v", cmd.Process.Pid, time.Now().UTC().Format(time.RFC3339Nano), exitStatus(err)))
		close(exited)
	}()
	g.mu.Lock()
	g.proc, g.exited = cmd.Process, exited
	g.mu.Unlock()
	g.logger.Info("gateway starting", "pid", cmd.Process.Pid, "port", g.port, "dir", g.dir)

	wctx, cancel := context.WithTimeout(ctx, g.startTimeout)
	defer cancel()
	hello, err := waitReady(wctx, g.URL(), g.token, exited)
	if err != nil {
		_ = g.Stop()
		return fmt.Errorf("realgateway: gateway on port %d not ready: %w\n%s", g.port, err, g.logTail(30))
	}
	took := time.Since(begin)
	g.mu.Lock()
	g.hello, g.startTime = hello, took
	g.mu.Unlock()
	g.logger.Info("gateway ready", "pid", cmd.Process.Pid, "port", g.port, "seconds", took.Seconds())
	return nil
}

func (g *Gateway) environment(extra []string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "OPENCLAW_") || k == "HOME" || k == "PATH" {
			continue // never inherit a developer's own OpenClaw setup
		}
		env = append(env, kv)
	}
	env = append(env, g.cmd.Env...) // PATH with the pinned Node first
	env = append(env,
		"HOME="+filepath.Join(g.dir, "home"),
		"OPENCLAW_STATE_DIR="+filepath.Join(g.dir, "state"),
		"OPENCLAW_CONFIG_PATH="+g.ConfigPath(),
		"OPENCLAW_DISABLE_BONJOUR=1",
		"OPENCLAW_SKIP_CHANNELS=1",
		"OPENCLAW_NO_AUTO_UPDATE=1",
		"OPENCLAW_NO_RESPAWN=1",
		"OPENCLAW_EXEC_SHELL_SNAPSHOT=0",
		"OPENCLAW_SKIP_CRON=1",
		g.marker(),
	)
	return append(env, extra...)
}

// removeState deletes what a gateway process wrote (state, home,
// workspace), for a start to begin again from none.
func (g *Gateway) removeState() error {
	for _, d := range []string{"state", "home", "workspace"} {
		if err := os.RemoveAll(filepath.Join(g.dir, d)); err != nil {
			return fmt.Errorf("realgateway: remove state: %w", err)
		}
	}
	return nil
}

// marker is the environment entry every process of this gateway inherits,
// by which Stop finds the ones that left its process group and tree.
func (g *Gateway) marker() string { return "CLAWCONNECT_REALGATEWAY_DIR=" + g.dir }

// writeFiles lays out the directory: config, plugin, home, workspace.
func (g *Gateway) writeFiles() error {
	for _, d := range []string{"home", "state", "workspace", filepath.Join("plugins", PluginID)} {
		if err := os.MkdirAll(filepath.Join(g.dir, d), 0o755); err != nil {
			return fmt.Errorf("realgateway: %w", err)
		}
	}
	pluginDir := filepath.Join(g.dir, "plugins", PluginID)
	files := map[string]string{
		filepath.Join(pluginDir, "openclaw.plugin.json"): pluginManifest,
		filepath.Join(pluginDir, "package.json"):         pluginPackage,
		filepath.Join(pluginDir, "index.mjs"):            pluginSource,
	}
	cfg, err := json.MarshalIndent(g.config(pluginDir), "", "  ")
	if err != nil {
		return fmt.Errorf("realgateway: encode config: %w", err)
	}
	files[g.ConfigPath()] = string(cfg) + "\n"
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return fmt.Errorf("realgateway: %w", err)
		}
	}
	return nil
}

// config is the gateway config (JSON is valid JSON5) per the verified
// headless setup.
func (g *Gateway) config(pluginDir string) map[string]any {
	model := func(id, name string, ctxWindow int) map[string]any {
		return map[string]any{
			"id": id, "name": name, "reasoning": false, "input": []string{"text"},
			"cost":          map[string]int{"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
			"contextWindow": ctxWindow, "maxTokens": 4096,
		}
	}
	cfg := map[string]any{
		"gateway": map[string]any{
			"mode": "local", "bind": "loopback", "port": g.port,
			"auth": map[string]any{"mode": "token", "token": g.token},
		},
		"update":    map[string]any{"checkOnStart": false},
		"discovery": map[string]any{"mdns": map[string]any{"mode": "off"}},
		"logging":   map[string]any{"file": filepath.Join(g.dir, "openclaw.log")},
		"models": map[string]any{
			"mode":           "merge",
			"catalogRefresh": map[string]any{"enabled": false},
			"providers": map[string]any{
				Provider: map[string]any{
					"baseUrl": g.model.OpenAIBaseURL(), "apiKey": "sk-fake-local", "api": "openai-completions",
					"models": []any{model(Model, "Fake Model", 128000)},
				},
				AnthropicProvider: map[string]any{
					"baseUrl": g.model.AnthropicBaseURL(), "apiKey": "sk-ant-fake-local", "api": "anthropic-messages",
					"models": []any{model(AnthropicModel, "Fake Claude", 200000)},
				},
			},
		},
		"agents": map[string]any{
			"defaults": map[string]any{
				"model":     map[string]any{"primary": Provider + "/" + Model, "fallbacks": []string{}},
				"workspace": filepath.Join(g.dir, "workspace"),
				"heartbeat": map[string]any{"every": "0m"},
			},
		},
		"plugins": g.pluginConfig(pluginDir),
	}
	if g.toolSearchOff {
		ids := []string{}
		for _, p := range g.plugins {
			ids = append(ids, p.ID)
		}
		cfg["tools"] = map[string]any{"toolSearch": false, "profile": "coding", "alsoAllow": ids}
	}
	return cfg
}

func (g *Gateway) pluginConfig(pluginDir string) map[string]any {
	paths := []string{pluginDir}
	entries := map[string]any{PluginID: map[string]any{"enabled": true}}
	for _, p := range g.plugins {
		if !p.Install {
			paths = append(paths, p.Dir)
		}
		e := map[string]any{"enabled": true}
		if p.Config != nil {
			e["config"] = p.Config
		}
		entries[p.ID] = e
	}
	return map[string]any{"load": map[string]any{"paths": paths}, "entries": entries}
}

// installPlugins runs `openclaw plugins install` for each Plugin with
// Install, into the gateway's state directory.
func (g *Gateway) installPlugins(ctx context.Context) error {
	for _, p := range g.plugins {
		if !p.Install {
			continue
		}
		// A local folder is outside ClawHub's review (--force) and asks
		// for capability consent (--accept-capabilities), as for a user.
		args := append(append([]string{}, g.cmd.Args...), "plugins", "install", "--force", "--accept-capabilities", p.Dir)
		cmd := exec.CommandContext(ctx, g.cmd.Path, args...)
		cmd.Dir, cmd.Env = g.dir, g.env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("realgateway: openclaw plugins install %s: %w\n%s", p.Dir, err, out)
		}
	}
	return nil
}

// InstalledDir is where `openclaw plugins install` put the plugin id (a
// Plugin with Install).
func (g *Gateway) InstalledDir(id string) string {
	return filepath.Join(g.dir, "state", "extensions", id)
}

// LogTail returns the last n lines of the gateway's output (LogPath), headed
// for a test failure message; "" when there is none yet.
func (g *Gateway) LogTail(n int) string { return g.logTail(n) }

func (g *Gateway) logTail(n int) string {
	data, err := os.ReadFile(g.LogPath())
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "gateway output (last lines):\n" + strings.Join(lines, "\n")
}

// appendLog adds a harness line to the gateway's output.
func (g *Gateway) appendLog(line string) {
	f, err := os.OpenFile(g.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line + "\n")
}

// exitStatus describes how a process ended from cmd.Wait's error.
func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// logSize is the current length of the gateway's output.
func (g *Gateway) logSize() int64 {
	fi, err := os.Stat(g.LogPath())
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSince is the gateway's output from byte offset from on.
func (g *Gateway) logSince(from int64) string {
	data, err := os.ReadFile(g.LogPath())
	if err != nil || from > int64(len(data)) {
		return ""
	}
	return string(data[from:])
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return "test-" + hex.EncodeToString(b)
}

// freePort finds a loopback port p such that p..p+extra are all free.
func freePort(extra int) (int, error) {
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find free port: %w", err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if p+extra > 65535 {
			continue
		}
		ok := true
		for q := p + 1; q <= p+extra && ok; q++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				ok = false
				continue
			}
			_ = l.Close()
		}
		if ok {
			return p, nil
		}
	}
	return 0, errors.New("find free port: no free run of loopback ports")
}
