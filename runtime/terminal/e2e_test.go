package terminal

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/executor/contract"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	iterm "github.com/clawconnect/clawconnect/internal/terminal"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
	"github.com/clawconnect/clawconnect/runtime/internal/fakecli"
	"github.com/clawconnect/clawconnect/termapi"
)

// patient retries a Start the pane refuses because it is still busy with
// the previous case's Turn (an aborted Turn settles in the TUI a moment
// after the stream ended), for at most a minute.
type patient struct{ *Adapter }

func (p patient) Start(ctx context.Context, task executor.Task, opts executor.StartOptions) (*executor.RunHandle, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		h, err := p.Adapter.Start(ctx, task, opts)
		if err == nil || !errors.Is(err, termapi.ErrRefused) {
			return h, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// turnService is a Turn service over a private tmux server and a SQLite
// store, with its monitor host running until the test ends.
func turnService(t *testing.T, socket string) *iterm.Service {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	terms, err := iterm.NewTmuxTerminals(tmux.Options{Sockets: []string{socket}, NoDefaultServer: true})
	if err != nil {
		t.Fatal(err)
	}
	svc := iterm.NewService(iterm.Options{Store: st, Terminals: terms, Agents: iterm.DefaultAgents()})
	host := hostpkg.New(svc, hostpkg.Options{Store: st})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = host.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = st.Close()
	})
	return svc
}

// sendablePane waits until the TUI's pane is listed with a send action in
// two listings in a row (Codex's launcher hands over to its native binary)
// and returns its terminal id.
func sendablePane(t *testing.T, svc *iterm.Service) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	prev := ""
	for {
		res, err := svc.List(ctx)
		if err == nil && len(res.Terminals) == 1 && len(res.Terminals[0].AvailableActions) > 0 {
			if id := res.Terminals[0].ID; id == prev {
				return id
			} else {
				prev = id
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no sendable pane listed: %+v, %v", res, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func runContract(t *testing.T, kind realcli.Kind, id executor.RuntimeID) {
	peers.RequireE2E(t)
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, kind, model, realtui.Options{Width: 200, Height: 50})
	svc := turnService(t, tui.Socket)
	pane := sendablePane(t, svc)
	contract.RunAdapterContract(t, fakecli.RealHarness(fakecli.RealHarnessConfig{
		Label:   string(id) + " real TUI",
		WorkDir: tui.CLI.WorkDir,
		New: func(t *testing.T, logger *slog.Logger) executor.RuntimeAdapter {
			return patient{New(Options{ID: id, Turns: svc, TerminalID: pane, Logger: logger})}
		},
	}))
}

// TestContractCodexTmux runs the contract suite against the real Codex TUI
// in a private tmux server, talking to the fake model (CLAWCONNECT_E2E=1).
func TestContractCodexTmux(t *testing.T) { runContract(t, realcli.Codex, IDCodex) }

// TestContractClaudeCodeTmux runs the contract suite against the real
// Claude Code TUI (CLAWCONNECT_E2E=1).
func TestContractClaudeCodeTmux(t *testing.T) { runContract(t, realcli.ClaudeCode, IDClaudeCode) }
