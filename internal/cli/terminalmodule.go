package cli

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/agentsession/module"
	"github.com/clawconnect/clawconnect/internal/terminal/sessionrt"
)

// moduleSessions opens the Turn service for the module at its first call:
// a Service over the shared store with a monitor host of its own (running
// until the module exits), one of the hosts sharing the store. A failed
// open is tried again at the next call.
type moduleSessions struct {
	env    Env
	ctx    context.Context
	logger *slog.Logger

	mu   sync.Mutex
	api  sessionrt.Sessions
	stop func()
}

func (s *moduleSessions) open(ctx context.Context) (sessionrt.Sessions, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.api != nil {
		return s.api, nil
	}
	st, closeStore, err := openTerminalStore(ctx, s.env)
	if err != nil {
		return nil, fmt.Errorf("open the terminal store: %w", err)
	}
	svc, c, err := newTerminalService(s.env, st, s.logger)
	if err != nil {
		_ = closeStore()
		return nil, err
	}
	stopHost := goTerminalHost(s.ctx, s.env, st, svc, c, "terminal module", s.logger)
	s.stop = func() { stopHost(); _ = closeStore() }
	s.api = svc
	return svc, nil
}

// close stops the host open started, if any.
func (s *moduleSessions) close() {
	s.mu.Lock()
	stop := s.stop
	s.stop = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func terminalModuleCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "module",
		Short: "Serve terminal Sessions as the agent-session runtime tmux-terminal (a runtime module)",
		Long: `Speak the runtime-module protocol (docs/runtime-modules.md) on standard input and
output, serving the agent-session runtime "tmux-terminal": an <agent-session>
marker whose sessionId is a terminal session_id attaches a task to that Session.
inspect reports the Session's latest Turn (running, needs_permission, idle with
the reply, stale, dead, failed; unavailable when the store does not open),
continue sends the prompt as a new Turn in session_exact scope, and detach
releases the Session without touching its pane.

It works on the shared store of CLAWCONNECT_HOME (or CLAWCONNECT_DATABASE_URL)
and is a monitor host there while it runs, like ` + "`clawconnect serve`" + ` and
` + "`clawconnect terminal daemon`" + `. It is not started by itself: an operator opts in by naming it in
CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES, with the binary's absolute path
(PATH is never searched).`,
		Example: `  CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES="/usr/local/bin/clawconnect terminal module" clawconnect serve`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg := agentsession.NewRegistry()
			s := &moduleSessions{env: env, ctx: cmd.Context(), logger: newLogger(env)}
			defer s.close()
			if err := reg.Register(sessionrt.Runtime(s.open)); err != nil {
				return err
			}
			return module.Serve(cmd.Context(), reg, env.Stdin, env.Stdout)
		},
	}
}
