package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/server"
)

// terminalToolsOn reports whether the MCP terminal tools are enabled, by
// the flag or CLAWCONNECT_TERMINAL_TOOLS.
func terminalToolsOn(env Env, flag bool) bool {
	return flag || settingsOf(env).TerminalTools
}

// lazyTerminals is the Turn service behind the MCP terminal tools of a
// stdio server, resolved at the first call: the monitor host listening on
// the terminal socket (serve or terminal daemon), else a Service with its
// own host over the store the stdio server opened. It implements
// server.Terminals; close stops the host it started.
type lazyTerminals struct {
	env    Env
	logger *slog.Logger
	ctx    context.Context
	// shared waits for the store of the task backend.
	shared func(ctx context.Context) (any, error)

	mu     sync.Mutex
	api    terminalAPI
	cancel context.CancelFunc
	done   chan struct{}
}

var _ server.Terminals = (*lazyTerminals)(nil)

func (l *lazyTerminals) get(ctx context.Context) (terminalAPI, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.api != nil {
		return l.api, nil
	}
	if c, err := terminal.Dial(terminalSocket(l.env)); err == nil {
		l.api = c
		return c, nil
	}
	sh, err := l.shared(ctx)
	if err != nil {
		return nil, fmt.Errorf("terminal turns are unavailable: %w", err)
	}
	st, ok := sh.(store.TerminalStore)
	if !ok {
		return nil, errors.New("terminal turns are unavailable: this server does not own the store; start `clawconnect terminal daemon` and call again")
	}
	svc, c, err := newTerminalService(l.env, st, l.logger)
	if err != nil {
		return nil, fmt.Errorf("terminal turns are unavailable: %w", err)
	}
	hctx, cancel := context.WithCancel(l.ctx)
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		if err := runTerminalHost(hctx, l.env, st, svc, c); err != nil && hctx.Err() == nil {
			l.logger.Warn("terminal monitor host stopped", "err", err)
		}
	}()
	l.api = svc
	return svc, nil
}

// close stops the monitor host started by get, if any. It is idempotent.
func (l *lazyTerminals) close() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel = nil
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (l *lazyTerminals) List(ctx context.Context) (terminal.ListResult, error) {
	a, err := l.get(ctx)
	if err != nil {
		return terminal.ListResult{}, err
	}
	return a.List(ctx)
}

func (l *lazyTerminals) Send(ctx context.Context, r terminal.SendRequest) (terminal.SendResult, error) {
	a, err := l.get(ctx)
	if err != nil {
		return terminal.SendResult{}, err
	}
	return a.Send(ctx, r)
}

func (l *lazyTerminals) Wait(ctx context.Context, id string) (terminal.TurnView, error) {
	a, err := l.get(ctx)
	if err != nil {
		return terminal.TurnView{}, err
	}
	return a.Wait(ctx, id)
}

func (l *lazyTerminals) Status(ctx context.Context, id string) (terminal.TurnView, error) {
	a, err := l.get(ctx)
	if err != nil {
		return terminal.TurnView{}, err
	}
	return a.Status(ctx, id)
}

func (l *lazyTerminals) Respond(ctx context.Context, id, text string) (terminal.SendResult, error) {
	a, err := l.get(ctx)
	if err != nil {
		return terminal.SendResult{}, err
	}
	return a.Respond(ctx, id, text)
}

func (l *lazyTerminals) Approve(ctx context.Context, id, fp string) (terminal.TurnView, error) {
	a, err := l.get(ctx)
	if err != nil {
		return terminal.TurnView{}, err
	}
	return a.Approve(ctx, id, fp)
}

func (l *lazyTerminals) Cancel(ctx context.Context, id string) (terminal.TurnView, error) {
	a, err := l.get(ctx)
	if err != nil {
		return terminal.TurnView{}, err
	}
	return a.Cancel(ctx, id)
}
