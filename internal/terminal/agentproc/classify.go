// Package agentproc finds the coding agents (Codex and Claude Code TUIs)
// running in tmux panes and fences their identity: it classifies a process
// by its argv, reads the agent's version from its executable, formats and
// parses the public terminal_id, joins tmux panes with a /proc snapshot
// into one row per agent pane (exactly one agent process by ancestry, or
// the row is not controllable), and verifies a row again before any
// terminal access (same pane, same process incarnation, still the agent,
// still inside the pane, same working directory).
package agentproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Agent is the kind of coding agent.
type Agent string

// The agents terminal turns drive.
const (
	Codex  Agent = "codex"
	Claude Agent = "claude"
)

// Valid reports whether a is Codex or Claude.
func (a Agent) Valid() bool { return a == Codex || a == Claude }

var (
	envAssignRE       = lazyRE(`^[A-Za-z_][A-Za-z0-9_]*=`)
	claudeVersionDir  = lazyRE(`/claude/versions/([0-9]+\.[0-9]+\.[0-9]+)$`)
	codexReleaseExeRE = lazyRE(`/releases/([0-9]+\.[0-9]+\.[0-9]+)(?:-[^/]*)?/bin/codex$`)
	semverPrefixRE    = lazyRE(`^([0-9]+\.[0-9]+\.[0-9]+)(?:[-+][0-9A-Za-z.+-]*)?$`)
)

// codexNonTUI are Codex subcommands that do not run the interactive TUI.
// The app-server (the shared daemon) is excluded wherever it appears.
var codexNonTUI = map[string]bool{
	"exec": true, "e": true, "login": true, "logout": true, "mcp": true, "mcp-server": true,
	"app-server": true, "completion": true, "sandbox": true, "debug": true, "apply": true,
	"a": true, "cloud": true, "features": true, "help": true,
}

// claudeNonInteractiveFlags make a claude process non-interactive.
var claudeNonInteractiveFlags = map[string]bool{
	"-h": true, "--help": true, "-p": true, "--print": true, "-v": true, "--version": true,
	"--bg": true, "--background": true,
}

// claudeSubcommands are Claude Code subcommands (none runs the TUI).
var claudeSubcommands = map[string]bool{
	"agents": true, "update": true, "upgrade": true, "setup-token": true, "mcp": true,
	"config": true, "doctor": true, "install": true, "migrate-installer": true, "plugin": true,
	"plugins": true, "auth": true, "login": true, "logout": true, "api-key": true, "help": true,
}

// claudeValueFlags take a separate value, which is not a subcommand.
var claudeValueFlags = map[string]bool{
	"--model": true, "--session-id": true, "--permission-mode": true, "--settings": true,
	"--add-dir": true, "--append-system-prompt": true, "--system-prompt": true,
	"--mcp-config": true, "--allowedTools": true, "--allowed-tools": true,
	"--disallowedTools": true, "--disallowed-tools": true, "--fallback-model": true,
	"--agent": true, "--agents": true, "--setting-sources": true, "--output-format": true,
	"--input-format": true, "--debug-file": true, "--name": true,
}

// Classify reports which agent's interactive TUI argv runs, if any.
//
// Codex: the first token that is not a VAR=value assignment has basename
// "codex", or is node followed (after node's own options) by a path with
// basename "codex"; it is not Codex if any later token is "app-server"
// (the shared daemon) or the first argument is a non-interactive
// subcommand (exec, login, mcp-server, …).
//
// Claude Code: the first such token has basename "claude" or "claude.exe"
// (the native binary of the npm package), ends in
// /claude/versions/<x.y.z>, or is node followed by a path with basename
// "claude"; it is not Claude if argv holds a non-interactive flag (-p,
// --print, -h, --help, -v, --version, --bg, --background, also as
// --flag=value) or its first argument is a subcommand (agents, update,
// setup-token, mcp, config, doctor, …).
func Classify(argv []string) (Agent, bool) {
	i := 0
	for i < len(argv) && envAssignRE().MatchString(argv[i]) {
		i++
	}
	if i >= len(argv) {
		return "", false
	}
	prog, args := argv[i], argv[i+1:]
	base := path.Base(prog)
	if base == "node" || base == "nodejs" {
		j := 0
		for j < len(args) && strings.HasPrefix(args[j], "-") {
			j++
		}
		if j >= len(args) {
			return "", false
		}
		prog, args = args[j], args[j+1:]
		switch path.Base(prog) {
		case "codex":
			return classifyCodex(args)
		case "claude":
			return classifyClaude(args)
		}
		return "", false
	}
	switch {
	case base == "codex":
		return classifyCodex(args)
	case base == "claude" || base == "claude.exe" || claudeVersionDir().MatchString(prog):
		return classifyClaude(args)
	}
	return "", false
}

