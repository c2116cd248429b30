package executor

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDoesNotImportTesting keeps the package cheap to import: hosts link it
// into their binaries, and the testing package must stay out of them.
func TestDoesNotImportTesting(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list printed no dependencies")
	}
	for _, d := range deps {
		if d == "testing" || strings.HasPrefix(d, "testing/") {
			t.Errorf("executor depends on %s", d)
		}
	}
}
