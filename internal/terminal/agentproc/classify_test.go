package agentproc

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/proc"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	const (
		codexJS     = "/opt/peers/node_modules/.bin/codex"
		codexNative = "/opt/peers/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
		daemon      = "/home/u/.codex/packages/app-server-daemon/releases/0.171.0-x86_64-unknown-linux-musl/bin/codex"
	)
	tests := []struct {
		argv []string
		want Agent
	}{
		// Codex.
		{[]string{"codex"}, Codex},
		{[]string{codexNative}, Codex},
		{[]string{codexNative, "resume", "0199a0b1-0000-7000-8000-000000000000"}, Codex},
		{[]string{"codex", "--no-daemon", "-m", "gpt", "fix the tests"}, Codex},
		{[]string{"FOO=1", "BAR=x y", "codex"}, Codex},
		{[]string{"/usr/bin/node", codexJS}, Codex},
		{[]string{"node", "--no-warnings", codexJS, "--no-daemon"}, Codex},
		{[]string{daemon, "app-server", "--listen", "unix://", "--managed-daemon"}, ""},
		{[]string{daemon, "app-server", "daemon", "pid-update-loop"}, ""},
		{[]string{"codex", "--flag", "app-server"}, ""},
		{[]string{"node", codexJS, "app-server"}, ""},
		{[]string{"codex", "exec", "--json", "hi"}, ""},
		{[]string{"codex", "login"}, ""},
		{[]string{"codex", "mcp-server"}, ""},
		{[]string{"codex", "--version"}, ""},
		{[]string{"codex.js"}, ""},
		{[]string{"node", "/x/codex.js"}, ""},
		{[]string{"node"}, ""},
		{[]string{"/usr/bin/vim", "codex"}, ""},
		{[]string{"codexx"}, ""},

		// Claude Code.
		{[]string{"claude"}, Claude},
		{[]string{"/opt/peers/node_modules/.bin/claude", "--model", "fake-model"}, Claude},
		{[]string{"/opt/peers/node_modules/@anthropic-ai/claude-code/bin/claude.exe"}, Claude},
		{[]string{"/home/u/.local/share/claude/versions/2.1.332"}, Claude},
		{[]string{"/home/u/.local/share/claude/versions/2.1.332", "--resume", "abc"}, Claude},
		{[]string{"claude", "--model", "doctor"}, Claude}, // a flag's value, not a subcommand
		{[]string{"claude", "explain -p please"}, Claude},
		{[]string{"node", "/usr/lib/node_modules/.bin/claude"}, Claude},
		{[]string{"claude", "-p", "hello"}, ""},
		{[]string{"claude", "--print", "hello"}, ""},
		{[]string{"claude", "--output-format=json", "--print=true"}, ""},
		{[]string{"claude", "-h"}, ""},
		{[]string{"claude", "--help"}, ""},
		{[]string{"claude", "-v"}, ""},
		{[]string{"claude", "--version"}, ""},
		{[]string{"claude", "--bg"}, ""},
		{[]string{"claude", "--background"}, ""},
		{[]string{"claude", "agents", "--json", "--all"}, ""},
		{[]string{"claude", "update"}, ""},
		{[]string{"claude", "setup-token"}, ""},
		{[]string{"claude", "mcp", "list"}, ""},
		{[]string{"claude", "--debug", "config", "get"}, ""},
		{[]string{"claude", "doctor"}, ""},
		{[]string{"/home/u/.local/share/claude/versions/2.1"}, ""},
		{[]string{"claude-code"}, ""},

		// Neither.
		{nil, ""},
		{[]string{"A=1"}, ""},
		{[]string{"-bash"}, ""},
		{[]string{"sleep", "600"}, ""},
	}
	for _, tc := range tests {
		got, ok := Classify(tc.argv)
		if ok != (tc.want != "") || got != tc.want {
			t.Errorf("Classify(%q) = %q, %v; want %q", tc.argv, got, ok, tc.want)
		}
	}
}

