package cli

import (
	"context"
	"fmt"
	"sync"

	"github.com/spf13/cobra"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/agentsession/module"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/terminal/sessionrt"
)

// socketSessions opens the Turn service of the monitor host listening on
// the terminal socket, once one listens; each call retries until then.
type socketSessions struct {
	env Env
	mu  sync.Mutex
	c   *terminal.Client
}

func (s *socketSessions) open(context.Context) (sessionrt.Sessions, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		return s.c, nil
	}
	c, err := terminal.Dial(terminalSocket(s.env))
	if err != nil {
		return nil, fmt.Errorf("no terminal monitor host answers on %s: run `clawconnect serve` or `clawconnect terminal daemon` with the same CLAWCONNECT_HOME", terminalSocket(s.env))
	}
	s.c = c
	return c, nil
}

func terminalModuleCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:   "module",
		Short: "Serve terminal Sessions as the agent-session runtime tmux-terminal (a runtime module)",
		Long: `Speak the runtime-module protocol (docs/runtime-modules.md) on standard input and
output, serving the agent-session runtime "tmux-terminal": an <agent-session>
marker whose sessionId is a terminal session_id attaches a task to that Session.
inspect reports the Session's latest Turn (running, needs_permission, idle with
the reply, stale, dead, failed; unavailable when no monitor host answers),
continue sends the prompt as a new Turn in session_exact scope, and detach
releases the Session without touching its pane.

It reaches the Turns through the monitor host of the same CLAWCONNECT_HOME
(` + "`clawconnect serve`" + ` or ` + "`clawconnect terminal daemon`" + `). It is not started by
itself: an operator opts in by naming it in
CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES, with the binary's absolute path
(PATH is never searched).`,
		Example: `  CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES="/usr/local/bin/clawconnect terminal module" clawconnect serve`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg := agentsession.NewRegistry()
			s := &socketSessions{env: env}
			if err := reg.Register(sessionrt.Runtime(s.open)); err != nil {
				return err
			}
			return module.Serve(cmd.Context(), reg, env.Stdin, env.Stdout)
		},
	}
}
