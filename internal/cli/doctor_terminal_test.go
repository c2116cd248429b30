package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
)

// TestDoctorNamesWhoFollowsEachTurn: doctor names the process whose
// monitor lease follows an open Turn, and fails, naming the command that
// starts a host, while an open Turn has none.
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
	env := map[string]string{"CLAWCONNECT_HOME": home}

	out, _, err := runCLIEnv(t, env, "doctor", "--timeout", "1s")
	if err == nil || !strings.Contains(out, "[FAIL] terminal") || !strings.Contains(out, "turn-20260101T000000-00000001") ||
		!strings.Contains(out, "no live monitor host") || !strings.Contains(out, "clawconnect terminal daemon") {
		t.Fatalf("doctor with an unfollowed Turn = %v:\n%s", err, out)
	}

	now := time.Now()
	p := store.Process{ID: "host-a/pid-4242", Host: "host-a", PID: 4242, Start: "s", Role: "terminal host",
		StartedAt: now.UnixMilli(), HeartbeatAt: now.UnixMilli()}
	if err := st.Heartbeat(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AcquireMonitorLease(ctx, "turn-20260101T000000-00000001", p.ID, now.UnixMilli(), now.Add(time.Hour).UnixMilli()); err != nil {
		t.Fatal(err)
	}
	out, _, _ = runCLIEnv(t, env, "doctor", "--timeout", "1s")
	if !strings.Contains(out, "turn turn-20260101T000000-00000001 (created) is followed by terminal host pid 4242") ||
		strings.Contains(out, "[FAIL] terminal") {
		t.Fatalf("doctor with a followed Turn:\n%s", out)
	}
}
