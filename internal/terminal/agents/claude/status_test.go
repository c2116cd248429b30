package claude_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
)

func TestParseStatusCard(t *testing.T) {
	t.Parallel()
	claudeScreen := readGolden(t, filepath.Join("testdata", "inspect"), "claude-code-status.txt")
	tests := []struct {
		name   string
		screen string
		want   agents.StatusCard
		ok     bool
	}{
		{"claude 2.1.332 status tab", claudeScreen, agents.StatusCard{
			Version: "2.1.332", Model: "fake-model", SessionID: "b19a4240-e8c7-41f5-8fb5-fd5e9714f326", Workspace: "/srv/project",
			Fields: map[string]string{
				"Version": "2.1.332", "Session name": "/rename to add a name", "Session ID": "b19a4240-e8c7-41f5-8fb5-fd5e9714f326",
				"Session kind": "interactive", "cwd": "/srv/project", "Model": "fake-model", "Setting sources": "User settings",
				"Managed settings (remote)": "not fetched — not available with a custom ANTHROPIC_BASE_URL",
				"Organization policy":       "not fetched with a custom ANTHROPIC_BASE_URL", "Auto mode server": "Enabled",
				"Features": "some aren't available while CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC is set, such as /advisor, /artifact-diagramming, /design, /design-login, /design-sync, /import,",
			}}, true},
		{"claude closed dialog is no card", readGolden(t, filepath.Join("testdata", "inspect"), "claude-code-after.txt"), agents.StatusCard{}, false},
		{"claude slash menu is no card", readGolden(t, filepath.Join("testdata", "inspect"), "claude-code-draft.txt"), agents.StatusCard{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := claude.Agent{}.ParseStatus(tc.screen)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%+v)", ok, tc.ok, got)
			}
			if !ok {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("card (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusCardHidesCredentialsAndRedacts(t *testing.T) {
	t.Parallel()
	screen := readGolden(t, filepath.Join("testdata", "inspect"), "claude-code-status.txt")
	screen = strings.Replace(screen, "Session kind:               interactive", "Session kind:               OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv", 1)
	card, ok := claude.Agent{}.ParseStatus(screen)
	if !ok {
		t.Fatal("card not parsed")
	}
	for _, hidden := range []string{"Auth token", "API key", "Anthropic base URL", "Peer address"} {
		if v, ok := card.Fields[hidden]; ok {
			t.Errorf("field %q = %q is returned", hidden, v)
		}
	}
	if v := card.Fields["Session kind"]; strings.Contains(v, "sk-abcdefghijklmnopqrstuv") {
		t.Errorf("secret not redacted: %q", v)
	}
}

func TestStatusCardHidesPasswordsSecretsAndCookies(t *testing.T) {
	t.Parallel()
	screen := readGolden(t, filepath.Join("testdata", "inspect"), "claude-code-status.txt")
	screen = strings.Replace(screen, "Session kind:               interactive", "Session kind:               interactive\n"+
		"Proxy password:             hunter2-proxy\n"+
		"Client secret:              hunter2-client\n"+
		"Credentials:                hunter2-creds\n"+
		"Cookie:                     hunter2-cookie\n"+
		"Proxy:                      http://ana:hunter2-url@proxy.internal:3128", 1)
	card, ok := claude.Agent{}.ParseStatus(screen)
	if !ok {
		t.Fatal("card not parsed")
	}
	for name, v := range card.Fields {
		if strings.Contains(v, "hunter2") {
			t.Errorf("field %q = %q shows a credential", name, v)
		}
	}
	if _, ok := card.Fields["Proxy"]; !ok {
		t.Errorf("the proxy row (credentials redacted) is missing: %v", card.Fields)
	}
}

func FuzzParseStatusCard(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "inspect", "claude-code-status.txt"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Fuzz(func(t *testing.T, screen string) {
		if c, ok := (claude.Agent{}).ParseStatus(screen); ok && (c.Version == "" || !agents.ValidThreadID(c.SessionID)) {
			t.Fatalf("accepted a card without version or session id: %+v", c)
		}
	})
}
