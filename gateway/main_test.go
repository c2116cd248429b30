package gateway_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
	"go.uber.org/goleak"
)

// TestMain runs the tests, stops the shared real gateway (started only by
// the e2e tests, when CLAWCONNECT_E2E=1) and then checks for goroutine leaks.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := realgateway.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stop shared real gateway:", err)
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
