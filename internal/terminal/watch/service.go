package watch

import (
	"context"
	"log/slog"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
)

// Panes is what a watch needs of the terminal panes and the Turns sent to
// them (the Turn service implements it).
type Panes interface {
	// Target resolves a terminal id to its live pane, the pane's agent
	// and the agent's native identity; it refuses what cannot be
	// followed (a pane of another terminal host, a gone one).
	Target(ctx context.Context, terminalID string) (agents.Pane, agents.Agent, agents.Identity, error)
	// TurnRuns refuses, naming it, a Turn of ClawConnect that still owns
	// the pane's next input.
	TurnRuns(ctx context.Context, p agents.Pane) error
	// Bind returns the Session that owns the pane's current native
	// context, binding it to the pane and process.
	Bind(ctx context.Context, p agents.Pane, id agents.Identity) (*store.TermSession, error)
	// Capture returns the text the pane shows.
	Capture(ctx context.Context, p agents.Pane) (string, error)
	// Live looks for p's agent process in a recent pane inventory: the
	// pane as listed now (p itself when not listed), whether it is
	// listed, and whether the process provably exited.
	Live(ctx context.Context, p agents.Pane) (cur agents.Pane, listed, exited bool)
}

// Announcer tells the process of the watches' changes.
type Announcer interface {
	// Changed wakes the readers of changes (the dashboard, the outbox).
	Changed()
	// Announce hands a new watch to a monitor host: this process's, or
	// another process's through the store. It does not block.
	Announce(ctx context.Context, watchID string)
}

// Options configures a Service. Zero values are the documented defaults.
type Options struct {
	// Store holds the watches, the Sessions they are fenced by and the
	// callback rows of their notifications; required.
	Store store.Store
	// Panes and Announcer connect watches to the Turn service; required.
	Panes     Panes
	Announcer Announcer
	// Agents maps an agent kind to its reader; a watch needs one that is
	// an agents.TaskFinder.
	Agents map[string]agents.Agent
	// CallbackGateway is the gateway URL recorded on a watch requested
	// with no gateway of its own.
	CallbackGateway string
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
}

// Service starts, reads and cancels watches, and runs the follower of one
// for a monitor host (Follow). It is safe for concurrent use.
type Service struct {
	o   Options
	log *slog.Logger
}

// New returns a Service over o.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{o: o, log: o.Logger}
}
