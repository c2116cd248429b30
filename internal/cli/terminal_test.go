package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal"
)

// TestServeHostsTerminalTurns checks the wiring serve uses: the monitor host
// runs on the store serve owns and answers the terminal commands on its
// socket, and stops with serve.
func TestServeHostsTerminalTurns(t *testing.T) {
	home := t.TempDir()
	envm := map[string]string{"CLAWCONNECT_HOME": home, "CLAWCONNECT_TMUX_DEFAULT_SERVER": "off"}
	env := Env{Getenv: func(k string) string { return envm[k] }, Stdout: io.Discard, Stderr: io.Discard}
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(home, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, stop := startTerminalHost(ctx, env, st, slog.New(slog.DiscardHandler))
	sock := filepath.Join(home, terminal.SocketName)
	var c *terminal.Client
	deadline := time.Now().Add(10 * time.Second)
	for c == nil {
		if c, err = terminal.Dial(sock); err != nil && time.Now().After(deadline) {
			t.Fatalf("no terminal socket: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	res, err := c.List(ctx)
	if err != nil || len(res.Terminals) != 0 {
		t.Fatalf("list over the socket = %+v, %v", res, err)
	}
	if _, err := c.Status(ctx, "turn-20260101T000000-00000000"); !errors.Is(err, terminal.ErrNotFound) {
		t.Fatalf("status of an unknown turn over the socket: %v", err)
	}
	if _, err := c.Send(ctx, terminal.SendRequest{TerminalID: "nope", Request: "x"}); !errors.Is(err, terminal.ErrBadInput) {
		t.Fatalf("malformed send over the socket: %v", err)
	}
	// The CLI commands find the host and use it.
	out, _, err := runTerminal(ctx, envm, "list", "--json")
	if err != nil || out == "" {
		t.Fatalf("terminal list through the host: %q, %v", out, err)
	}
	if _, _, err := runTerminal(ctx, envm, "send", "--terminal", "bad", "x"); ExitCode(err) != ExitUsage {
		t.Fatalf("send with a malformed terminal id: exit %d (%v)", ExitCode(err), err)
	}
	if _, _, err := runTerminal(ctx, envm, "send", "x"); ExitCode(err) != ExitUsage {
		t.Fatalf("send without a target: exit %d (%v)", ExitCode(err), err)
	}
	// Text a terminal would take as keys is refused as bad input, by the
	// socket and by the commands, naming what is wrong; invalid UTF-8 too,
	// which the socket's JSON would otherwise have replaced.
	const tid = "terminal:v2:tmux:claude:s:0.0:1"
	if _, err := c.Send(ctx, terminal.SendRequest{TerminalID: tid, Request: "bye\u0003\u0003"}); !errors.Is(err, terminal.ErrBadInput) || !strings.Contains(err.Error(), "U+0003") {
		t.Fatalf("send of Ctrl-C over the socket: %v", err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"send", "--terminal", tid, "bye\u0003\u0003"}, "U+0003 (ETX, Ctrl-C) at byte offset 3"},
		{[]string{"send", "--terminal", tid, "!id > proof.txt"}, "starts with '!'"},
		{[]string{"send", "--terminal", tid, "x\u007f/cost"}, "U+007F"},
		{[]string{"send", "--terminal", tid, "a\xff"}, "UTF-8"},
		{[]string{"respond", "turn-20260101T000000-00000000", "a\u001b[201~\r/exit\r"}, "U+001B"},
	} {
		_, _, err := runTerminal(ctx, envm, tt.args...)
		if ExitCode(err) != ExitUsage || err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "nothing was typed") {
			t.Errorf("terminal %q: exit %d (%v), want exit %d saying %q", tt.args, ExitCode(err), err, ExitUsage, tt.want)
		}
	}
	stop()
	if _, err := terminal.Dial(sock); err == nil {
		t.Fatal("the socket still answers after the host stopped")
	}
}

func TestStartTerminalHostWithoutSharedStore(t *testing.T) {
	t.Parallel()
	svc, stop := startTerminalHost(t.Context(), Env{}, nil, slog.New(slog.DiscardHandler))
	if svc != nil {
		t.Error("a Service without a store")
	}
	stop() // a read-only or private store: nothing runs, nothing to stop
}
