// Package peers installs the pinned npm-installed peers that end-to-end tests
// run against (Node 24, the OpenClaw gateway, Claude Code, Codex, the MCP
// Inspector, the MCP TypeScript SDK, the MCP Tasks extension's requester and
// the MCP Apps host bridge) into a cache directory, once, and tells callers
// how to start them.
//
// Each peer lives in its own npm project under <cache>/peers/<id>@<version>.
// An install is recorded by a marker file written only after npm succeeded
// and the entry point was found, so an interrupted install is simply redone.
// Installs take an exclusive lock on <cache>/peers/.lock, so parallel test
// binaries never run npm into the same directory at once; a peer already
// installed costs a stat. The system npm bootstraps the pinned Node; every
// JavaScript peer is installed and run with the pinned Node first on PATH.
//
// End-to-end tests call [RequireE2E] (skips unless CLAWCONNECT_E2E=1) or
// [Require], which also installs what the test needs.
package peers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ID names a pinned peer.
type ID string

// The pinned peers.
const (
	Node         ID = "node"          // npm node@24.21.0: the Node that runs the JavaScript peers
	OpenClaw     ID = "openclaw"      // npm openclaw@2026.9.6: the gateway
	ClaudeCode   ID = "claude-code"   // npm @anthropic-ai/claude-code@2.1.332 (native binary)
	Codex        ID = "codex"         // npm @openai/codex@0.171.0 (node launcher + native binary)
	MCPInspector ID = "mcp-inspector" // npm @modelcontextprotocol/inspector@2.12.0
	MCPSDK       ID = "mcp-sdk"       // npm @modelcontextprotocol/sdk@1.32.2 (a library, no binary)
	MCPExtTasks  ID = "mcp-ext-tasks" // npm @modelcontextprotocol/ext-tasks@0.2.2: the Tasks extension's requester (a library)
	MCPExtApps   ID = "mcp-ext-apps"  // npm @modelcontextprotocol/ext-apps@2.0.4: the MCP Apps host bridge (a library)
)

// Spec is how one peer is installed and started.
type Spec struct {
	// Package and Version are the npm package and its pinned version.
	Package, Version string
	// Entry is the peer's entry point relative to its install directory.
	Entry string
	// Script reports that Entry is a Node script run with the pinned Node;
	// otherwise it is a native executable (or, for a library, a file that
	// proves the install).
	Script bool
	// Library reports a peer without an executable.
	Library bool
	// With are more pinned npm packages ("name@version") installed into the
	// peer's project, such as a peer dependency its entry point imports.
	With []string
}

// withName is the package name of a With entry ("@scope/name@1.2.3").
func withName(spec string) string {
	if i := strings.LastIndex(spec, "@"); i > 0 {
		return spec[:i]
	}
	return spec
}

// specs is the pin table; it is read-only.
func specs() map[ID]Spec {
	return map[ID]Spec{
		Node:         {Package: "node", Version: "24.21.0", Entry: "node_modules/node/bin/node"},
		OpenClaw:     {Package: "openclaw", Version: "2026.9.6", Entry: "node_modules/openclaw/openclaw.mjs", Script: true},
		ClaudeCode:   {Package: "@anthropic-ai/claude-code", Version: "2.1.332", Entry: "node_modules/.bin/claude"},
		Codex:        {Package: "@openai/codex", Version: "0.171.0", Entry: "node_modules/.bin/codex", Script: true},
		MCPInspector: {Package: "@modelcontextprotocol/inspector", Version: "2.12.0", Entry: "node_modules/.bin/mcp-inspector", Script: true},
		MCPSDK:       {Package: "@modelcontextprotocol/sdk", Version: "1.32.2", Entry: "node_modules/@modelcontextprotocol/sdk/package.json", Library: true},
		// The requester's client entry point imports the SDK client it can
		// adapt (an optional peer dependency npm does not install).
		MCPExtTasks: {Package: "@modelcontextprotocol/ext-tasks", Version: "0.2.2", Entry: "node_modules/@modelcontextprotocol/ext-tasks/package.json", Library: true,
			With: []string{"@modelcontextprotocol/client@2.4.0"}},
		// The host bridge imports the SDK it is built on (a peer dependency);
		// esbuild bundles it, with mcp-sdk's client, into one script a
		// browser loads, as a host's page would be built.
		MCPExtApps: {Package: "@modelcontextprotocol/ext-apps", Version: "2.0.4", Entry: "node_modules/@modelcontextprotocol/ext-apps/package.json", Library: true,
			With: []string{"@modelcontextprotocol/client@2.4.0", "esbuild@0.28.2"}},
	}
}

