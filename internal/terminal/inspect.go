package terminal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/ids"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/termapi"
)

// Native inspection: the agent's own /status card, typed
// into an idle pane, read, and closed again.

// statusCommand is the one native command Inspect types.
const statusCommand = "/status"

// Bounds of an inspection.
const (
	inspectCardTimeout  = 5 * time.Second
	inspectIdleTimeout  = 3 * time.Second
	inspectPollInterval = 50 * time.Millisecond
)

// InspectResult is what Inspect read from the agent's status card.
type InspectResult struct {
	TerminalID string `json:"terminal_id"`
	Agent      string `json:"agent"`
	agents.StatusCard
	// ComposerEmpty reports that the pane was seen idle with an empty
	// composer after the card was closed.
	ComposerEmpty bool `json:"composer_empty"`
}

// Inspect types the agent's own /status into the pane, reads the status
// card (identity, model, version, workspace), closes it and checks that the
// pane is back to an idle, empty composer. It refuses, before typing
// anything, a pane that is busy, shows a dialog or holds a draft, a pane
// where a Turn of ClawConnect runs, and an agent version whose card format
// is not proven.
func (s *Service) Inspect(ctx context.Context, terminalID string) (InspectResult, error) {
	if err := ids.CheckTerminal(terminalID); err != nil {
		return InspectResult{}, fmt.Errorf("inspect: %w", err)
	}
	if host, ok := s.foreign(terminalID); ok {
		var res InspectResult
		err := s.onHost(ctx, host, hostOpInspect, hostOpArgs{TerminalID: terminalID}, &res)
		return res, err
	}
	p, a, _, err := s.followTarget(ctx, terminalID)
	if err != nil {
		return InspectResult{}, fmt.Errorf("inspect: %w", err)
	}
	in, ok := a.(agents.Inspector)
	if !ok {
		return InspectResult{}, fmt.Errorf("inspect: %w: %s panes cannot be inspected by this build", termapi.ErrRefused, p.Agent)
	}
	version, err := in.Version(p)
	if err != nil {
		return InspectResult{}, fmt.Errorf("inspect: %w: the %s version is unknown (%v), so its status card format is not proven; nothing was typed", termapi.ErrRefused, p.Agent, err)
	}
	if !slices.Contains(in.ProvenVersions(), version) {
		return InspectResult{}, fmt.Errorf("inspect: %w: %s %s is not a version whose status card was proven (proven: %s); nothing was typed",
			termapi.ErrRefused, p.Agent, version, strings.Join(in.ProvenVersions(), ", "))
	}
	if err := s.ourTurnRuns(ctx, p); err != nil {
		return InspectResult{}, fmt.Errorf("inspect: %w", err)
	}
	if id, err := watch.Active(ctx, s.o.Store, p.Key); err != nil {
		return InspectResult{}, fmt.Errorf("inspect: %w", err)
	} else if id != "" {
		// The typed command could pass for the task the watch waits for.
		return InspectResult{}, fmt.Errorf("inspect: %w: watch %s follows this pane; unwatch it first", termapi.ErrRefused, id)
	}
	if _, err := s.checkScreen(ctx, a, p); err != nil {
		return InspectResult{}, fmt.Errorf("inspect: %w", err)
	}
	// From here keys reach the pane: finish even if the caller goes away.
	ctx = context.WithoutCancel(ctx)
	if err := s.o.Terminals.SendText(ctx, p, statusCommand); err != nil {
		return InspectResult{}, fmt.Errorf("inspect: type %s: %w", statusCommand, err)
	}
	if !s.waitCommandDraft(ctx, a, p, statusCommand) {
		return InspectResult{}, restoreComposer(ctx, s.o.Terminals, a, in, p, fmt.Errorf("inspect: %w: %s did not show in the composer, so Enter was not pressed", termapi.ErrRefused, statusCommand))
	}
	if err := s.o.Terminals.SendKeys(ctx, p, "Enter"); err != nil {
		return InspectResult{}, restoreComposer(ctx, s.o.Terminals, a, in, p, fmt.Errorf("inspect: press Enter: %w", err))
	}
	card, err := awaitCard(ctx, s.o.Terminals, in, p)
	if err != nil {
		return InspectResult{}, restoreComposer(ctx, s.o.Terminals, a, in, p, err)
	}
	if card.Version != version {
		err = fmt.Errorf("inspect: %w: the card shows version %s, the process is %s", termapi.ErrRefused, card.Version, version)
		return InspectResult{}, restoreComposer(ctx, s.o.Terminals, a, in, p, err)
	}
	if err := restoreComposer(ctx, s.o.Terminals, a, in, p, nil); err != nil {
		return InspectResult{}, err
	}
	s.log.Info("terminal inspected", "terminal_id", p.TerminalID, "agent", p.Agent, "version", card.Version)
	return InspectResult{TerminalID: p.TerminalID, Agent: p.Agent, StatusCard: card, ComposerEmpty: true}, nil
}

