package terminal

import (
	"path/filepath"
	"testing"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	turns "github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/testbed/fakehost"
)

// TestStartOnAnotherHostsPane: a run started on another machine's pane
// (its version 3 terminal id) is queued for that machine's host, which
// types it; the run follows the Turn that host made.
func TestStartOnAnotherHostsPane(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	hostB := fakehost.Start(t, st, "hostb", fakehost.Accept("turn-on-b", "session-on-b"))
	svc := turns.NewService(turns.Options{Store: st, Host: "hosta", HostKey: make([]byte, 32)})
	a := New(Options{ID: IDCodex, Turns: svc})
	t.Cleanup(func() { _ = a.Dispose(ctx) })
	const pane = "terminal:v3:hostb:tmux:codex:work:0.0:4242"
	h, err := a.Start(ctx, executor.Task{}, executor.StartOptions{SessionKey: "agent:main:s1", Message: "Run the tests", AgentID: pane})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := a.lookup(h); err != nil || r.turnID != "turn-on-b" {
		t.Fatalf("run = %+v, %v; want host B's turn-on-b", r, err)
	}
	ops := hostB.Ops()
	if len(ops) != 1 || ops[0].Op != "send" || fakehost.Sent(ops[0]).TerminalID != pane {
		t.Fatalf("host B ran %+v", ops)
	}
}