// All lists every pinned peer, Node first.
func All() []ID {
	return []ID{Node, OpenClaw, ClaudeCode, Codex, MCPInspector, MCPSDK, MCPExtTasks, MCPExtApps}
}

// Spec returns the peer's pin; ok is false for an unknown id.
func (id ID) Spec() (s Spec, ok bool) {
	s, ok = specs()[id]
	return s, ok
}

// ErrUnknownPeer is returned for an ID that is not in the pin table.
var ErrUnknownPeer = errors.New("peers: unknown peer")

// markerName is the file that records a finished install.
const markerName = ".clawconnect-installed"

// DefaultCacheDir is $CLAWCONNECT_CACHE, else $XDG_CACHE_HOME/clawconnect,
// else ~/.cache/clawconnect (the same rule as scripts/setup/env.sh).
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("CLAWCONNECT_CACHE"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "clawconnect"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("peers: cache dir: %w", err)
	}
	return filepath.Join(home, ".cache", "clawconnect"), nil
}

// Options configures an Installer. The zero value is usable.
type Options struct {
	// CacheDir is the cache root; peers go under CacheDir/peers. Default
	// DefaultCacheDir().
	CacheDir string
	// NPM is the npm used to bootstrap Node; default "npm" on PATH.
	NPM string
	// Output receives npm's output as it runs (it is also kept in
	// install.log in the peer's directory); nil discards.
	Output io.Writer
	// Logger receives one line per install; nil discards.
	Logger *slog.Logger
}

// Installer installs peers into one cache directory. It is safe for
// concurrent use, also across processes (installs are serialised by a file
// lock).
type Installer struct {
	root   string
	npm    string
	out    io.Writer
	logger *slog.Logger
}

// NewInstaller returns an Installer for opts. It does not touch the disk.
func NewInstaller(opts Options) (*Installer, error) {
	cache := opts.CacheDir
	if cache == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		cache = d
	}
	abs, err := filepath.Abs(cache)
	if err != nil {
		return nil, fmt.Errorf("peers: cache dir: %w", err)
	}
	in := &Installer{root: filepath.Join(abs, "peers"), npm: opts.NPM, out: opts.Output, logger: opts.Logger}
	if in.npm == "" {
		in.npm = "npm"
	}
	if in.out == nil {
		in.out = io.Discard
	}
	if in.logger == nil {
		in.logger = slog.New(slog.DiscardHandler)
	}
	return in, nil
}

// Root is the directory holding every peer (<cache>/peers).
func (in *Installer) Root() string { return in.root }

// Dir is the npm project directory of a peer (whether or not installed).
func (in *Installer) Dir(id ID) string {
	s, _ := id.Spec()
	return filepath.Join(in.root, string(id)+"@"+s.Version)
}

// Installed reports whether the peer's install finished.
func (in *Installer) Installed(id ID) bool {
	s, ok := id.Spec()
	if !ok {
		return false
	}
	if _, err := os.Stat(filepath.Join(in.Dir(id), markerName)); err != nil {
		return false
	}
	for _, w := range s.With {
		if _, err := os.Stat(filepath.Join(in.NodeModules(id), withName(w), "package.json")); err != nil {
			return false
		}
	}
	_, err := os.Stat(filepath.Join(in.Dir(id), s.Entry))
	return err == nil
}

