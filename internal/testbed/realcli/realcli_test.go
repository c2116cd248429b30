package realcli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeInstaller returns an Installer over a temporary cache whose npm is a
// stand-in that creates each peer's entry point.
func fakeInstaller(t *testing.T) *peers.Installer {
	t.Helper()
	var b strings.Builder
	b.WriteString("#!/bin/sh\nspec=\"$(eval echo \\${$#})\"\ncase \"$spec\" in\n")
	for _, id := range peers.All() {
		s, _ := id.Spec()
		fmt.Fprintf(&b, "%s@%s) mkdir -p \"$(dirname '%s')\"; printf '#!/bin/sh\\necho v%s\\n' > '%s'; chmod +x '%s';;\n",
			s.Package, s.Version, s.Entry, s.Version, s.Entry, s.Entry)
	}
	b.WriteString("esac\n")
	npm := filepath.Join(t.TempDir(), "npm")
	if err := os.WriteFile(npm, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := peers.NewInstaller(peers.Options{CacheDir: t.TempDir(), NPM: npm})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestPrepareClaudeCode(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	dir := t.TempDir()
	c, err := Prepare(t.Context(), ClaudeCode, Options{ModelServer: model, Dir: dir, Installer: fakeInstaller(t), ExtraEnv: []string{"X=1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	env := envMap(c.Env)
	for k, want := range map[string]string{
		"HOME": filepath.Join(dir, "home"), "ANTHROPIC_BASE_URL": model.URL(), "ANTHROPIC_API_KEY": "dummy",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
		"IS_SANDBOX": "1", "X": "1",
	} {
		if env[k] != want {
			t.Errorf("env %s = %q, want %q", k, env[k], want)
		}
	}
	var state struct {
		HasCompletedOnboarding bool `json:"hasCompletedOnboarding"`
		CustomAPIKeyResponses  struct {
			Approved []string `json:"approved"`
		} `json:"customApiKeyResponses"`
		Projects map[string]struct {
			HasTrustDialogAccepted bool `json:"hasTrustDialogAccepted"`
		} `json:"projects"`
	}
	data, err := os.ReadFile(filepath.Join(c.Home, ".claude.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatal(err)
	}
	if !state.HasCompletedOnboarding || !slices.Contains(state.CustomAPIKeyResponses.Approved, "dummy") ||
		!state.Projects[c.WorkDir].HasTrustDialogAccepted {
		t.Errorf(".claude.json = %s", data)
	}
	if _, err := os.Stat(filepath.Join(c.Home, ".claude", "settings.json")); err != nil {
		t.Error(err)
	}
	want := []string{"-p", "hi", "--output-format", "stream-json", "--verbose", "--model", "fake-model"}
	if diff := cmp.Diff(want, c.PrintArgs("hi")); diff != "" {
		t.Errorf("PrintArgs (-want +got):\n%s", diff)
	}
	out, err := c.Command(t.Context(), "--version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "v2.1.332" {
		t.Errorf("fake claude --version = %q, %v", out, err)
	}
}

func TestPrepareCodex(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	c, err := Prepare(t.Context(), Codex, Options{ModelServer: model, Installer: fakeInstaller(t), Model: "m-x"})
	if err != nil {
		t.Fatal(err)
	}
	home := c.Home
	data, err := os.ReadFile(filepath.Join(home, ".codex", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`model = "m-x"`, `base_url = "` + model.OpenAIBaseURL() + `"`, `wire_api = "responses"`,
		`env_key = "FAKE_API_KEY"`, "daemon_auto_start = false", "check_for_update_on_startup = false",
		`[projects."` + c.WorkDir + `"]`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("config.toml lacks %s:\n%s", want, data)
		}
	}
	if env := envMap(c.Env); env["FAKE_API_KEY"] != "dummy" || env["CODEX_HOME"] != filepath.Join(home, ".codex") {
		t.Errorf("env = %v", c.Env)
	}
	if diff := cmp.Diff([]string{"exec", "--json", "--skip-git-repo-check", "go"}, c.PrintArgs("go")); diff != "" {
		t.Errorf("PrintArgs (-want +got):\n%s", diff)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Errorf("Close left the temporary dir: %v", err)
	}
}

func TestPrepareNeedsModel(t *testing.T) {
	if _, err := Prepare(t.Context(), Codex, Options{}); err == nil {
		t.Fatal("Prepare without a model server succeeded")
	}
	model := fakemodel.New(t, fakemodel.Options{})
	if _, err := Prepare(t.Context(), Kind("vim"), Options{ModelServer: model}); err == nil {
		t.Fatal("Prepare of an unknown CLI succeeded")
	}
}

func TestCloseKillsCodexDaemon(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	c, err := Prepare(t.Context(), Codex, Options{ModelServer: model, Dir: t.TempDir(), Installer: fakeInstaller(t)})
	if err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command("sleep", "300")
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	pidDir := filepath.Join(c.Home, ".codex", "app-server-daemon")
	if err := os.MkdirAll(pidDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pidDir, "daemon.pid"), fmt.Appendf(nil, `{"pid":%d}`, daemon.Process.Pid), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := daemon.Wait(); err == nil {
		t.Error("the daemon exited cleanly; want it killed")
	}
}

func TestShellCommand(t *testing.T) {
	c := &CLI{Path: "/bin/claude", Args: []string{"a b"}, Env: []string{"HOME=/h", "K=it's"}}
	want := `env -i HOME=/h 'K=it'\''s' /bin/claude 'a b' --model x`
	if got := c.ShellCommand("--model", "x"); got != want {
		t.Errorf("ShellCommand = %s, want %s", got, want)
	}
	out, err := exec.Command("sh", "-c", (&CLI{Path: "printenv", Env: []string{"K=it's here"}}).ShellCommand("K")).Output()
	if err != nil || string(out) != "it's here\n" {
		t.Errorf("the quoted command printed %q, %v", out, err)
	}
}

// jsonLines decodes each stdout line as a JSON object.
func jsonLines(t *testing.T, out []byte) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stdout line %q is not JSON: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines
}

// claudeResult is the "result" text of claude -p's result line.
func claudeResult(t *testing.T, out []byte) string {
	t.Helper()
	for _, l := range jsonLines(t, out) {
		if l["type"] == "result" {
			s, _ := l["result"].(string)
			return s
		}
	}
	t.Fatalf("no result line in:\n%s", out)
	return ""
}

// codexMessage is the last agent_message text of codex exec --json.
func codexMessage(t *testing.T, out []byte) string {
	t.Helper()
	text, done := "", false
	for _, l := range jsonLines(t, out) {
		item, _ := l["item"].(map[string]any)
		if l["type"] == "item.completed" && item["type"] == "agent_message" {
			text, _ = item["text"].(string)
		}
		done = done || l["type"] == "turn.completed"
	}
	if !done {
		t.Fatalf("no turn.completed line in:\n%s", out)
	}
	return text
}

func run(t *testing.T, c *CLI, prompt string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := c.Command(ctx, c.PrintArgs(prompt)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v\nstdout:\n%s\nstderr:\n%s", c.Kind, prompt, err, out, stderr.String())
	}
	t.Logf("%s run took %v", c.Kind, time.Since(start).Round(time.Millisecond))
	return out
}

func TestRealClaudeCode(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	c := Require(t, ClaudeCode, model)
	t.Run("text", func(t *testing.T) {
		if got := claudeResult(t, run(t, c, "say ECHO=claude-e2e-ok")); got != "claude-e2e-ok" {
			t.Errorf("result = %q, want claude-e2e-ok", got)
		}
		r := model.MustWaitRequest(t, time.Minute, fakemodel.PromptContains("ECHO=claude-e2e-ok"))
		if r.API != fakemodel.APIMessages || r.Header.Get("X-Api-Key") != APIKey {
			t.Errorf("model saw api=%s x-api-key=%q", r.API, r.Header.Get("X-Api-Key"))
		}
	})
	t.Run("tool call", func(t *testing.T) {
		got := claudeResult(t, run(t, c, "TOOLCALL: echo hi-from-claude-tool"))
		if want := fakemodel.ToolResultPrefix + "hi-from-claude-tool"; got != want {
			t.Errorf("result = %q, want %q", got, want)
		}
	})
}

func TestRealCodex(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	c := Require(t, Codex, model)
	t.Run("text", func(t *testing.T) {
		if got := codexMessage(t, run(t, c, "say ECHO=codex-e2e-ok")); got != "codex-e2e-ok" {
			t.Errorf("agent message = %q, want codex-e2e-ok", got)
		}
		r := model.MustWaitRequest(t, time.Minute, fakemodel.PromptContains("ECHO=codex-e2e-ok"))
		if r.API != fakemodel.APIResponses || r.Header.Get("Authorization") != "Bearer "+APIKey {
			t.Errorf("model saw api=%s authorization=%q", r.API, r.Header.Get("Authorization"))
		}
	})
	t.Run("tool call", func(t *testing.T) {
		got := codexMessage(t, run(t, c, "TOOLCALL: echo hi-from-codex-tool"))
		if want := fakemodel.ToolResultPrefix + "hi-from-codex-tool"; got != want {
			t.Errorf("agent message = %q, want %q", got, want)
		}
	})
	if _, err := os.Stat(filepath.Join(c.Home, ".codex", "app-server-daemon")); err == nil {
		t.Error("codex started its app-server daemon despite daemon_auto_start = false")
	}
}
