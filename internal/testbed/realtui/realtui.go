// Package realtui runs the real Codex or Claude Code TUI (prepared by
// package realcli against the fake model) in a pane of a private tmux
// server, for tests: it gets past the start-up dialogs, waits for the
// composer, types and submits prompts the way a supervisor must (text, then
// Enter as a separate keystroke once the draft shows: Codex drops an Enter
// that arrives in the same burst as the text), captures the screen, finds
// the agent process and its session files, and stops everything it started
// (the tmux server, the agent, a Codex app-server daemon).
//
// The harness recognises screens by a few literal markers of its own, not
// by the parsers under test.
package realtui

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/proc"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
)

// Options configures Start. The zero value is a usable default.
type Options struct {
	// Args are appended to the CLI's interactive arguments (for example
	// "--permission-mode", "default" for Claude Code's permission prompts).
	Args []string
	// Width and Height are the pane's size; default 120×40.
	Width, Height int
	// Poll is the capture interval of the Wait methods; default 50 ms.
	Poll time.Duration
	// Socket is the tmux server's socket path, for a supervisor that must
	// know it before the TUI starts; no server may be running on it. Close
	// stops the server but leaves the socket's directory. Default: a socket
	// in a new temporary directory, removed by Close.
	Socket string
}

// TUI is one running TUI in its own tmux server. Its methods are safe for
// concurrent use; Close is idempotent.
type TUI struct {
	// CLI is the prepared CLI the TUI runs.
	CLI *realcli.CLI
	// Socket is the private tmux server's socket path.
	Socket string
	// Pane is the pane's id ("%0").
	Pane string
	// PanePID is the pid of the pane's first process.
	PanePID int
	// ServerPID is the pid of the private tmux server; Close stops it by
	// this pid when kill-server cannot reach it over the socket (the
	// socket or its directory was removed first).
	ServerPID int

	server incarnation // the tmux server's pid and start time, against pid reuse

	opts    Options
	sockDir string

	mu       sync.Mutex
	agentPID int
	previous []incarnation // the pane's and agent's processes before a Respawn
	closed   bool
}

// Start starts the TUI of cli in a new private tmux server and returns once
// the pane exists; call WaitReady before typing. ctx bounds the tmux calls.
func Start(ctx context.Context, cli *realcli.CLI, opts Options) (*TUI, error) {
	if opts.Width <= 0 {
		opts.Width = 120
	}
	if opts.Height <= 0 {
		opts.Height = 40
	}
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	t := &TUI{CLI: cli, Socket: opts.Socket, opts: opts}
	if t.Socket == "" {
		sockDir, err := os.MkdirTemp("", "cctui-")
		if err != nil {
			return nil, fmt.Errorf("realtui: %w", err)
		}
		t.Socket, t.sockDir = filepath.Join(sockDir, "tmux.sock"), sockDir
	}
	out, err := t.tmux(ctx, "-f", "/dev/null", "new-session", "-d", "-x", strconv.Itoa(opts.Width), "-y", strconv.Itoa(opts.Height),
		"-c", cli.WorkDir, "-P", "-F", "#{pane_id} #{pane_pid}", t.shell())
	if err != nil {
		if t.sockDir != "" {
			_ = os.RemoveAll(t.sockDir)
		}
		return nil, err
	}
	id, pid, ok := strings.Cut(strings.TrimSpace(out), " ")
	n, perr := strconv.Atoi(pid)
	if !ok || perr != nil {
		_ = t.Close()
		return nil, fmt.Errorf("realtui: new-session printed %q, want \"%%N <pid>\"", out)
	}
	t.Pane, t.PanePID = id, n
	out, err = t.tmux(ctx, "display-message", "-p", "#{pid}")
	if n, perr = strconv.Atoi(strings.TrimSpace(out)); err != nil || perr != nil || n <= 1 {
		_ = t.Close()
		return nil, fmt.Errorf("realtui: read the tmux server's pid: %q %w", out, errors.Join(err, perr))
	}
	t.ServerPID, t.server = n, incarnationOf(n)
	return t, nil
}

// shell is the pane's command: the CLI's TUI, then a note of its exit.
func (t *TUI) shell() string {
	args := append(t.CLI.InteractiveArgs(), t.opts.Args...)
	// The agent gets the pane's TMUX and TMUX_PANE as in a user's pane
	// (Claude Code records them in its live-session registry).
	return strings.Replace(t.CLI.ShellCommand(args...), "env -i ", `env -i TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" `, 1) +
		`; echo "EXITED rc=$?"; sleep 300`
}

