package cli

import (
	"context"
	"log/slog"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/agentsession/module"
)

// runtimeModulesVar names the operator's runtime modules.
const runtimeModulesVar = "CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES"

// loadRuntimes starts the runtime modules named by
// CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES and returns the registry they
// registered into, the registered runtime ids and a function that stops
// the modules. A module that fails to start is logged and skipped (it
// never fails the command). The modules inherit the process environment.
func loadRuntimes(ctx context.Context, env Env, logger *slog.Logger) (*agentsession.Registry, []string, func()) {
	reg := agentsession.NewRegistry()
	spec := settingsOf(env).RuntimeModules
	if spec == "" {
		return reg, nil, func() {}
	}
	loaded := module.Load(ctx, spec, reg, module.LoadOptions{Logger: logger.With("component", "runtime_module")})
	return reg, loaded.Runtimes(), loaded.Close
}
