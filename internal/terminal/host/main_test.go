package host

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a goroutine outlives its test: the
// host's followers, its outbox and its file watcher all have an owner
// that must stop them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
