package realtui

import (
	"context"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
)

// Require skips unless CLAWCONNECT_E2E=1, then prepares the CLI against
// model (realcli.Require), starts its TUI with opts, waits until it is
// ready, and stops it when the test ends. It fails the test on any error.
func Require(tb testing.TB, kind realcli.Kind, model *fakemodel.Server, opts Options) *TUI {
	tb.Helper()
	cli := realcli.Require(tb, kind, model)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tui, err := Start(ctx, cli, opts)
	if err != nil {
		tb.Fatalf("start %s TUI: %v", kind, err)
	}
	tb.Cleanup(func() {
		if err := tui.Close(); err != nil {
			tb.Errorf("close %s TUI: %v", kind, err)
		}
	})
	if _, err := tui.WaitReady(ctx); err != nil {
		tb.Fatalf("%s TUI not ready: %v", kind, err)
	}
	return tui
}

// MustWait is WaitFor with a timeout, failing the test when it expires.
func (t *TUI) MustWait(tb testing.TB, timeout time.Duration, what string, match func(string) bool) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := t.WaitFor(ctx, what, match)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
