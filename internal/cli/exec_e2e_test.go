package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
)

// TestExecRealCLIs runs `clawconnect exec` against the real Claude Code and
// Codex CLIs talking to the fake model server (CLAWCONNECT_E2E=1), with the
// environment passed as main passes it (Env.Environ). Codex's provider reads
// its key from a custom variable (env_key = "FAKE_API_KEY"), which must reach
// it without CLAWCONNECT_EXEC_PASSENV.
func TestExecRealCLIs(t *testing.T) {
	peers.RequireE2E(t)
	for _, kind := range []realcli.Kind{realcli.ClaudeCode, realcli.Codex} {
		t.Run(string(kind), func(t *testing.T) {
			model := fakemodel.New(t, fakemodel.Options{})
			cli := realcli.Require(t, kind, model)
			bin := cli.Path
			if len(cli.Args) > 0 { // node + script: run the script's bin shim instead
				bin = cli.Args[0]
			}
			environ := append(append([]string(nil), cli.Env...), "CLAWCONNECT_CLAUDE_BIN="+bin, "CLAWCONNECT_CODEX_BIN="+bin)
			var out bytes.Buffer
			stderr, err := runExecEnviron(t.Context(), t, environ, &out, "--runtime", string(kind), "--cwd", cli.WorkDir, "ECHO=exec-e2e-ok")
			if err != nil {
				t.Fatalf("exec: %v\nstderr:\n%s", err, stderr)
			}
			if strings.TrimSpace(out.String()) != "exec-e2e-ok" {
				t.Errorf("stdout = %q, want the echoed token", out.String())
			}
			if !strings.Contains(stderr, "done: success") {
				t.Errorf("stderr lacks the done line:\n%s", stderr)
			}
		})
	}
}
