package dashboard_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (an event
// stream or its change-feed watches that outlive the request).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
