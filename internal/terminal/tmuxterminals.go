package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/clawconnect/clawconnect/internal/terminal/agentproc"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/proc"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
	"github.com/clawconnect/clawconnect/termapi"
)

// TmuxTerminals is Terminals over tmux panes and /proc: discovery and
// identity from agentproc, I/O through the tmux client, and a fresh
// identity check (agentproc.Verify) right before every input.
type TmuxTerminals struct {
	Tmux   *tmux.Client
	Finder *agentproc.Finder
	// Host, when set, is the host name the panes' terminal ids carry
	// (version 3), for a store shared with other machines.
	Host string
}

var (
	_ Terminals      = (*TmuxTerminals)(nil)
	_ ProcessChecker = (*TmuxTerminals)(nil)
	_ OutputWatcher  = (*TmuxTerminals)(nil)
)

// WatchOutput implements OutputWatcher with the read-only tmux control-mode
// client of the pane's session, shared by every watch of its panes.
func (t *TmuxTerminals) WatchOutput(ctx context.Context, p agents.Pane) (<-chan struct{}, error) {
	r, err := rowOf(p)
	if err != nil {
		return nil, err
	}
	return t.Tmux.WatchOutput(ctx, r.Pane)
}

// NewTmuxTerminals returns Terminals over tmux with o, reading /proc.
func NewTmuxTerminals(o tmux.Options) (*TmuxTerminals, error) {
	c := tmux.New(o)
	f, err := agentproc.New(agentproc.Options{Panes: c})
	if err != nil {
		return nil, fmt.Errorf("terminals: %w", err)
	}
	return &TmuxTerminals{Tmux: c, Finder: f}, nil
}

// paneOf converts a row.
func paneOf(r agentproc.Row) agents.Pane {
	ctrl, _ := json.Marshal(r)
	return agents.Pane{TerminalID: r.TerminalID, Key: r.Pane.Key(), Agent: string(r.Agent), PID: r.Process.PID,
		Birth: strconv.FormatUint(r.Process.StartTicks, 10), Cwd: r.Process.Cwd, Control: ctrl,
		NotControllable: !r.Controllable, Reason: r.Reason}
}

// Alive implements ProcessChecker from /proc.
func (t *TmuxTerminals) Alive(p agents.Pane) (bool, error) {
	ticks, err := strconv.ParseUint(p.Birth, 10, 64)
	if err != nil {
		return false, fmt.Errorf("pane %s: birth %q: %w", p.TerminalID, p.Birth, err)
	}
	return proc.Alive(p.PID, ticks)
}

func rowOf(p agents.Pane) (agentproc.Row, error) {
	var r agentproc.Row
	if err := json.Unmarshal(p.Control, &r); err != nil {
		return r, fmt.Errorf("pane %s has no readable tmux address: %w", p.TerminalID, err)
	}
	return r, nil
}

// Discover implements Terminals: every agent pane, controllable or not.
func (t *TmuxTerminals) Discover(ctx context.Context) ([]agents.Pane, error) {
	rows, err := t.Finder.Discover(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]agents.Pane, 0, len(rows))
	for _, r := range rows {
		p := paneOf(r)
		if t.Host != "" {
			p.TerminalID = agentproc.FormatHostTerminalID(t.Host, r.Agent, r.Pane.Target(), r.Process.PID)
		}
		out = append(out, p)
	}
	return out, nil
}

// Capture implements Terminals.
func (t *TmuxTerminals) Capture(ctx context.Context, p agents.Pane) (string, error) {
	r, err := rowOf(p)
	if err != nil {
		return "", err
	}
	return t.Tmux.Capture(ctx, r.Pane, tmux.CaptureOptions{})
}

// verify re-checks the pane's identity right before input; a failure
// means nothing was sent.
func (t *TmuxTerminals) verify(ctx context.Context, p agents.Pane) (agentproc.Row, error) {
	r, err := rowOf(p)
	if err != nil {
		return r, fmt.Errorf("%w: %w", termapi.ErrInputNotSent, err)
	}
	r, err = t.Finder.Verify(ctx, r)
	if err != nil {
		return r, fmt.Errorf("%w: %w", termapi.ErrInputNotSent, err)
	}
	return r, nil
}

func sendErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tmux.ErrUncertain):
		return fmt.Errorf("%w: %w", termapi.ErrOutcomeUncertain, err)
	default:
		return fmt.Errorf("%w: %w", termapi.ErrInputNotSent, err)
	}
}

// SendText implements Terminals.
func (t *TmuxTerminals) SendText(ctx context.Context, p agents.Pane, text string) error {
	r, err := t.verify(ctx, p)
	if err != nil {
		return err
	}
	return sendErr(t.Tmux.SendText(ctx, r.Pane, text))
}

// SendKeys implements Terminals: "Enter", "C-c", "Escape", "y".
func (t *TmuxTerminals) SendKeys(ctx context.Context, p agents.Pane, keys ...string) error {
	r, err := t.verify(ctx, p)
	if err != nil {
		return err
	}
	ks := make([]tmux.Key, 0, len(keys))
	for _, k := range keys {
		switch k {
		case "Enter":
			ks = append(ks, tmux.KeyEnter)
		default:
			ks = append(ks, tmux.Key(k))
		}
	}
	return sendErr(t.Tmux.SendKeys(ctx, r.Pane, ks...))
}
