package openclaw

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestE2EKill9DaemonBetweenClaimAndDelivery: the monitor host (`clawconnect
// terminal daemon`) claims the Turn's completion, with its callback in the
// same transaction, while the gateway is frozen (SIGSTOP), so the delivery
// attempt hangs under its 2-minute attempt lease; the daemon is killed with
// SIGKILL; the gateway resumes and a new daemon starts. The new daemon
// proves the old one dead and delivers before the dead one's lease would
// have run out, and S holds exactly one callback run, under the callback's
// idempotency key (the killed attempt's clawconnect.callback, if it reached
// the gateway, was deduplicated).
func TestE2EKill9DaemonBetweenClaimAndDelivery(t *testing.T) {
	r := startRig(t, rigOptions{OwnDaemon: true})
	st, err := sqlite.Open(r.ctx, sqlite.Options{Path: filepath.Join(r.home, sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	S := r.key("agent:main:cc-kill9-s")
	// Codex answers after 6 s: time for S's run to end before the freeze.
	r.ask(S, r.sendTool("WAIT=6000 ECHO=cc-kill9-ok"), r.key("cc-kill9-send"))
	var turnID, h string
	if !poll.WithinEvery(2*time.Minute, 200*time.Millisecond, func() bool {
		h = r.transcript(S)
		if i := strings.Index(h, `"turn_id": "turn-`); i >= 0 && strings.Contains(h, "assistant [") && strings.Contains(h[i:], "FAKE-TOOL-RESULT") {
			turnID = strings.Trim(strings.Fields(h[i+len(`"turn_id": `):])[0], `",`)
			return true
		}
		return false
	}) {
		t.Fatalf("S's send run did not finish; history:\n%s", h)
	}
	if err := syscall.Kill(r.g.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := true
	defer func() {
		if frozen {
			_ = syscall.Kill(r.g.PID(), syscall.SIGCONT)
		}
	}()
	var held *store.Callback
	var cbs []*store.Callback
	if !poll.WithinEvery(2*time.Minute, 20*time.Millisecond, func() bool {
		cbs, err = st.TurnCallbacks(r.ctx, turnID, 10)
		if err == nil && len(cbs) == 1 && cbs[0].LeaseUntil > time.Now().UnixMilli() && cbs[0].Status == termapi.CallbackPending {
			held = cbs[0]
		}
		return held != nil
	}) {
		t.Fatalf("no delivery attempt in flight for %s: %+v, %v", turnID, cbs, err)
	}
	if err := r.daemon.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.daemon.done
	// The claim was written before any call left the daemon.
	claim, err := st.GetCompletionClaim(r.ctx, turnID)
	if err != nil || claim.CallbackMessageID != held.MessageID {
		t.Fatalf("completion claim = %+v, %v (callback %s)", claim, err, held.MessageID)
	}
	if err := syscall.Kill(r.g.PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	frozen = false
	r.daemon = r.startDaemon()
	var got *store.Callback
	if !poll.WithinEvery(3*time.Minute, 100*time.Millisecond, func() bool {
		got, err = st.GetCallback(r.ctx, held.MessageID)
		return err == nil && got.Status == termapi.CallbackDelivered
	}) {
		t.Fatalf("callback after the restart = %+v, %v\nnew daemon running: %v\ndaemon log:\n%s", got, err,
			r.daemon.running(), r.daemonLog())
	}
	if got.DeliveredAt >= held.LeaseUntil || got.LeaseOwner == held.LeaseOwner {
		t.Fatalf("delivered at %d by %s: the killed daemon's attempt lease (until %d, %s) was waited out",
			got.DeliveredAt, got.LeaseOwner, held.LeaseUntil, held.LeaseOwner)
	}
	var wake struct {
		IdempotencyKey string `json:"idempotency_key"`
	}
	_ = json.Unmarshal(got.Wake, &wake)
	rows := r.waitCallbacks(S, 1, time.Minute)
	if len(rows) != 1 || rows[0].TurnID != turnID || !strings.Contains(rows[0].Text, "cc-kill9-ok") ||
		wake.IdempotencyKey == "" || rows[0].IdempotencyKey != wake.IdempotencyKey+":user" {
		t.Fatalf("S's callback rows = %+v (wake key %q); history:\n%s", rows, wake.IdempotencyKey, r.transcript(S))
	}
	// The run it started has finished and no second one came.
	if _, err := r.gc.Call(r.ctx, "agent.wait", map[string]any{"runId": wake.IdempotencyKey, "timeoutMs": 30000}); err != nil {
		t.Fatal(err)
	}
	if rows, users := r.callbacks(S); len(rows) != 1 || users != 2 {
		t.Fatalf("S has %d callback rows and %d user rows, want 1 and 2; history:\n%s", len(rows), users, r.transcript(S))
	}
	t.Logf("delivered %s by the new daemon %d ms before the killed daemon's attempt lease would have run out; attempts %d",
		got.MessageID, held.LeaseUntil-got.DeliveredAt, got.Attempts)
}
