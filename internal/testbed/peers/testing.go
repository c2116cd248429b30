package peers

import (
	"context"
	"os"
	"testing"
	"time"
)

// E2EEnv is the environment variable that enables end-to-end tests.
const E2EEnv = "CLAWCONNECT_E2E"

// E2EEnabled reports whether CLAWCONNECT_E2E=1.
func E2EEnabled() bool { return os.Getenv(E2EEnv) == "1" }

// RequireE2E skips the test unless CLAWCONNECT_E2E=1.
func RequireE2E(tb testing.TB) {
	tb.Helper()
	if !E2EEnabled() {
		tb.Skipf("end-to-end test: set %s=1 to run it against the real peers (./scripts/test.sh does)", E2EEnv)
	}
}

// installTimeout bounds Require's installs (a cold cache takes about two
// minutes for everything on the reference machine).
const installTimeout = 20 * time.Minute

// Require skips unless CLAWCONNECT_E2E=1, then installs the listed peers
// into the default cache (reusing what is there) and returns the Installer.
// It fails the test if an install fails.
func Require(tb testing.TB, ids ...ID) *Installer {
	tb.Helper()
	RequireE2E(tb)
	in, err := NewInstaller(Options{})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	if err := in.Ensure(ctx, ids...); err != nil {
		tb.Fatalf("install peers %v: %v", ids, err)
	}
	return in
}

// MustCommand returns the peer's Command and fails the test if it is not
// installed.
func (in *Installer) MustCommand(tb testing.TB, id ID) Command {
	tb.Helper()
	c, err := in.Command(id)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
