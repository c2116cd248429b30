package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

// TestDoctorNamesWhoFollowsEachTurn: doctor names the process whose work
// lease follows each open Turn, active watch and undelivered callback,
// and fails, naming the command that starts a host, while open terminal
// work has no live host.
func TestDoctorNamesWhoFollowsEachTurn(t *testing.T) {
	home := t.TempDir()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(home, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sess := storetest.TermSession("session-1", "thread-1", "key-1")
	if err := st.CreateTermSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTurn(ctx, storetest.NewTurn("turn-20260101T000000-00000001", sess, 10)); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateWatch(ctx, storetest.NewWatch("watch-1", "key-w", 10)); err != nil {
		t.Fatal(err)
	}
	other := storetest.TermSession("session-2", "thread-2", "key-2")
	if err := st.CreateTermSession(ctx, other); err != nil {
		t.Fatal(err)
	}
	done := storetest.NewTurn("turn-20260101T000000-00000002", other, 10)
	if err := st.CreateTurn(ctx, done); err != nil {
		t.Fatal(err)
	}
	done.Turn.Status = store.TurnIdle
	if err := st.WriteTurn(ctx, store.TurnWrite{Turn: done.Turn, Also: func(ctx context.Context, tx store.TerminalTx) error {
		return tx.PutCallback(ctx, &store.Callback{MessageID: "msg-cb-1", TurnID: done.Turn.TurnID, SessionID: "session-2", Kind: "completion",
			SessionKey: "agent:main:main", Message: []byte(`{"id":"msg-cb-1"}`), Status: store.CallbackPending, CreatedAt: 10, UpdatedAt: 10})
	}}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CLAWCONNECT_HOME": home}

	out, _, err := runCLIEnv(t, env, "doctor", "--timeout", "1s")
	if err == nil || !strings.Contains(out, "[FAIL] terminal") || !strings.Contains(out, "turn-20260101T000000-00000001") ||
		!strings.Contains(out, "watch-1") || !strings.Contains(out, "msg-cb-1") ||
		!strings.Contains(out, "no live monitor host") || !strings.Contains(out, "clawconnect terminal daemon") {
		t.Fatalf("doctor with an unfollowed Turn = %v:\n%s", err, out)
	}

	now := time.Now()
	p := store.Process{ID: "host-a/pid-4242", Host: "host-a", PID: 4242, Start: "s", Role: "terminal host",
		StartedAt: now.UnixMilli(), HeartbeatAt: now.UnixMilli()}
	if err := st.Heartbeat(ctx, p); err != nil {
		t.Fatal(err)
	}
	until := now.Add(time.Hour).UnixMilli()
	for _, w := range []struct{ kind, id string }{{store.LeaseMonitor, "turn-20260101T000000-00000001"}, {store.LeaseWatch, "watch-1"}} {
		if _, err := st.ClaimWork(ctx, w.kind, w.id, p.ID, now.UnixMilli(), until); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ClaimCallback(ctx, "msg-cb-1", p.ID, now.UnixMilli(), until); err != nil {
		t.Fatal(err)
	}
	out, _, _ = runCLIEnv(t, env, "doctor", "--timeout", "1s")
	for _, want := range []string{
		"turn turn-20260101T000000-00000001 (created) is followed by terminal host pid 4242",
		"watch watch-1 on terminal:v2:tmux:codex:s:0.0:42 is followed by terminal host pid 4242",
		"callback msg-cb-1 of turn-20260101T000000-00000002 (pending, 0 attempt(s)) is being delivered by terminal host pid 4242",
	} {
		if !strings.Contains(out, want) || strings.Contains(out, "[FAIL] terminal") {
			t.Fatalf("doctor with followed work: no %q:\n%s", want, out)
		}
	}
	// The host dies: its leases still run, but no live host follows the
	// work any more.
	p.HeartbeatAt = now.Add(-time.Hour).UnixMilli()
	if err := st.Heartbeat(ctx, p); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLIEnv(t, env, "doctor", "--timeout", "1s")
	if err == nil || !strings.Contains(out, "[FAIL] terminal") || !strings.Contains(out, "no live monitor host") {
		t.Fatalf("doctor after the host died = %v:\n%s", err, out)
	}
}
