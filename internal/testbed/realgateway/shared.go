package realgateway

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"go.uber.org/goleak"
)

// shared is the one gateway of a test binary. This is the package's only
// mutable global, by design: a gateway costs 1.5 GB and 20 s, so every test
// in a binary shares one.
var shared struct {
	mu  sync.Mutex
	gw  *Gateway
	err error // a failed start is not retried: every later test fails fast
}

// sharedStartTimeout bounds the install plus the start of the shared gateway.
const sharedStartTimeout = 20 * time.Minute

// Shared skips the test unless CLAWCONNECT_E2E=1, then returns the test
// binary's one gateway, starting it on first use (installing OpenClaw if
// needed). It fails the test if the gateway cannot start. Stop it from
// TestMain with StopShared (or use Main). Tests that Restart it must not run
// in parallel with other tests that use it.
func Shared(tb testing.TB) *Gateway {
	tb.Helper()
	peers.RequireE2E(tb)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.gw == nil && shared.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), sharedStartTimeout)
		defer cancel()
		shared.gw, shared.err = Start(ctx, Options{})
		if shared.err == nil {
			tb.Logf("real gateway ready at %s in %v (dir %s)", shared.gw.URL(), shared.gw.StartDuration().Round(time.Millisecond), shared.gw.Dir())
		}
	}
	if shared.err != nil {
		tb.Fatalf("start the shared real gateway: %v", shared.err)
	}
	return shared.gw
}

// StopShared stops and removes the shared gateway if one was started. Call
// it from TestMain after m.Run; it is idempotent.
func StopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	gw := shared.gw
	shared.gw, shared.err = nil, nil
	if gw == nil {
		return nil
	}
	return gw.Close()
}

// Main is the TestMain of a package whose tests may use Shared: it runs
// the tests, stops the shared gateway, then checks that no goroutine
// leaked, and exits with the outcome. A failure to stop the
// gateway or a leak fails the run.
//
//	func TestMain(m *testing.M) { realgateway.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "realgateway: stop shared gateway:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
