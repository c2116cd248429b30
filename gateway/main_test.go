package gateway_test

import (
	"testing"

	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
)

// TestMain runs the tests, stops the shared real gateway (started only by
// the e2e tests, when CLAWCONNECT_E2E=1) and then checks for goroutine leaks.
func TestMain(m *testing.M) { realgateway.Main(m) }