// Ensure installs each listed peer that is not installed yet (and Node,
// which every JavaScript peer needs), and returns once all are. It is
// idempotent; concurrent calls, in this process or others, wait for each
// other. An install of a peer takes 10–60 s; a present one is a stat.
func (in *Installer) Ensure(ctx context.Context, ids ...ID) error {
	need := []ID{}
	for _, id := range append([]ID{Node}, ids...) {
		if _, ok := id.Spec(); !ok {
			return fmt.Errorf("peers: ensure %q: %w", id, ErrUnknownPeer)
		}
		if !in.Installed(id) {
			need = append(need, id)
		}
	}
	if len(need) == 0 {
		return nil
	}
	if err := os.MkdirAll(in.root, 0o755); err != nil {
		return fmt.Errorf("peers: create %s: %w", in.root, err)
	}
	unlock, err := lockFile(ctx, filepath.Join(in.root, ".lock"))
	if err != nil {
		return fmt.Errorf("peers: lock: %w", err)
	}
	defer unlock()
	for _, id := range need {
		if in.Installed(id) { // another process finished it while we waited
			continue
		}
		if err := in.install(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// install runs npm for one peer; the caller holds the lock.
func (in *Installer) install(ctx context.Context, id ID) error {
	s, _ := id.Spec()
	dir := in.Dir(id)
	spec := s.Package + "@" + s.Version
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("peers: install %s: %w", spec, err)
	}
	pkgJSON := filepath.Join(dir, "package.json")
	if _, err := os.Stat(pkgJSON); err != nil {
		if err := os.WriteFile(pkgJSON, []byte(`{"name":"clawconnect-peer","private":true}`+"\n"), 0o644); err != nil {
			return fmt.Errorf("peers: install %s: %w", spec, err)
		}
	}
	logf, err := os.Create(filepath.Join(dir, "install.log"))
	if err != nil {
		return fmt.Errorf("peers: install %s: %w", spec, err)
	}
	defer logf.Close()
	var tail bytes.Buffer
	args := append(append([]string{"install", "--no-fund", "--no-audit", "--loglevel=error"}, s.With...), spec)
	cmd := exec.CommandContext(ctx, in.npm, args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	if id != Node {
		cmd.Env = withPath(cmd.Env, filepath.Dir(filepath.Join(in.Dir(Node), specs()[Node].Entry)))
	}
	cmd.Stdout = io.MultiWriter(logf, in.out, &tail)
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	in.logger.Info("installing peer", "peer", spec, "dir", dir)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("peers: npm install %s: %w\n%s", spec, err, lastLines(tail.String(), 20))
	}
	if _, err := os.Stat(filepath.Join(dir, s.Entry)); err != nil {
		return fmt.Errorf("peers: npm install %s: entry point missing: %w", spec, err)
	}
	if id == Node {
		out, err := exec.CommandContext(ctx, filepath.Join(dir, s.Entry), "--version").Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != "v"+s.Version {
			return fmt.Errorf("peers: installed node reports %q (%v), want v%s", got, err, s.Version)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, markerName), []byte(spec+"\n"), 0o644); err != nil {
		return fmt.Errorf("peers: install %s: %w", spec, err)
	}
	in.logger.Info("installed peer", "peer", spec, "seconds", time.Since(start).Seconds())
	return nil
}

// Command is how to start a peer: run Path with Args followed by the
// caller's own arguments, in an environment that includes Env (which puts
// the pinned Node first on PATH).
type Command struct {
	Path string
	Args []string
	Env  []string
}

// Cmd builds an exec.Cmd for the peer with extra arguments; its environment
// is the current process's plus c.Env (callers may append more).
func (c Command) Cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Path, append(append([]string{}, c.Args...), args...)...)
	cmd.Env = append(os.Environ(), c.Env...)
	return cmd
}

// ErrNotInstalled is returned by Command for a peer not installed yet.
var ErrNotInstalled = errors.New("peers: not installed")

// Command returns how to start an installed peer (see Ensure). For the
// MCP SDK, a library, Path is Node and Args are empty: write scripts under
// NodeModules(MCPSDK)'s parent so that imports resolve.
func (in *Installer) Command(id ID) (Command, error) {
	s, ok := id.Spec()
	if !ok {
		return Command{}, fmt.Errorf("peers: command %q: %w", id, ErrUnknownPeer)
	}
	for _, need := range []ID{Node, id} {
		if !in.Installed(need) {
			return Command{}, fmt.Errorf("peers: command %s: %s: %w", id, need, ErrNotInstalled)
		}
	}
	node := filepath.Join(in.Dir(Node), specs()[Node].Entry)
	c := Command{Env: []string{"PATH=" + filepath.Dir(node) + string(os.PathListSeparator) + os.Getenv("PATH")}}
	entry := filepath.Join(in.Dir(id), s.Entry)
	switch {
	case id == Node || s.Library:
		c.Path = node
	case s.Script:
		c.Path, c.Args = node, []string{entry}
	default:
		c.Path = entry
	}
	return c, nil
}

// NodeModules is the peer's node_modules directory.
func (in *Installer) NodeModules(id ID) string { return filepath.Join(in.Dir(id), "node_modules") }

// withPath returns env with dir prepended to PATH.
func withPath(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
			continue
		}
		out = append(out, kv)
	}
	if path == "" {
		return append(out, "PATH="+dir)
	}
	return append(out, "PATH="+dir+string(os.PathListSeparator)+path)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lockFile takes an exclusive flock on path, polling so that ctx can cancel
// the wait, and returns its release.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}
