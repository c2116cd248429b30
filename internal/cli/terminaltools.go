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
	"github.com/clawconnect/clawconnect/termapi"
)

// terminalToolsOn reports whether the MCP terminal tools are enabled, by
// the flag or CLAWCONNECT_TERMINAL_TOOLS.
func terminalToolsOn(env Env, flag bool) bool {
	return flag || settingsOf(env).TerminalTools
}

// mcpHostsTerminals reports whether an mcp whose terminal tools are on
// (tools) runs a monitor host: yes unless CLAWCONNECT_MCP_TERMINAL_HOST is
// off.
func mcpHostsTerminals(env Env, tools bool) bool {
	return tools && settingsOf(env).MCPTerminalHost
}

// lazyTerminals is the Turn service behind the MCP terminal tools of a
// stdio server: a Service over the store the stdio server opens in the
// background, with a monitor host of its own (unless
// CLAWCONNECT_MCP_TERMINAL_HOST is off) started as soon as the store is
// open, so an mcp follows terminal work like any long-lived process. A
// call waits for the store. It implements server.Terminals; close stops
// the host.
type lazyTerminals struct {
	env    Env
	logger *slog.Logger
	ctx    context.Context
	// shared waits for the store of the task backend.
	shared func(ctx context.Context) (store.Store, error)
	// host runs a monitor host on the store.
	host bool

	mu   sync.Mutex
	svc  *terminal.Service
	stop func()
}

var _ server.Terminals = (*lazyTerminals)(nil)

func (l *lazyTerminals) get(ctx context.Context) (*terminal.Service, error) {
	sh, err := l.shared(ctx)
	if err != nil {
		return nil, fmt.Errorf("terminal turns are unavailable: %w", err)
	}
	return l.opened(sh)
}

// opened builds the Service over the opened store sh once, and starts its
// host; the stdio server's background open calls it, and so does the
// first tool call.
func (l *lazyTerminals) opened(st store.Store) (*terminal.Service, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.svc != nil {
		return l.svc, nil
	}
	if st == nil {
		return nil, errors.New("terminal turns are unavailable: this server opened no store of its own")
	}
	svc, c, err := newTerminalService(l.env, st, l.logger)
	if err != nil {
		return nil, fmt.Errorf("terminal turns are unavailable: %w", err)
	}
	l.svc = svc
	if l.host {
		l.stop = goTerminalHost(l.ctx, l.env, st, svc, c, "mcp", l.logger)
	}
	return svc, nil
}

// close stops the monitor host, if one runs. It is idempotent.
func (l *lazyTerminals) close() {
	l.mu.Lock()
	stop := l.stop
	l.stop = nil
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (l *lazyTerminals) List(ctx context.Context) (termapi.ListResult, error) {
	a, err := l.get(ctx)
	if err != nil {
		return termapi.ListResult{}, err
	}
	return a.List(ctx)
}

func (l *lazyTerminals) Send(ctx context.Context, r termapi.SendRequest) (termapi.SendResult, error) {
	a, err := l.get(ctx)
	if err != nil {
		return termapi.SendResult{}, err
	}
	return a.Send(ctx, r)
}

func (l *lazyTerminals) Wait(ctx context.Context, id string) (termapi.TurnView, error) {
	a, err := l.get(ctx)
	if err != nil {
		return termapi.TurnView{}, err
	}
	return a.Wait(ctx, id)
}

func (l *lazyTerminals) WaitFor(ctx context.Context, id string, done func(termapi.TurnView) bool) (termapi.TurnView, error) {
	a, err := l.get(ctx)
	if err != nil {
		return termapi.TurnView{}, err
	}
	return a.WaitFor(ctx, id, done)
}

func (l *lazyTerminals) Status(ctx context.Context, id string) (termapi.TurnView, error) {
	a, err := l.get(ctx)
	if err != nil {
		return termapi.TurnView{}, err
	}
	return a.Status(ctx, id)
}

func (l *lazyTerminals) Respond(ctx context.Context, id, text string) (termapi.SendResult, error) {
	a, err := l.get(ctx)
	if err != nil {
		return termapi.SendResult{}, err
	}
	return a.Respond(ctx, id, text)
}

func (l *lazyTerminals) Approve(ctx context.Context, id, fp string) (termapi.TurnView, error) {
	a, err := l.get(ctx)
	if err != nil {
		return termapi.TurnView{}, err
	}
	return a.Approve(ctx, id, fp)
}

func (l *lazyTerminals) Cancel(ctx context.Context, id string) (termapi.TurnView, error) {
	a, err := l.get(ctx)
	if err != nil {
		return termapi.TurnView{}, err
	}
	return a.Cancel(ctx, id)
}
