package server_test

import (
	"path/filepath"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/testbed/fakehost"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// TestTerminalSendToAnotherHostsPane: terminal_send with the version 3
// id of another machine's pane is queued for that machine's host, which
// runs it; the tool returns that host's answer.
func TestTerminalSendToAnotherHostsPane(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	hostB := fakehost.Start(t, st, "hostb", fakehost.Accept("turn-on-b", "session-on-b"))
	svc := terminal.NewService(terminal.Options{Store: st, Host: "hosta", HostKey: make([]byte, 32)})
	b := setup(t, func(o *server.Options) { o.Terminals = svc })
	cs := connect(t, b.srv.MCPServer(testRegistry(t).FullScope(), taskapi.Identity{}), nil)

	const pane = "terminal:v3:hostb:tmux:codex:work:0.0:4242"
	res := call(t, cs, "terminal_send", map[string]any{"terminal_id": pane, "request": "Run the tests"})
	if res.IsError {
		t.Fatalf("terminal_send: %s", text(res))
	}
	if got := structured(t, res)["turn_id"]; got != "turn-on-b" {
		t.Fatalf("turn_id = %v, want host B's turn-on-b", got)
	}
	ops := hostB.Ops()
	if len(ops) != 1 || ops[0].Op != "send" || fakehost.Sent(ops[0]).TerminalID != pane || fakehost.Sent(ops[0]).Request != "Run the tests" {
		t.Fatalf("host B ran %+v", ops)
	}
}
