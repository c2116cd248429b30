package oneshot

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/settings"
)

func TestScrubEnv(t *testing.T) {
	t.Parallel()
	in := []string{
		"PATH=/bin", "HOME=/h", "CODEX_HOME=/c", "ANTHROPIC_API_KEY=a", "OPENAI_API_KEY=o",
		"OPENCLAW_PASSWORD=x", "OPENCLAW_GATEWAY_TOKEN=x", "OPENCLAW_URL=ws://127.0.0.1:1",
		"MCP_USER_TOKENS=x", "MCP_USER_TOKENS_FILE=/t", "PUBLIC_MCP_PASS=x",
		"CLAWCONNECT_HTTP_TOKEN=x", "CLAWCONNECT_GATEWAY_HEADERS=x", "CLAWCONNECT_SECRET=x", "CLAWCONNECT_TIMEOUT_MS=5",
		"HOME=/h2",
	}
	got := ScrubEnv(in, []string{"OPENAI_API_KEY=granted", "PUBLIC_MCP_PASS=explicitly-granted"})
	want := []string{
		"PATH=/bin", "HOME=/h2", "CODEX_HOME=/c", "ANTHROPIC_API_KEY=a", "OPENAI_API_KEY=granted",
		"OPENCLAW_URL=ws://127.0.0.1:1", "CLAWCONNECT_TIMEOUT_MS=5", "PUBLIC_MCP_PASS=explicitly-granted",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ScrubEnv (-want +got):\n%s", diff)
	}
}

func TestLookPath(t *testing.T) {
	t.Parallel()
	if _, err := LookPath("sh", []string{"PATH=/nonexistent:/bin:/usr/bin"}); err != nil {
		t.Errorf("LookPath(sh) = %v", err)
	}
	if _, err := LookPath("sh", nil); err == nil {
		t.Error("LookPath without PATH found sh")
	}
	if _, err := LookPath(t.TempDir(), nil); err == nil {
		t.Error("LookPath accepted a directory")
	}
}

// TestEverySecretSettingIsScrubbed: each variable the settings registry
// marks secret is kept from a runtime process.
func TestEverySecretSettingIsScrubbed(t *testing.T) {
	t.Parallel()
	for _, s := range settings.All() {
		if s.Secret && !IsOwnSecret(s.Name) {
			t.Errorf("%s is a secret setting but a runtime would inherit it", s.Name)
		}
	}
}
