package codex_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
)

func TestParseStatusCard(t *testing.T) {
	t.Parallel()
	codexScreen := readGolden(t, filepath.Join("testdata", "inspect"), "codex-status.txt")
	tests := []struct {
		name   string
		screen string
		want   agents.StatusCard
		ok     bool
	}{
		{"codex 0.171.0 card", codexScreen, agents.StatusCard{
			Version: "0.171.0", Model: "fake-model", SessionID: "01a232b5-ad6c-73c0-915d-ea5015aac435", Workspace: "/srv/project",
			Fields: map[string]string{
				"Model": "fake-model (reasoning none, summaries auto)", "Model provider": "fake", "Directory": "/srv/project",
				"Permissions": "Workspace (Ask for approval)", "Agents.md": "<none>", "Collaboration mode": "Default",
				"Session": "01a232b5-ad6c-73c0-915d-ea5015aac435", "Token usage": "0 total (0 input + 0 output)", "Limits": "data not available yet",
			}}, true},
		{"codex draft is no card", readGolden(t, filepath.Join("testdata", "inspect"), "codex-draft.txt"), agents.StatusCard{}, false},
		{"a codex card without a session id", strings.Replace(codexScreen, "01a232b5-ad6c-73c0-915d-ea5015aac435", "unknown", 1), agents.StatusCard{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := codex.Agent{}.ParseStatus(tc.screen)
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

func FuzzParseStatusCard(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "inspect", "codex-status.txt"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Fuzz(func(t *testing.T, screen string) {
		if c, ok := (codex.Agent{}).ParseStatus(screen); ok && (c.Version == "" || !agents.ValidThreadID(c.SessionID)) {
			t.Fatalf("accepted a card without version or session id: %+v", c)
		}
	})
}