// writeFile creates path (and its directories) with content.
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	nm := filepath.Join(root, "node_modules")
	// The npm layouts of the pinned peers.
	codexNative := filepath.Join(nm, "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex")
	writeFile(t, codexNative, "")
	writeFile(t, filepath.Join(nm, "@openai/codex-linux-x64/package.json"), `{"name":"@openai/codex","version":"0.171.0-linux-x64"}`)
	claudeExe := filepath.Join(nm, "@anthropic-ai/claude-code/bin/claude.exe")
	writeFile(t, claudeExe, "")
	writeFile(t, filepath.Join(nm, "@anthropic-ai/claude-code/package.json"), `{"name":"@anthropic-ai/claude-code","version":"2.1.332"}`)
	// A binary whose package is someone else's.
	other := filepath.Join(nm, "other/bin/codex")
	writeFile(t, other, "")
	writeFile(t, filepath.Join(nm, "other/package.json"), `{"name":"other","version":"1.0.0"}`)
	badVersion := filepath.Join(nm, "@openai/codex-bad/bin/codex")
	writeFile(t, badVersion, "")
	writeFile(t, filepath.Join(nm, "@openai/codex-bad/package.json"), `{"name":"@openai/codex","version":"latest"}`)

	tests := []struct {
		agent Agent
		exe   string
		want  string
	}{
		{Codex, "/home/u/.codex/packages/app-server-daemon/releases/0.171.0-x86_64-unknown-linux-musl/bin/codex", "0.171.0"},
		{Codex, "/opt/codex/releases/0.146.1/bin/codex", "0.146.1"},
		{Claude, "/home/u/.local/share/claude/versions/2.1.237", "2.1.237"},
		{Codex, codexNative, "0.171.0"},
		{Claude, claudeExe, "2.1.332"},
		{Codex, claudeExe, ""}, // Claude's package does not name Codex
		{Codex, other, ""},
		{Codex, badVersion, ""},
		{Codex, filepath.Join(root, "nowhere/codex"), ""},
		{Codex, "", ""},
	}
	for _, tc := range tests {
		got, err := Version(tc.agent, tc.exe)
		if tc.want == "" {
			if !errors.Is(err, ErrNoVersion) {
				t.Errorf("Version(%s, %s) = %q, %v; want ErrNoVersion", tc.agent, tc.exe, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Version(%s, %s) = %q, %v; want %q", tc.agent, tc.exe, got, err, tc.want)
		}
	}
	if _, err := Version("vim", "/usr/bin/vim"); err == nil || errors.Is(err, ErrNoVersion) {
		t.Errorf("unknown agent: %v", err)
	}
}

func TestTerminalID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want TerminalID
		err  bool
	}{
		{in: "terminal:v2:tmux:codex:akk-work:0.0:33389", want: TerminalID{Version: 2, Provider: "tmux", Agent: Codex, Target: "akk-work:0.0", PID: 33389}},
		{in: "terminal:v2:tmux:claude:w:12.3:7", want: TerminalID{Version: 2, Provider: "tmux", Agent: Claude, Target: "w:12.3", PID: 7}},
		// The agent is split at the first ':' after the prefix and the pid
		// at the last, so a session name holding ':' survives.
		{in: "terminal:v2:tmux:codex:a:b:1.2:99", want: TerminalID{Version: 2, Provider: "tmux", Agent: Codex, Target: "a:b:1.2", PID: 99}},
		{in: "terminal:tmux:work:0.1:4242", want: TerminalID{Version: 1, Provider: "tmux", Agent: Codex, Target: "work:0.1", PID: 4242}},
		{in: "terminal:v2:tmux:gemini:w:0.0:1", err: true},
		{in: "terminal:v2:herdr:codex:w:0.0:1", err: true},
		{in: "terminal:v3:tmux:codex:w:0.0:1", err: true},
		{in: "terminal:v3:laptop-2.lan:tmux:codex:w:0.0:12", want: TerminalID{Version: 3, Host: "laptop-2.lan", Provider: "tmux", Agent: Codex, Target: "w:0.0", PID: 12}},
		{in: "terminal:v3:h_1:tmux:claude:a:b:1.2:9", want: TerminalID{Version: 3, Host: "h_1", Provider: "tmux", Agent: Claude, Target: "a:b:1.2", PID: 9}},
		{in: "terminal:v3::tmux:codex:w:0.0:1", err: true},
		{in: "terminal:v3:-h:tmux:codex:w:0.0:1", err: true},
		{in: "terminal:v3:h/ns:tmux:codex:w:0.0:1", err: true},
		{in: "terminal:v3:h:tmux:codex:w:0.0", err: true},
		{in: "terminal:v3:h", err: true},
		{in: "terminal:v4:h:tmux:codex:w:0.0:1", err: true},
		{in: "terminal:v2:tmux:codex:w:0.0:0", err: true},
		{in: "terminal:v2:tmux:codex:w:0.0:-1", err: true},
		{in: "terminal:v2:tmux:codex:w:0.0:1x", err: true},
		{in: "terminal:v2:tmux:codex:w:0.0:", err: true},
		{in: "terminal:v2:tmux:codex::1", err: true},
		{in: "terminal:v2:tmux:codex:w:1", err: true},
		{in: "terminal:v2:tmux:codex:w x:0.0:1", err: true},
		{in: "terminal:v2:tmux:codex", err: true},
		{in: "terminal:tmux:1", err: true},
		{in: "terminal:v2:", err: true},
		{in: "session-20260620100156-abcdef12", err: true},
		{in: "", err: true},
	}
	for _, tc := range tests {
		got, err := ParseTerminalID(tc.in)
		if tc.err {
			if !errors.Is(err, ErrBadTerminalID) {
				t.Errorf("ParseTerminalID(%q) = %+v, %v; want ErrBadTerminalID", tc.in, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseTerminalID(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseTerminalID(%q) (-want +got):\n%s", tc.in, diff)
		}
		if tc.want.Version >= 2 && got.String() != tc.in {
			t.Errorf("String() = %q, want %q", got.String(), tc.in)
		}
	}
	if got := FormatTerminalID(Claude, "s:1.2", 55); got != "terminal:v2:tmux:claude:s:1.2:55" {
		t.Errorf("FormatTerminalID = %q", got)
	}
	if got := FormatHostTerminalID("box", Claude, "s:1.2", 55); got != "terminal:v3:box:tmux:claude:s:1.2:55" {
		t.Errorf("FormatHostTerminalID = %q", got)
	}
	if id, _ := ParseTerminalID("terminal:v3:box:tmux:claude:s:1.2:55"); id.Local() != "terminal:v2:tmux:claude:s:1.2:55" {
		t.Errorf("Local() = %q", id.Local())
	}
	if _, err := ParseTerminalID("terminal:v2:nope"); err == nil || !strings.Contains(err.Error(), "clawconnect terminal list") {
		t.Errorf("error does not say what to do: %v", err)
	}
}

func FuzzParseTerminalID(f *testing.F) {
	for _, s := range []string{"terminal:v2:tmux:codex:akk-work:0.0:33389", "terminal:tmux:w:0.1:4", "terminal:v2:tmux:claude:a:b:1.2:9",
		"terminal:v3:box-1.lan:tmux:codex:w:0.0:7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseTerminalID(s)
		if err != nil {
			if !errors.Is(err, ErrBadTerminalID) {
				t.Fatalf("error %v does not wrap ErrBadTerminalID", err)
			}
			return
		}
		if !id.Agent.Valid() || id.PID <= 0 || id.Target == "" {
			t.Fatalf("accepted %+v from %q", id, s)
		}
		again, err := ParseTerminalID(id.String())
		if err != nil {
			t.Fatalf("re-parse of %q: %v", id.String(), err)
		}
		again.Version = id.Version
		if again != id {
			t.Fatalf("round trip %+v != %+v", again, id)
		}
		if id.Version == 3 && CheckHostName(id.Host) != nil {
			t.Fatalf("accepted host %q from %q", id.Host, s)
		}
		if id.Version >= 2 && id.String() != s {
			t.Fatalf("String() = %q, parsed from %q", id.String(), s)
		}
	})
}

func TestProcessVersionOfNodeLauncher(t *testing.T) {
	t.Parallel()
	nm := filepath.Join(t.TempDir(), "node_modules")
	script := filepath.Join(nm, "@openai/codex/bin/codex.js")
	writeFile(t, script, "")
	writeFile(t, filepath.Join(nm, "@openai/codex/package.json"), `{"name":"@openai/codex","version":"0.171.0"}`)
	if err := os.MkdirAll(filepath.Join(nm, ".bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../@openai/codex/bin/codex.js", filepath.Join(nm, ".bin/codex")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		p    proc.Process
		want string
	}{
		{proc.Process{Exe: "/usr/bin/node", Argv: []string{"node", filepath.Join(nm, ".bin/codex")}}, "0.171.0"},
		{proc.Process{Exe: "/usr/bin/node", Argv: []string{"node", "--no-warnings", ".bin/codex"}, Cwd: nm}, "0.171.0"},
		{proc.Process{Exe: "/usr/bin/node", Argv: []string{"node", "missing/codex"}, Cwd: nm}, ""},
		{proc.Process{Exe: "/usr/bin/python3", Argv: []string{"python3", filepath.Join(nm, ".bin/codex")}}, ""},
		{proc.Process{Exe: "/usr/bin/node", Argv: []string{"node"}}, ""},
	}
	for _, tc := range tests {
		if got := processVersion(Codex, tc.p); got != tc.want {
			t.Errorf("processVersion(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}
