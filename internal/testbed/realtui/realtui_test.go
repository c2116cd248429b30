package realtui

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGolden(t *testing.T) {
	t.Parallel()
	g := &Golden{Dir: filepath.Join(t.TempDir(), "td"), Replace: [][2]string{{"/tmp/Test123/001", "/tmp/golden"}, {"-tmp-Test123-001", "-tmp-golden"}}}
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, []byte("cwd /tmp/Test123/001/work in -tmp-Test123-001-work\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := g.CopyFile("out.txt", src)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(g.Dir, "out.txt"))
	if want := "cwd /tmp/golden/work in -tmp-golden-work\n"; string(data) != want || n != len(want) {
		t.Errorf("wrote %q (%d), want %q", data, n, want)
	}
}

func TestIdle(t *testing.T) {
	t.Parallel()
	codex := &TUI{CLI: &realcli.CLI{Kind: realcli.Codex}}
	claude := &TUI{CLI: &realcli.CLI{Kind: realcli.ClaudeCode}}
	tests := []struct {
		tui    *TUI
		screen string
		want   bool
	}{
		{codex, "› say hi\n\n• FAKE-REPLY\n\n› Ask Codex to do anything\n\n  ? for shortcuts\n", true},
		{codex, "› say hi\n\n  ? for shortcuts\n", false},
		{codex, "• Working (0s • esc to interrupt)\n› Ask Codex to do anything\n", false},
		{claude, "───\n❯ \n───\n  ⏸ manual mode on\n", true},
		{claude, "───\n❯ draft\n───\n", false},
		{claude, "───\n❯ \n───\n  esc to interrupt\n", false},
	}
	for _, tt := range tests {
		if got := tt.tui.Idle(tt.screen); got != tt.want {
			t.Errorf("%s Idle(%q) = %v, want %v", tt.tui.CLI.Kind, tt.screen, got, tt.want)
		}
	}
}

// TestCodexLifecycle starts the real Codex TUI, submits a prompt (text,
// then Enter apart), and checks that Close leaves nothing running.
func TestCodexLifecycle(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	cli := realcli.Require(t, realcli.Codex, model)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	tui, err := Start(ctx, cli, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tui.Close()
	if _, err := tui.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	pid, err := tui.AgentPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := tui.Submit(ctx, "hello ECHO=lifecycle-ok"); err != nil {
		t.Fatal(err)
	}
	if _, err := tui.WaitFor(ctx, "the reply", func(s string) bool { return strings.Contains(s, "• lifecycle-ok") && tui.Idle(s) }); err != nil {
		t.Fatal(err)
	}
	files, err := tui.SessionFiles()
	if err != nil || len(files) != 1 {
		t.Fatalf("session files %v, %v", files, err)
	}
	open, err := OpenFiles(pid)
	if err != nil {
		t.Fatal(err)
	}
	held := false
	for _, f := range open {
		held = held || f.Path == files[0]
	}
	if !held {
		t.Errorf("codex pid %d does not hold its rollout %s open", pid, files[0])
	}
	if err := tui.Close(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) {
		t.Errorf("codex pid %d still runs after Close", pid)
	}
	if _, err := os.Stat(tui.Socket); !os.IsNotExist(err) {
		t.Errorf("socket %s left behind: %v", tui.Socket, err)
	}
	if _, err := os.Stat(filepath.Join(tui.CodexHome(), "app-server-daemon")); !os.IsNotExist(err) {
		t.Errorf("codex started its app-server daemon: %v", err)
	}
}

// TestCloseStopsAnUnreachableServer: a tmux server whose socket was
// removed before Close (kill-server cannot reach it) and that another
// window keeps up is stopped by its pid; nothing the TUI started runs
// after Close.
func TestCloseStopsAnUnreachableServer(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	cli := realcli.Require(t, realcli.Codex, model)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	tui, err := Start(ctx, cli, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tui.Close()
	if _, err := tui.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// A second window outlives the agent's pane, as a window a test or a
	// supervisor opened would.
	if _, err := tui.tmux(ctx, "new-window", "-d", "sleep 600"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(tui.Socket); err != nil {
		t.Fatal(err)
	}
	server := tui.ServerPID
	if err := tui.Close(); err != nil {
		t.Fatal(err)
	}
	if left := tui.Leftovers(); len(left) > 0 {
		t.Fatalf("after Close these processes still run: %v (tmux server %d)", left, server)
	}
}

// TestClaudeTrustDialog starts Claude Code in a folder it was not told to
// trust: WaitReady must answer the trust dialog and reach the composer.
func TestClaudeTrustDialog(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	cli := realcli.Require(t, realcli.ClaudeCode, model)
	state := filepath.Join(cli.Home, ".claude.json")
	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	untrusted := strings.Replace(string(data), `"hasTrustDialogAccepted": true`, `"hasTrustDialogAccepted": false`, 1)
	if untrusted == string(data) {
		t.Fatalf("no trust entry in %s", data)
	}
	if err := os.WriteFile(state, []byte(untrusted), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	tui, err := Start(ctx, cli, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tui.Close()
	if _, err := tui.WaitFor(ctx, "the trust dialog", func(s string) bool { return strings.Contains(s, "Yes, I trust this folder") }); err != nil {
		t.Fatal(err)
	}
	if _, err := tui.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(state)
	if !strings.Contains(string(data), `"hasTrustDialogAccepted": true`) {
		t.Errorf("accepting the dialog did not record the trust:\n%s", data)
	}
}

// TestCodexTrustDialog starts Codex in a git repository it was not told to
// trust: WaitReady must answer the folder-trust dialog.
func TestCodexTrustDialog(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	cli := realcli.Require(t, realcli.Codex, model)
	if out, err := exec.Command("git", "init", "-q", cli.WorkDir).CombinedOutput(); err != nil {
		t.Skipf("git init: %v: %s", err, out)
	}
	config := filepath.Join(cli.Home, ".codex", "config.toml")
	data, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), "[projects.")
	if i < 0 {
		t.Fatalf("no trust entry in\n%s", data)
	}
	if err := os.WriteFile(config, data[:i], 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	tui, err := Start(ctx, cli, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tui.Close()
	if _, err := tui.WaitFor(ctx, "the trust dialog", func(s string) bool { return strings.Contains(s, "Trust this folder?") }); err != nil {
		t.Fatal(err)
	}
	if _, err := tui.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(config)
	if !strings.Contains(string(data), "trust_level") {
		t.Errorf("accepting the dialog did not record the trust:\n%s", data)
	}
}
