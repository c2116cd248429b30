package terminal

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its test: the host's
// followers, the outbox, watches, fswatch and socket servers all have an
// owner that must stop them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