func classifyCodex(args []string) (Agent, bool) {
	for _, a := range args {
		if a == "app-server" {
			return "", false
		}
	}
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			if a == "--help" || a == "-h" || a == "--version" || a == "-V" {
				return "", false
			}
			continue
		}
		if codexNonTUI[a] {
			return "", false
		}
		break
	}
	return Codex, true
}

func classifyClaude(args []string) (Agent, bool) {
	for _, a := range args {
		flag, _, _ := strings.Cut(a, "=")
		if claudeNonInteractiveFlags[flag] {
			return "", false
		}
	}
	for j := 0; j < len(args); j++ {
		a := args[j]
		if strings.HasPrefix(a, "-") {
			if claudeValueFlags[a] {
				j++
			}
			continue
		}
		if claudeSubcommands[a] {
			return "", false
		}
		break
	}
	return Claude, true
}

// ErrNoVersion means the agent's version could not be read from its
// executable.
var ErrNoVersion = errors.New("agentproc: agent version unknown")

// ProcessVersion returns the x.y.z version of the agent process pid: the
// Version of its executable.
func ProcessVersion(agent Agent, pid int) (string, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return "", fmt.Errorf("read the agent's executable: %w", err)
	}
	return Version(agent, exe)
}

// Version returns the x.y.z version of the agent whose executable is exe
// (the target of /proc/<pid>/exe). It reads the path first: Codex's
// daemon copies live under .../releases/<x.y.z>[-target]/bin/codex and
// Claude's native installs under .../claude/versions/<x.y.z>. Otherwise
// it looks for the npm package that holds exe: the nearest package.json
// above it named @openai/codex… (Codex) or @anthropic-ai/claude-code…
// (Claude), whose "version" starts with x.y.z. It reads at most a few
// small files and spawns nothing. No version is ErrNoVersion.
func Version(agent Agent, exe string) (string, error) {
	if exe == "" {
		return "", fmt.Errorf("agent version: %w: executable path unknown", ErrNoVersion)
	}
	switch agent {
	case Codex:
		if m := codexReleaseExeRE().FindStringSubmatch(exe); m != nil {
			return m[1], nil
		}
	case Claude:
		if m := claudeVersionDir().FindStringSubmatch(exe); m != nil {
			return m[1], nil
		}
	default:
		return "", fmt.Errorf("agent version: unknown agent %q", agent)
	}
	prefix := "@openai/codex"
	if agent == Claude {
		prefix = "@anthropic-ai/claude-code"
	}
	dir := filepath.Dir(exe)
	for range 6 {
		if v, ok := packageVersion(filepath.Join(dir, "package.json"), prefix); ok {
			return v, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir || filepath.Base(dir) == "node_modules" {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("agent version of %s %s: %w: no release directory or npm package.json names it", agent, exe, ErrNoVersion)
}

// packageVersion reads an npm package.json and returns its x.y.z version
// if its name starts with prefix.
func packageVersion(file, prefix string) (string, bool) {
	b, err := os.ReadFile(file)
	if err != nil || len(b) > 1<<20 {
		return "", false
	}
	var pkg struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if json.Unmarshal(b, &pkg) != nil || !strings.HasPrefix(pkg.Name, prefix) {
		return "", false
	}
	m := semverPrefixRE().FindStringSubmatch(pkg.Version)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// lazyRE returns expr compiled once, at the first call: a package's
// expressions are not compiled when a process that never uses them starts.
func lazyRE(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
