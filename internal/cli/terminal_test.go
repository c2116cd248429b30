package cli

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

// TestServeHostsTerminalTurns checks the wiring serve uses: the monitor host
// runs on the store serve opened and registers as a live host there, the
// terminal commands work on the same store, and the host leaves the
// registry when serve stops.
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
	svc, stop := startTerminalHost(ctx, env, st, slog.New(slog.DiscardHandler), "serve")
	waitHostLive(t, st, true)
	res, err := svc.List(ctx)
	if err != nil || len(res.Terminals) != 0 {
		t.Fatalf("list = %+v, %v", res, err)
	}
	// The CLI commands work on the shared store.
	out, _, err := runTerminal(ctx, envm, "list", "--json")
	if err != nil || out == "" {
		t.Fatalf("terminal list beside the host: %q, %v", out, err)
	}
	if _, _, err := runTerminal(ctx, envm, "status", "turn-20260101T000000-00000000"); ExitCode(err) != ExitNotFound {
		t.Fatalf("status of an unknown turn: exit %d (%v)", ExitCode(err), err)
	}
	if _, _, err := runTerminal(ctx, envm, "send", "--terminal", "bad", "x"); ExitCode(err) != ExitUsage {
		t.Fatalf("send with a malformed terminal id: exit %d (%v)", ExitCode(err), err)
	}
	if _, _, err := runTerminal(ctx, envm, "send", "x"); ExitCode(err) != ExitUsage {
		t.Fatalf("send without a target: exit %d (%v)", ExitCode(err), err)
	}
	// Text a terminal would take as keys is refused as bad input, naming
	// what is wrong; invalid UTF-8 too.
	const tid = "terminal:v2:tmux:claude:s:0.0:1"
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
	waitHostLive(t, st, false)
}

// waitHostLive waits (bounded) until the store's process registry has a
// live monitor host, or has none when live is false.
func waitHostLive(t *testing.T, reg hostpkg.Registered, live bool) {
	t.Helper()
	poll.Until(t, 30*time.Second, "the registry's live monitor host to be "+strconv.FormatBool(live), func() bool {
		_, ok, err := hostpkg.Live(t.Context(), reg)
		return err == nil && ok == live
	})
}

func TestStartTerminalHostWithoutSharedStore(t *testing.T) {
	t.Parallel()
	svc, stop := startTerminalHost(t.Context(), Env{}, nil, slog.New(slog.DiscardHandler), "serve")
	if svc != nil {
		t.Error("a Service without a store")
	}
	stop() // a read-only or private store: nothing runs, nothing to stop
}

// hostRegistered reports whether the SQLite store of home has a live
// monitor host now.
func hostRegistered(t *testing.T, home string) bool {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(home, sqlite.FileName)})
	if err != nil {
		return false
	}
	defer st.Close()
	_, ok, err := hostpkg.Live(t.Context(), st)
	return err == nil && ok
}

// TestMCPTerminalToolsHostTheStore: an mcp whose terminal tools are on is a
// live monitor host on its store as soon as the store opens (before any
// terminal tool call), unless CLAWCONNECT_MCP_TERMINAL_HOST is off, and
// stops being one when it exits.
func TestMCPTerminalToolsHostTheStore(t *testing.T) {
	for _, tc := range []struct {
		setting string
		host    bool
	}{{"", true}, {"off", false}} {
		t.Run("host="+tc.setting, func(t *testing.T) {
			home := t.TempDir()
			envm := map[string]string{"CLAWCONNECT_HOME": home, "CLAWCONNECT_TMUX_DEFAULT_SERVER": "off", "CLAWCONNECT_MCP_TERMINAL_HOST": tc.setting}
			env := Env{Getenv: func(k string) string { return envm[k] }, Stdout: io.Discard, Stderr: io.Discard}
			st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(home, sqlite.FileName)})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			l := &lazyTerminals{env: env, logger: slog.New(slog.DiscardHandler), ctx: t.Context(), host: mcpHostsTerminals(env, true)}
			defer l.close()
			if _, err := l.opened(st); err != nil {
				t.Fatal(err)
			}
			if !tc.host {
				if l.stop != nil {
					t.Fatal("a monitor host runs although CLAWCONNECT_MCP_TERMINAL_HOST is off")
				}
				return
			}
			waitHostLive(t, st, true)
			l.close()
			waitHostLive(t, st, false)
		})
	}
}
