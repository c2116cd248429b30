package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/bridge"
	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// Exit codes of the task-bridge commands, beyond ExitOK, ExitFailure (the
// task failed or was cancelled, or the operation failed) and ExitUsage.
const (
	ExitConfig   = 3 // no agent configuration, or an invalid one
	ExitNotFound = 4 // the job or session does not exist
	ExitPending  = 5 // --timeout elapsed while the task is still running
)

// configHint is printed when no agent configuration is found.
const configHint = "Create ~/.clawconnect/agents.json or set OPENCLAW_URL + OPENCLAW_PASSWORD."

// backend is what the task-bridge commands run against: the task service
// and the agent configuration behind it.
type backend struct {
	tasks    server.Tasks
	registry *taskapi.Registry
	timeouts config.Timeouts
	runtimes []string // registered agent-session runtimes, for doctor and logs
	// shared is the store the bridge owns (nil when it only reads one);
	// serve hosts the terminal monitors on it.
	shared store.Store
	close  func()
}

// opener builds the backend of a command. Tests pass one over an in-memory
// task service; the binary uses openBridge.
type opener func(ctx context.Context, env Env, logger *slog.Logger) (*backend, error)

// getenv returns env.Getenv, or an empty environment.
func getenv(env Env) func(string) string {
	if env.Getenv == nil {
		return func(string) string { return "" }
	}
	return env.Getenv
}

// newLogger logs to stderr at CLAWCONNECT_LOG_LEVEL (debug, info, warn,
// error; default warn). Stdout never carries logs.
func newLogger(env Env) *slog.Logger {
	level := settingsOf(env).LogLevel
	w := env.Stderr
	if w == nil {
		w = io.Discard
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// loadRegistry loads the agent configuration, mapping its failures to
// ExitConfig: no configuration with the reference's hint, a broken
// agents.json with doctor's fix.
func loadRegistry(env Env) (*taskapi.Registry, error) {
	r, err := config.LoadRegistry(settingsOf(env))
	var fe *config.FileError
	switch {
	case errors.As(err, &fe):
		return nil, &ExitError{Code: ExitConfig, Err: fmt.Errorf("%w\n%s", err, agentsFileFix(fe.Path))}
	case err != nil:
		return nil, &ExitError{Code: ExitConfig, Err: err}
	}
	return r, nil
}

// agentsFileFix is the advice for a broken agents.json at path.
func agentsFileFix(path string) string {
	return "Fix " + path + " (see the message), or remove it to use OPENCLAW_URL + OPENCLAW_PASSWORD."
}

// describeRegistry is the one-line summary logged at start.
func describeRegistry(r *taskapi.Registry) string {
	src := r.Source
	if r.Path != "" {
		src = r.Path
	}
	return fmt.Sprintf("loaded %d agent(s) from %s (default=%s, agents=%s)", len(r.Agents), src, r.Default, strings.Join(r.IDs(), ","))
}

// notFound maps server.ErrNotFound to ExitNotFound.
func notFound(what, id string, err error) error {
	if errors.Is(err, server.ErrNotFound) {
		return &ExitError{Code: ExitNotFound, Err: fmt.Errorf("%s %q not found (the store may have been reset, or it belongs to another CLAWCONNECT_HOME)", what, id)}
	}
	return err
}

// openBridge is the opener of run: the task bridge over the store and the
// configured gateways, without runtime modules (as the reference CLI). It
// follows only the task it submits, and releases it when it exits, so that
// a serve or mcp process (or the next one to start) follows it on.
func openBridge(ctx context.Context, env Env, logger *slog.Logger) (*backend, error) {
	return openBridgeWith(ctx, env, logger, bridge.Options{Follow: bridge.FollowOwn, Role: "run"}, false)
}

// openReadBridge is the opener of the commands that only read (status, logs,
// sessions): openBridge without any task manager, so they take no lease;
// a wait on a running task (logs --follow) is woken by the store's change
// feed when the process following it writes.
func openReadBridge(ctx context.Context, env Env, logger *slog.Logger) (*backend, error) {
	return openBridgeWith(ctx, env, logger, bridge.Options{Follow: bridge.FollowNone, Role: "read"}, false)
}

// openServerBridge is the opener of serve: the bridge with the runtime
// modules of CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES.
func openServerBridge(ctx context.Context, env Env, logger *slog.Logger) (*backend, error) {
	return openBridgeWith(ctx, env, logger, bridge.Options{Role: "serve"}, true)
}

// openStdioBridge is openServerBridge for stdio servers: every MCP client
// starts its own, and they all share the one store.
func openStdioBridge(ctx context.Context, env Env, logger *slog.Logger) (*backend, error) {
	return openBridgeWith(ctx, env, logger, bridge.Options{Role: "mcp"}, true)
}

// openBridgeWith opens the bridge with the store options of o, and the
// runtime modules when modules is set.
func openBridgeWith(ctx context.Context, env Env, logger *slog.Logger, o bridge.Options, modules bool) (*backend, error) {
	if _, err := loadRegistry(env); err != nil {
		return nil, err
	}
	var (
		runtimes *agentsession.Registry
		names    []string
		stop     = func() {}
	)
	if modules {
		runtimes, names, stop = loadRuntimes(ctx, env, logger)
	}
	sv := settingsOf(env)
	o.Settings, o.Runtimes, o.Logger = &sv, runtimes, logger
	b, err := bridge.Open(ctx, o)
	if err != nil {
		stop()
		if errors.Is(err, store.ErrBusy) {
			return nil, fmt.Errorf("%w\nAnother clawconnect process kept the store busy; retry", err)
		}
		return nil, err
	}
	return &backend{tasks: b, registry: b.Registry(), timeouts: b.Timeouts(), runtimes: names, shared: b.SharedStore(), close: func() {
		b.Close()
		stop()
	}}, nil
}
