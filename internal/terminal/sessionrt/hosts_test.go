package sessionrt

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/testbed/fakehost"
)

// TestContinueOnAnotherHostsPane: continuing a Session bound to another
// machine's pane queues the send for that machine's host, which runs it.
func TestContinueOnAnotherHostsPane(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const pane = "terminal:v3:hostb:tmux:codex:work:0.0:4242"
	now := time.Now().UnixMilli()
	err = st.CreateTermSession(ctx, &store.TermSession{SessionID: "session-on-b", Agent: "codex", Status: store.SessionBound,
		Binding: &store.Binding{BindingID: "binding-1", Generation: 1, TerminalID: pane, TerminalKey: "key-1", BoundAt: now},
		Lineage: store.Lineage{CreatedBy: "test"}, CreatedAt: now, UpdatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	hostB := fakehost.Start(t, st, "hostb", fakehost.Accept("turn-on-b", "session-on-b"))
	svc := terminal.NewService(terminal.Options{Store: st, Host: "hosta", HostKey: make([]byte, 32)})
	rt := Runtime(func(context.Context) (Sessions, error) { return svc, nil })
	if _, err := rt.Continue(ctx, agentsession.Ref{SessionID: "session-on-b"}, "and now the docs"); err != nil {
		t.Fatal(err)
	}
	ops := hostB.Ops()
	if len(ops) != 1 || ops[0].Op != "send" || fakehost.Sent(ops[0]).SessionID != "session-on-b" || fakehost.Sent(ops[0]).Request != "and now the docs" {
		t.Fatalf("host B ran %+v", ops)
	}
}
