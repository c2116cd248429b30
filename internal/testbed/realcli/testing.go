package realcli

import (
	"context"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
)

// Require skips unless CLAWCONNECT_E2E=1, then prepares the CLI against
// model in a test temporary directory (installing it if needed) and closes
// it when the test ends. It fails the test on any error.
func Require(tb testing.TB, kind Kind, model *fakemodel.Server) *CLI {
	tb.Helper()
	peers.RequireE2E(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c, err := Prepare(ctx, kind, Options{ModelServer: model, Dir: tb.TempDir()})
	if err != nil {
		tb.Fatalf("prepare %s: %v", kind, err)
	}
	tb.Cleanup(func() {
		if err := c.Close(); err != nil {
			tb.Errorf("close %s: %v", kind, err)
		}
	})
	return c
}
