package terminal

import (
	"context"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
)

// ProcessChecker is implemented by Terminals that can tell whether a pane's
// agent process incarnation still runs, independently of the pane.
type ProcessChecker interface {
	// Alive reports whether p's process (pid and birth) runs; an error
	// means it cannot tell.
	Alive(p agents.Pane) (bool, error)
}

// Terminals finds agent panes and does their I/O (tmux + /proc).
type Terminals interface {
	// Discover lists every live agent pane. An error means the inventory is
	// incomplete: nothing may be concluded dead from it.
	Discover(ctx context.Context) ([]agents.Pane, error)
	// Capture returns the pane's screen (visible part and a short history).
	Capture(ctx context.Context, p agents.Pane) (string, error)
	// SendText types text into the pane without Enter (bracketed paste for
	// several lines). Errors wrap termapi.ErrInputNotSent or termapi.ErrOutcomeUncertain.
	SendText(ctx context.Context, p agents.Pane, text string) error
	// SendKeys sends named keys ("Enter", "C-c", "Escape", "y").
	SendKeys(ctx context.Context, p agents.Pane, keys ...string) error
}

// OutputWatcher is implemented by Terminals that report pane output (tmux
// control mode): the channel receives after new output, until ctx ends.
type OutputWatcher interface {
	WatchOutput(ctx context.Context, p agents.Pane) (<-chan struct{}, error)
}
