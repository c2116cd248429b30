package transition

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/termapi"
)

// Panes finds and reads the pane a transition drives (the Turn service
// implements it).
type Panes interface {
	// Target resolves a terminal id to its live pane, the pane's agent
	// and the agent's native identity.
	Target(ctx context.Context, terminalID string) (agents.Pane, agents.Agent, agents.Identity, error)
	// Find returns the live pane with the terminal key, refused unless
	// the same process incarnation (pid, birth) still runs in it.
	Find(ctx context.Context, key string, pid int, birth string) (agents.Pane, error)
	// Identify reads the pane's foreground native thread.
	Identify(ctx context.Context, a agents.Agent, p agents.Pane) (agents.Identity, error)
	// Ready refuses a pane that is busy, shows a prompt, dialog or menu,
	// or holds a draft.
	Ready(ctx context.Context, a agents.Agent, p agents.Pane) error
	// Capture returns the text the pane shows.
	Capture(ctx context.Context, p agents.Pane) (string, error)
}

// Keyboard types a transition's commands into the pane.
type Keyboard interface {
	// SendText types text without Enter; an error wraps
	// termapi.ErrInputNotSent when nothing was typed.
	SendText(ctx context.Context, p agents.Pane, text string) error
	// SendKeys sends named keys ("Enter", "Escape").
	SendKeys(ctx context.Context, p agents.Pane, keys ...string) error
	// WaitDraft reports whether the composer came to show the slash
	// command cmd (bounded), the sign that Enter may be pressed.
	WaitDraft(ctx context.Context, a agents.Agent, p agents.Pane, cmd string) bool
}

// Announcer tells the process of a transition's changes.
type Announcer interface {
	// Changed wakes the readers of changes (the dashboard, list).
	Changed()
}

// Options configures a Service. Zero values are the documented defaults.
type Options struct {
	// Store holds the transitions, the Sessions they bind and detach,
	// their leases and the process registry; required.
	Store store.Store
	// Panes, Keyboard and Announcer connect transitions to the Turn
	// service; required.
	Panes     Panes
	Keyboard  Keyboard
	Announcer Announcer
	// Agents maps an agent kind to its reader; thread controls need one
	// that is an agents.ThreadControl.
	Agents map[string]agents.Agent
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Stepped, if set, is called after each step is stored (tests stop a
	// transition there).
	Stepped func(status string)
}

// Service runs, reads, resolves and recovers thread transitions. It is
// safe for concurrent use.
type Service struct {
	o   Options
	log *slog.Logger

	mu sync.Mutex
	// holding counts the work leases this process holds for itself
	// (holdWork) while it is registered as their owner; guarded by mu.
	holding int
}

// New returns a Service over o.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{o: o, log: o.Logger}
}

func nowMs() int64 { return time.Now().UnixMilli() }

func (s *Service) agent(kind string) (agents.Agent, error) {
	a, ok := s.o.Agents[kind]
	if !ok {
		return nil, fmt.Errorf("%w: no reader for agent %q in this build", termapi.ErrRefused, kind)
	}
	return a, nil
}