// awaitCard polls the screen until the status card shows.
func awaitCard(ctx context.Context, terms Terminals, in agents.Inspector, p agents.Pane) (agents.StatusCard, error) {
	deadline := time.Now().Add(inspectCardTimeout)
	for {
		if text, err := terms.Capture(ctx, p); err == nil {
			if card, ok := in.ParseStatus(text); ok {
				return card, nil
			}
		}
		if time.Now().After(deadline) {
			return agents.StatusCard{}, fmt.Errorf("inspect: %w: no status card showed within %s", termapi.ErrRefused, inspectCardTimeout)
		}
		select {
		case <-ctx.Done():
			return agents.StatusCard{}, ctx.Err()
		case <-time.After(inspectPollInterval):
		}
	}
}

// restoreComposer closes the card (the agent's dismiss keys, then Escape
// once more if needed) and waits for an idle, empty composer. It returns
// cause, or an error saying the pane was left in another state.
func restoreComposer(ctx context.Context, terms Terminals, a agents.Agent, in agents.Inspector, p agents.Pane, cause error) error {
	idle := func() bool {
		deadline := time.Now().Add(inspectIdleTimeout)
		for {
			if text, err := terms.Capture(ctx, p); err == nil {
				sc := a.Screen(text)
				if _, card := in.ParseStatus(text); sc.Activity == "idle" && sc.ComposerEmpty && !sc.Dialog && (len(in.DismissKeys()) == 0 || !card) {
					return true
				}
			}
			if time.Now().After(deadline) {
				return false
			}
			select {
			case <-ctx.Done():
				return false
			case <-time.After(inspectPollInterval):
			}
		}
	}
	if keys := in.DismissKeys(); len(keys) > 0 {
		_ = terms.SendKeys(ctx, p, keys...)
	}
	if idle() {
		return cause
	}
	// A draft left behind (the command never ran): Escape, then clear
	// the line.
	_ = terms.SendKeys(ctx, p, "Escape")
	if idle() {
		return cause
	}
	_ = terms.SendKeys(ctx, p, "C-u")
	if idle() {
		return cause
	}
	err := fmt.Errorf("inspect: %w: the pane did not return to an idle, empty composer after %s; look at it before sending", termapi.ErrRefused, statusCommand)
	if cause != nil {
		return errors.Join(cause, err)
	}
	return err
}

// waitCommandDraft is waitDraft for the slash command cmd. The agents draw
// their slash-command menu over the composer meanwhile, so a composer line
// holding exactly cmd counts too.
func (s *Service) waitCommandDraft(ctx context.Context, a agents.Agent, p agents.Pane, cmd string) bool {
	return waitDraft(ctx, s.o.Terminals, s.o.DraftTimeout, p, func(screen string) bool {
		return a.DraftVisible(screen, cmd) || commandDraftShown(screen, cmd)
	})
}

// commandDraftShown reports a composer line holding exactly the slash
// command cmd (Codex "› /status", Claude Code "❯ /status"); a menu row
// also names the command's description, so it never matches.
func commandDraftShown(screen, cmd string) bool {
	cmd = strings.Join(strings.Fields(cmd), " ")
	for _, l := range strings.Split(screen, "\n") {
		t := strings.Join(strings.Fields(strings.ReplaceAll(l, "\u00a0", " ")), " ")
		if t == "› "+cmd || t == "❯ "+cmd {
			return true
		}
	}
	return false
}
