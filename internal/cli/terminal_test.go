package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
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