// Respawn kills the pane's processes and starts the TUI again in the same
// pane (tmux respawn-pane -k), as a user restarting the agent there would;
// call WaitReady before typing. The new agent is a new process in the
// same pane; Close stops the old ones too should they outlive the pane.
func (t *TUI) Respawn(ctx context.Context) error {
	old, _ := t.AgentPID()
	if _, err := t.tmux(ctx, "respawn-pane", "-k", "-t", t.Pane, "-c", t.CLI.WorkDir, t.shell()); err != nil {
		return err
	}
	out, err := t.tmux(ctx, "display-message", "-p", "-t", t.Pane, "#{pane_pid}")
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return fmt.Errorf("realtui: respawned pane pid %q: %w", out, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, pid := range []int{t.PanePID, old} {
		if p := incarnationOf(pid); p.pid != 0 {
			t.previous = append(t.previous, p)
		}
	}
	t.PanePID, t.agentPID = n, 0
	return nil
}

// incarnation is one process: its pid and start time.
type incarnation struct {
	pid   int
	start uint64
}

// incarnationOf is pid's incarnation, the zero value when pid does not run.
func incarnationOf(pid int) incarnation {
	p, err := proc.FS{}.ReadStat(pid)
	if err != nil {
		return incarnation{}
	}
	return incarnation{pid, p.StartTicks}
}

// runs reports whether the incarnation still runs (not a reused pid, not a
// zombie).
func (p incarnation) runs() bool {
	ok, _ := proc.Alive(p.pid, p.start)
	return p.pid > 1 && ok
}

// serverRuns reports whether the tmux server this TUI started still runs
// (the same incarnation, not a process that reused its pid).
func (t *TUI) serverRuns() bool {
	return t.server.runs()
}

// Leftovers returns the pids of the processes this TUI started (the tmux
// server, the pane's first process, the agent) that still run; after
// Close it is empty.
func (t *TUI) Leftovers() []int {
	var out []int
	if t.serverRuns() {
		out = append(out, t.ServerPID)
	}
	t.mu.Lock()
	pids := []int{t.PanePID, t.agentPID}
	for _, p := range t.previous {
		if p.runs() {
			out = append(out, p.pid)
		}
	}
	t.mu.Unlock()
	for _, pid := range pids {
		if pid > 1 && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// stopPID ends pid: it waits (bounded) for it to exit on its own, then
// sends SIGKILL. A nil runs reports whether pid still runs.
func stopPID(pid int, runs func() bool) error {
	if runs == nil {
		runs = func() bool { return alive(pid) }
	}
	gone := func() bool {
		deadline := time.Now().Add(3 * time.Second)
		for runs() && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // a bounded wait for an outside process to exit
		}
		return !runs()
	}
	if gone() {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if !gone() {
		return fmt.Errorf("realtui: pid %d survived SIGKILL", pid)
	}
	return nil
}

// tmux runs one tmux command on the private server.
func (t *TUI) tmux(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", t.Socket}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("realtui: tmux %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Capture returns the visible screen (trailing spaces as tmux prints them).
func (t *TUI) Capture(ctx context.Context) (string, error) {
	return t.tmux(ctx, "capture-pane", "-p", "-t", t.Pane)
}

// CaptureANSI returns the visible screen with its ANSI attributes (-e).
func (t *TUI) CaptureANSI(ctx context.Context) (string, error) {
	return t.tmux(ctx, "capture-pane", "-p", "-e", "-t", t.Pane)
}

// Keys sends tmux key names (Enter, Escape, Down, C-c, y …), one call.
func (t *TUI) Keys(ctx context.Context, keys ...string) error {
	_, err := t.tmux(ctx, append([]string{"send-keys", "-t", t.Pane}, keys...)...)
	return err
}

// Type types text without pressing Enter: one line with send-keys -l,
// several lines as a bracketed paste.
func (t *TUI) Type(ctx context.Context, text string) error {
	if !strings.ContainsAny(text, "\r\n") {
		_, err := t.tmux(ctx, "send-keys", "-t", t.Pane, "-l", text)
		return err
	}
	const buf = "realtui-paste"
	if _, err := t.tmux(ctx, "set-buffer", "-b", buf, "--", text); err != nil {
		return err
	}
	_, err := t.tmux(ctx, "paste-buffer", "-p", "-d", "-b", buf, "-t", t.Pane)
	return err
}

// WaitFor captures the screen every Options.Poll until match accepts it,
// and returns that screen. On timeout (ctx) it returns the last screen in
// the error.
func (t *TUI) WaitFor(ctx context.Context, what string, match func(screen string) bool) (string, error) {
	tick := time.NewTicker(t.opts.Poll)
	defer tick.Stop()
	last := ""
	for {
		s, err := t.Capture(ctx)
		if err == nil {
			last = s
			if match(s) {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("realtui: waiting for %s: %w; last screen:\n%s", what, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// WaitStable waits until match accepts two consecutive captures that are
// equal and at least settle apart, and returns that screen.
func (t *TUI) WaitStable(ctx context.Context, what string, settle time.Duration, match func(string) bool) (string, error) {
	var prev string
	var since time.Time
	return t.WaitFor(ctx, what, func(s string) bool {
		if !match(s) {
			prev = ""
			return false
		}
		if s != prev {
			prev, since = s, time.Now()
			return false
		}
		return time.Since(since) >= settle
	})
}

// dialog is a start-up dialog the harness answers: while marker shows, it
// presses move until the selected line (the one with the cursor) is
// selected, then confirm.
type dialog struct{ marker, selected, move, confirm string }

// dialogs are the start-up dialogs the real TUIs show, in the order
// they appear.
var dialogs = []dialog{
	{"Yes, I trust this folder", "❯ Yes, I trust this folder", "Down", "Enter"}, // Claude Code folder trust
	{"Do you want to use this API key?", "❯ Yes", "Up", "Enter"},                // Claude Code custom key
	{"Yes, I accept", "❯ Yes, I accept", "Down", "Enter"},                       // Claude Code bypass-permissions warning
	{"Trust this folder?", "› 1. Trust and continue", "Up", "Enter"},            // Codex folder trust (git repos)
}

// Idle reports whether a screen shows the agent's empty composer with no
// turn running: Claude Code's "❯" line, Codex's "›" placeholder line.
func (t *TUI) Idle(screen string) bool {
	if strings.Contains(screen, "esc to interrupt") {
		return false
	}
	lines := strings.Split(screen, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimRight(lines[i], " \u00a0")
		switch t.CLI.Kind {
		case realcli.ClaudeCode:
			if strings.TrimSpace(l) == "❯" {
				return true
			}
		case realcli.Codex:
			if strings.HasPrefix(l, "›") {
				return composerEmpty(l) && !strings.Contains(screen, "Would you like to")
			}
		}
	}
	return false
}

// codexPlaceholders are composer placeholders seen in Codex 0.171.
var codexPlaceholders = []string{"Ask Codex to do anything", "Find and fix a bug in @filename", "Explain this codebase",
	"Summarize recent commits", "Implement {feature}", "Write tests for @filename", "Improve documentation in @filename",
	"Run /review on my current changes", "Use /skills to list available skills"}

func composerEmpty(line string) bool {
	rest := strings.TrimSpace(strings.TrimPrefix(line, "›"))
	for _, p := range codexPlaceholders {
		if rest == p {
			return true
		}
	}
	return rest == ""
}

// WaitReady answers the start-up dialogs and waits until the composer is
// idle and the screen settled. A dialog key is pressed at most every
// 300 ms, so the TUI sees each keystroke apart.
func (t *TUI) WaitReady(ctx context.Context) (string, error) {
	var last time.Time
	return t.WaitStable(ctx, "the idle composer", 300*time.Millisecond, func(s string) bool {
		for _, d := range dialogs {
			if !strings.Contains(s, d.marker) {
				continue
			}
			if time.Since(last) >= 300*time.Millisecond {
				key := d.move
				if selectedLine(s, d.selected) {
					key = d.confirm
				}
				_ = t.Keys(ctx, key)
				last = time.Now()
			}
			return false
		}
		return t.Idle(s)
	})
}

// selectedLine reports whether a line of screen, trimmed, starts with sel.
func selectedLine(screen, sel string) bool {
	for _, l := range strings.Split(screen, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), sel) {
			return true
		}
	}
	return false
}

// Submit types text, waits until its last line shows in the composer and
// the screen settled, then presses Enter in a separate call (Codex drops
// an Enter that arrives with the text).
func (t *TUI) Submit(ctx context.Context, text string) error {
	if err := t.Type(ctx, text); err != nil {
		return err
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 40 {
		last = last[len(last)-40:]
	}
	if _, err := t.WaitStable(ctx, "the draft in the composer", 150*time.Millisecond, func(s string) bool {
		return strings.Contains(s, last) || (len(lines) > 1 && strings.Contains(s, "[Pasted"))
	}); err != nil {
		return err
	}
	return t.Keys(ctx, "Enter")
}

// AgentPID returns the agent's own process: the native "codex" binary (not
// its node wrapper) or the "claude" binary nearest the pane. It
// fails while the agent has not started or after it exited.
func (t *TUI) AgentPID() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.agentPID > 0 && alive(t.agentPID) {
		return t.agentPID, nil
	}
	kids, err := children()
	if err != nil {
		return 0, err
	}
	want := "codex"
	if t.CLI.Kind == realcli.ClaudeCode {
		want = "claude"
	}
	found := 0
	var walk func(pid int)
	walk = func(pid int) {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil {
			base := strings.TrimSuffix(filepath.Base(strings.TrimSuffix(exe, " (deleted)")), ".exe")
			if base == want {
				// The nearest one: a descendant with the same executable is
				// a child it forked (a shell, before execve), not the agent.
				found = pid
				return
			}
		}
		for _, k := range kids[pid] {
			walk(k)
		}
	}
	walk(t.PanePID)
	if found == 0 {
		return 0, fmt.Errorf("realtui: no %s process under pane pid %d", want, t.PanePID)
	}
	t.agentPID = found
	return found, nil
}

// children maps every pid to its child pids, from /proc/<pid>/stat.
func children() (map[int][]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("realtui: %w", err)
	}
	out := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(data, ')')
		f := strings.Fields(string(data[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			out[ppid] = append(out[ppid], pid)
		}
	}
	return out, nil
}

// alive reports whether pid runs: it exists and is not a zombie waiting
// for its parent.
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || !bytes.HasPrefix(data[i+1:], []byte(" Z"))
}

// OpenFile is a file a process holds open.
type OpenFile struct {
	FD   int
	Path string
	Dev  uint64
	Ino  uint64
}

// OpenFiles lists the files pid holds open, from /proc/<pid>/fd.
func OpenFiles(pid int) ([]OpenFile, error) {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("realtui: %w", err)
	}
	var out []OpenFile
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p := filepath.Join(dir, e.Name())
		target, err := os.Readlink(p)
		if err != nil || !strings.HasPrefix(target, "/") {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(p, &st) != nil {
			continue
		}
		out = append(out, OpenFile{FD: fd, Path: target, Dev: uint64(st.Dev), Ino: st.Ino})
	}
	return out, nil
}

// Cwd is the working directory of pid.
func Cwd(pid int) (string, error) {
	d, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return "", fmt.Errorf("realtui: %w", err)
	}
	return d, nil
}

// CodexHome is the TUI's $CODEX_HOME.
func (t *TUI) CodexHome() string { return filepath.Join(t.CLI.Home, ".codex") }

// ClaudeConfigDir is the TUI's Claude Code config directory (~/.claude).
func (t *TUI) ClaudeConfigDir() string { return filepath.Join(t.CLI.Home, ".claude") }

// SessionFiles lists the agent's session files: Codex rollouts, or Claude
// Code transcripts and live-session registry files.
func (t *TUI) SessionFiles() ([]string, error) {
	var patterns []string
	if t.CLI.Kind == realcli.Codex {
		patterns = []string{filepath.Join(t.CodexHome(), "sessions", "*", "*", "*", "rollout-*.jsonl")}
	} else {
		patterns = []string{filepath.Join(t.ClaudeConfigDir(), "projects", "*", "*.jsonl"), filepath.Join(t.ClaudeConfigDir(), "sessions", "*.json")}
	}
	var out []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("realtui: %w", err)
		}
		out = append(out, m...)
	}
	return out, nil
}

// Close kills the tmux server (ending the pane and the agent), kills the
// agent by pid if it outlived the server and any Codex app-server daemon,
// and removes the socket directory. It is idempotent.
func (t *TUI) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	agent := t.agentPID
	previous := t.previous
	t.mu.Unlock()
	if agent == 0 {
		agent, _ = t.AgentPID()
	}
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := t.tmux(ctx, "kill-server"); err != nil && !strings.Contains(err.Error(), "no server running") &&
		!strings.Contains(err.Error(), "No such file") && !strings.Contains(err.Error(), "server exited") {
		errs = append(errs, err)
	}
	for _, p := range previous {
		if err := stopPID(p.pid, p.runs); err != nil {
			errs = append(errs, err)
		}
	}
	for _, pid := range []int{agent, t.PanePID} {
		if pid <= 1 {
			continue
		}
		if err := stopPID(pid, nil); err != nil {
			errs = append(errs, err)
		}
	}
	// A server kill-server could not reach (its socket was removed, or
	// other panes keep it up) is stopped by its pid: SIGTERM ends tmux.
	if t.serverRuns() {
		_ = syscall.Kill(t.ServerPID, syscall.SIGTERM)
		if err := stopPID(t.ServerPID, t.serverRuns); err != nil {
			errs = append(errs, err)
		}
	}
	if t.CLI.Kind == realcli.Codex {
		for _, f := range []string{"daemon.pid", "daemon-updater.pid"} {
			data, err := os.ReadFile(filepath.Join(t.CodexHome(), "app-server-daemon", f))
			if err != nil {
				continue
			}
			var p struct {
				PID int `json:"pid"`
			}
			if json.Unmarshal(data, &p) == nil && p.PID > 1 {
				if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
					errs = append(errs, fmt.Errorf("realtui: kill codex daemon %d: %w", p.PID, err))
				}
			}
		}
	}
	if t.sockDir != "" {
		if err := os.RemoveAll(t.sockDir); err != nil {
			errs = append(errs, fmt.Errorf("realtui: %w", err))
		}
	}
	return errors.Join(errs...)
}
