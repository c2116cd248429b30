package cli

import (
	"context"
	"log/slog"

	"github.com/clawconnect/clawconnect/agentsession"
)

// loadRuntimes builds the agent-session runtime registry of the bridge and
// returns it with the names of the registered runtimes.
func loadRuntimes(_ context.Context, env Env, logger *slog.Logger) (*agentsession.Registry, []string, error) {
	reg := agentsession.NewRegistry()
	if spec := getenv(env)("CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES"); spec != "" {
		logger.Warn("CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES is set but this build has no runtime-module loader yet; no runtime registered", "value", spec)
	}
	return reg, nil, nil
}
