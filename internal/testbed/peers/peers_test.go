package peers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeNPM writes an npm stand-in that "installs" a spec (the last
// argument) by creating its entry point and its With packages, and logs every spec it installs to calls. With fail set it
// exits 1 instead.
func fakeNPM(t *testing.T, fail bool) (npm, calls string) {
	t.Helper()
	dir := t.TempDir()
	calls = filepath.Join(dir, "calls")
	var b strings.Builder
	b.WriteString("#!/bin/sh\nspec=\"$(eval echo \\${$#})\"\necho \"$spec\" >> '" + calls + "'\n")
	if fail {
		b.WriteString("echo 'npm ERR! boom' >&2\nexit 1\n")
	}
	b.WriteString("case \"$spec\" in\n")
	for id, s := range specs() {
		b.WriteString(fmt.Sprintf("%s@%s)\n  mkdir -p \"$(dirname '%s')\"\n", s.Package, s.Version, s.Entry))
		if id == Node {
			b.WriteString(fmt.Sprintf("  printf '#!/bin/sh\\necho v%s\\n' > '%s'; chmod +x '%s'\n", s.Version, s.Entry, s.Entry))
		} else {
			b.WriteString(fmt.Sprintf("  echo x > '%s'\n", s.Entry))
		}
		for _, w := range s.With {
			pj := filepath.Join("node_modules", withName(w), "package.json")
			b.WriteString(fmt.Sprintf("  mkdir -p \"$(dirname '%s')\"; echo x > '%s'\n", pj, pj))
		}
		b.WriteString("  ;;\n")
	}
	b.WriteString("*) echo \"unknown spec $spec\" >&2; exit 2;;\nesac\n")
	npm = filepath.Join(dir, "npm")
	if err := os.WriteFile(npm, []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	return npm, calls
}

func readCalls(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

func TestEnsureInstallsOnceAndReuses(t *testing.T) {
	npm, calls := fakeNPM(t, false)
	cache := t.TempDir()
	in, err := NewInstaller(Options{CacheDir: cache, NPM: npm})
	if err != nil {
		t.Fatal(err)
	}
	if in.Installed(Codex) {
		t.Fatal("Codex installed in an empty cache")
	}
	if err := in.Ensure(t.Context(), Codex, OpenClaw); err != nil {
		t.Fatal(err)
	}
	if err := in.Ensure(t.Context(), Codex, OpenClaw); err != nil {
		t.Fatal(err)
	}
	want := []string{"node@24.21.0", "@openai/codex@0.171.0", "openclaw@2026.9.6"}
	if diff := cmp.Diff(want, readCalls(t, calls)); diff != "" {
		t.Errorf("npm installs (-want +got):\n%s", diff)
	}
	if got, want := in.Dir(OpenClaw), filepath.Join(cache, "peers", "openclaw@2026.9.6"); got != want {
		t.Errorf("Dir = %q, want %q", got, want)
	}
	log, err := os.ReadFile(filepath.Join(in.Dir(Codex), "install.log"))
	if err != nil {
		t.Errorf("install.log: %v", err)
	}
	_ = log
}

func TestEnsureConcurrentInstallersInstallOnce(t *testing.T) {
	npm, calls := fakeNPM(t, false)
	cache := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			in, err := NewInstaller(Options{CacheDir: cache, NPM: npm})
			if err == nil {
				err = in.Ensure(context.Background(), All()...)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := readCalls(t, calls); len(got) != len(All()) {
		t.Errorf("npm ran %d times (%v), want once per peer (%d)", len(got), got, len(All()))
	}
}

func TestEnsureFailureLeavesNoMarker(t *testing.T) {
	npm, _ := fakeNPM(t, true)
	cache := t.TempDir()
	in, err := NewInstaller(Options{CacheDir: cache, NPM: npm})
	if err != nil {
		t.Fatal(err)
	}
	err = in.Ensure(t.Context(), Codex)
	if err == nil || !strings.Contains(err.Error(), "npm ERR! boom") {
		t.Fatalf("Ensure = %v, want the npm failure with its output", err)
	}
	if in.Installed(Node) {
		t.Error("a failed install is marked installed")
	}
	// A later run with a working npm retries.
	good, _ := fakeNPM(t, false)
	in2, _ := NewInstaller(Options{CacheDir: cache, NPM: good})
	if err := in2.Ensure(t.Context(), Codex); err != nil {
		t.Fatalf("retry: %v", err)
	}
}

func TestEnsureRejectsUnknownPeer(t *testing.T) {
	in, _ := NewInstaller(Options{CacheDir: t.TempDir(), NPM: "false"})
	if err := in.Ensure(t.Context(), ID("nope")); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("Ensure(nope) = %v, want ErrUnknownPeer", err)
	}
	if _, err := in.Command(ID("nope")); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("Command(nope) = %v, want ErrUnknownPeer", err)
	}
}

func TestCommand(t *testing.T) {
	npm, _ := fakeNPM(t, false)
	in, _ := NewInstaller(Options{CacheDir: t.TempDir(), NPM: npm})
	if _, err := in.Command(ClaudeCode); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Command before install = %v, want ErrNotInstalled", err)
	}
	if err := in.Ensure(t.Context(), All()...); err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(in.Dir(Node), "node_modules/node/bin/node")
	tests := []struct {
		id   ID
		path string
		args []string
	}{
		{Node, node, nil},
		{OpenClaw, node, []string{filepath.Join(in.Dir(OpenClaw), "node_modules/openclaw/openclaw.mjs")}},
		{ClaudeCode, filepath.Join(in.Dir(ClaudeCode), "node_modules/.bin/claude"), nil},
		{Codex, node, []string{filepath.Join(in.Dir(Codex), "node_modules/.bin/codex")}},
		{MCPSDK, node, nil},
		{MCPExtTasks, node, nil},
		{MCPExtApps, node, nil},
	}
	for _, tt := range tests {
		t.Run(string(tt.id), func(t *testing.T) {
			c, err := in.Command(tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.path, c.Path); diff != "" {
				t.Errorf("Path (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.args, c.Args); diff != "" {
				t.Errorf("Args (-want +got):\n%s", diff)
			}
			if len(c.Env) != 1 || !strings.HasPrefix(c.Env[0], "PATH="+filepath.Dir(node)+":") {
				t.Errorf("Env = %v, want the pinned node first on PATH", c.Env)
			}
		})
	}
	out, err := in.MustCommand(t, Node).Cmd(t.Context(), "--version").Output()
	if err != nil || strings.TrimSpace(string(out)) != "v24.21.0" {
		t.Errorf("node --version = %q, %v", out, err)
	}
}

func TestLockFileWaitsAndCancels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lock")
	unlock, err := lockFile(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := lockFile(ctx, path); !errors.Is(err, context.Canceled) {
		t.Errorf("lock while held with a cancelled ctx = %v, want context.Canceled", err)
	}
	got := make(chan error, 1)
	go func() {
		u, err := lockFile(context.Background(), path)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	if err := <-got; err != nil {
		t.Errorf("lock after release: %v", err)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("CLAWCONNECT_CACHE", "/x/cache")
	if d, _ := DefaultCacheDir(); d != "/x/cache" {
		t.Errorf("with CLAWCONNECT_CACHE: %q", d)
	}
	t.Setenv("CLAWCONNECT_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/x/xdg")
	if d, _ := DefaultCacheDir(); d != "/x/xdg/clawconnect" {
		t.Errorf("with XDG_CACHE_HOME: %q", d)
	}
}

func TestWithPath(t *testing.T) {
	got := withPath([]string{"A=1", "PATH=/usr/bin"}, "/n")
	if diff := cmp.Diff([]string{"A=1", "PATH=/n:/usr/bin"}, got); diff != "" {
		t.Errorf("withPath (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"PATH=/n"}, withPath(nil, "/n")); diff != "" {
		t.Errorf("withPath without PATH (-want +got):\n%s", diff)
	}
}

// TestRealPeers installs every pinned peer into the real cache (reusing it)
// and checks that each one runs at its pinned version.
func TestRealPeers(t *testing.T) {
	start := time.Now()
	in := Require(t, All()...)
	t.Logf("peers ready in %v under %s", time.Since(start).Round(time.Millisecond), in.Root())
	tests := []struct {
		id   ID
		args []string
		want string
	}{
		{Node, []string{"--version"}, "v24.21.0"},
		{OpenClaw, []string{"--version"}, "OpenClaw 2026.9.6"},
		{ClaudeCode, []string{"--version"}, "2.1.332"},
		{Codex, []string{"--version"}, "codex-cli 0.171.0"},
	}
	for _, tt := range tests {
		t.Run(string(tt.id), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := in.MustCommand(t, tt.id).Cmd(ctx, tt.args...)
			cmd.Env = append(cmd.Env, "HOME="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), tt.want) {
				t.Errorf("%s %v = %q, %v; want it to contain %q", tt.id, tt.args, out, err, tt.want)
			}
		})
	}
	t.Run("mcp-sdk", func(t *testing.T) {
		script := filepath.Join(in.Dir(MCPSDK), "probe-"+fmt.Sprint(os.Getpid())+".mjs")
		src := "import { Client } from '@modelcontextprotocol/sdk/client/index.js';\nconsole.log(typeof Client);\n"
		if err := os.WriteFile(script, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(script)
		out, err := in.MustCommand(t, MCPSDK).Cmd(t.Context(), script).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "function" {
			t.Errorf("importing the MCP SDK printed %q, %v", out, err)
		}
	})
	t.Run("mcp-inspector", func(t *testing.T) {
		if _, err := exec.LookPath(in.MustCommand(t, MCPInspector).Args[0]); err != nil {
			t.Errorf("inspector entry: %v", err)
		}
	})
}

// TestInstalledNeedsWithPackages: a peer whose extra packages went missing
// (an older install without them) is installed again.
func TestInstalledNeedsWithPackages(t *testing.T) {
	npm, calls := fakeNPM(t, false)
	in, _ := NewInstaller(Options{CacheDir: t.TempDir(), NPM: npm})
	if err := in.Ensure(t.Context(), MCPExtTasks); err != nil {
		t.Fatal(err)
	}
	s, _ := MCPExtTasks.Spec()
	if err := os.RemoveAll(filepath.Join(in.NodeModules(MCPExtTasks), withName(s.With[0]))); err != nil {
		t.Fatal(err)
	}
	if in.Installed(MCPExtTasks) {
		t.Fatal("Installed with a With package missing")
	}
	if err := in.Ensure(t.Context(), MCPExtTasks); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(readCalls(t, calls), " "), s.Package+"@"+s.Version); n != 2 {
		t.Errorf("npm installed %s %d times, want 2", s.Package, n)
	}
}
