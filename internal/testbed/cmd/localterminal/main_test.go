package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		want    []realcli.Kind
		wantErr string
	}{
		{nil, []realcli.Kind{realcli.Codex, realcli.ClaudeCode}, ""},
		{[]string{"-agents", "codex"}, []realcli.Kind{realcli.Codex}, ""},
		{[]string{"-agents", " claude-code , codex,codex"}, []realcli.Kind{realcli.ClaudeCode, realcli.Codex}, ""},
		{[]string{"-agents", "claude"}, nil, `unknown agent "claude": use codex, claude-code`},
		{[]string{"-agents", ""}, nil, "unknown agent"},
		{[]string{"extra"}, nil, "the only flags are -agents and -env-file"},
		{[]string{"-nope"}, nil, "not defined"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			got, err := parseFlags(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.agents); diff != "" {
				t.Errorf("agents (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "env")
	if err := peers.WriteEnvFile(path, envLines([]string{"/s/a.sock", "/s/b.sock"})); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"CLAWCONNECT_TMUX_SOCKETS": "/s/a.sock,/s/b.sock", "CLAWCONNECT_TMUX_DEFAULT_SERVER": "off"}
	if diff := cmp.Diff(want, readEnv(t, path)); diff != "" {
		t.Errorf("env file (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("env file mode: %v %v", fi, err)
	}
}

func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		m[k] = v
	}
	return m
}

// TestRealLocalTerminal runs the command as the README says: it waits for
// the env file, checks each socket it names serves one pane running the
// agent, then interrupts the command and checks the panes and the file are
// gone.
func TestRealLocalTerminal(t *testing.T) {
	peers.RequireE2E(t)
	envFile := filepath.Join(t.TempDir(), "env")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out strings.Builder
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-env-file", envFile}, &out, io.Discard) }()

	if !poll.WithinEvery(5*time.Minute, 200*time.Millisecond, func() bool {
		if _, err := os.Stat(envFile); err == nil {
			return true
		}
		select {
		case err := <-done:
			t.Fatalf("localterminal exited before it was ready: %v", err)
		default:
		}
		return false
	}) {
		t.Fatal("no env file after 5 minutes")
	}
	env := readEnv(t, envFile)
	if env["CLAWCONNECT_TMUX_DEFAULT_SERVER"] != "off" {
		t.Errorf("env file: %v, want CLAWCONNECT_TMUX_DEFAULT_SERVER=off", env)
	}
	sockets := strings.Split(env["CLAWCONNECT_TMUX_SOCKETS"], ",")
	if len(sockets) != 2 {
		t.Fatalf("CLAWCONNECT_TMUX_SOCKETS = %q, want the two agents' sockets", env["CLAWCONNECT_TMUX_SOCKETS"])
	}
	for _, s := range sockets {
		panes, err := exec.CommandContext(t.Context(), "tmux", "-S", s, "list-panes", "-a", "-F", "#{pane_id}").Output()
		if err != nil || strings.Count(strings.TrimSpace(string(panes)), "\n") != 0 {
			t.Errorf("tmux -S %s list-panes: %q %v, want one pane", s, panes, err)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("localterminal: %v", err)
	}
	for _, s := range sockets { // out is read only once run has returned
		if !strings.Contains(out.String(), "tmux -S "+s+" attach") {
			t.Errorf("output does not say how to watch %s:\n%s", s, out.String())
		}
	}
	if _, err := os.Stat(envFile); !os.IsNotExist(err) {
		t.Errorf("env file still there after exit: %v", err)
	}
	for _, s := range sockets {
		if err := exec.Command("tmux", "-S", s, "list-panes").Run(); err == nil {
			t.Errorf("the tmux server at %s still runs after exit", s)
		}
	}
	for _, want := range []string{"export CLAWCONNECT_TMUX_SOCKETS=", "codex", "claude-code", "Ctrl-C"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestAgentsStartInAModeThatAsks: Claude Code starts in its default
// permission mode (a Bash call asks for approval) and Codex with its
// user-input dialog enabled, so both can be made to ask.
func TestAgentsStartInAModeThatAsks(t *testing.T) {
	t.Parallel()
	if diff := cmp.Diff([]string{"--permission-mode", "default"}, askingArgs(realcli.ClaudeCode)); diff != "" {
		t.Errorf("claude-code args (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"--enable", "default_mode_request_user_input"}, askingArgs(realcli.Codex)); diff != "" {
		t.Errorf("codex args (-want +got):\n%s", diff)
	}
}
