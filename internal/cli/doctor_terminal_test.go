package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestDoctorNamesWhoFollowsEachTurn: doctor names the process whose work
// lease follows each open Turn, active watch and undelivered callback,
// and fails, naming the command that starts a host, while open terminal
// work has no live host.
func TestDoctorNamesWhoFollowsEachTurn(t *testing.T) {
	home := t.TempDir()
	ctx := t.Context()
	st := openHomeStore(t, home)
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
	done.Turn.Status = termapi.TurnIdle
	if err := st.WriteTurn(ctx, store.TurnWrite{Turn: done.Turn, Also: func(ctx context.Context, tx store.TerminalTx) error {
		return tx.PutCallback(ctx, &store.Callback{MessageID: "msg-cb-1", TurnID: done.Turn.TurnID, SessionID: "session-2", Kind: "completion",
			SessionKey: "agent:main:main", Message: []byte(`{"id":"msg-cb-1"}`), Status: termapi.CallbackPending, CreatedAt: 10, UpdatedAt: 10})
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

// TestDoctorNamesWhoRunsEachTransition: doctor names the process whose
// transition lease runs each open thread transition, and fails on an
// uncertain one, naming the command that settles it.
func TestDoctorNamesWhoRunsEachTransition(t *testing.T) {
	home := t.TempDir()
	ctx := t.Context()
	st := openHomeStore(t, home)
	now := time.Now()
	host := store.Process{ID: "host-a/pid-4242", Host: "host-a", PID: 4242, Start: "s", Role: "terminal host",
		StartedAt: now.UnixMilli(), HeartbeatAt: now.UnixMilli()}
	runner := store.Process{ID: "host-a/pid-4343", Host: "host-a", PID: 4343, Start: "s", Role: "transition",
		StartedAt: now.UnixMilli(), HeartbeatAt: now.UnixMilli()}
	for _, p := range []store.Process{host, runner} {
		if err := st.Heartbeat(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	running := storetest.Transition("transition-run", store.TransitionNewThread, nil, "key-1", "session-new-1")
	stuck := storetest.Transition("transition-stuck", store.TransitionClearThread, nil, "key-2", "session-new-2")
	for _, tr := range []*store.Transition{running, stuck} {
		if err := st.PrepareTransition(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ClaimWork(ctx, store.LeaseTransition, running.TransitionID, runner.ID, now.UnixMilli(), now.Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	stuck.Status, stuck.Reason = store.TransitionUncertain, "its process exited mid-transition"
	if err := st.AdvanceTransition(ctx, stuck); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLIEnv(t, map[string]string{"CLAWCONNECT_HOME": home}, "doctor", "--timeout", "1s")
	for _, want := range []string{
		"transition transition-run (new_thread, prepared) on terminal:v2:tmux:codex:s:0.0:42 is run by transition pid 4343",
		"[FAIL] terminal",
		"transition transition-stuck (clear_thread) on terminal:v2:tmux:codex:s:0.0:42 is uncertain: its process exited mid-transition",
		"clawconnect terminal resolve-transition transition-stuck --adopt",
	} {
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("doctor with two transitions = %v: no %q:\n%s", err, want, out)
		}
	}
}

// openHomeStore opens the SQLite store of home until the test ends.
func openHomeStore(t *testing.T, home string) *sqlstore.DB {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(home, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
