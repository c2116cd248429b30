package openclaw

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/testbed/peers"
)

// TestNodeTests runs the plugin's own tests (callback validation, keys,
// plan, tool schemas) with node's built-in runner. It needs Node 24 from the
// installed peers (CLAWCONNECT_E2E=1 installs them).
func TestNodeTests(t *testing.T) {
	in, err := peers.NewInstaller(peers.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("CLAWCONNECT_E2E") == "1" {
		if err := in.Ensure(t.Context(), peers.Node); err != nil {
			t.Fatal(err)
		}
	}
	node, err := in.Command(peers.Node)
	if err != nil {
		t.Skipf("node is not installed (CLAWCONNECT_E2E=1 installs it): %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(srcDir(), "test", "*.test.mjs"))
	if len(files) == 0 {
		t.Fatal("no plugin tests found")
	}
	cmd := node.Cmd(t.Context(), append([]string{"--test", "--test-reporter=spec"}, files...)...)
	cmd.Dir = srcDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "fail 0") {
		t.Fatalf("node --test did not report fail 0:\n%s", out)
	}
}
