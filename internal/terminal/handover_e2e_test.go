package terminal

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/ids"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox/outboxtest"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/termapi"
)

// The environment of a host process TestE2EHostProcessHelper runs.
const (
	hostStoreEnv  = "CLAWCONNECT_TEST_HOST_STORE"
	hostSocketEnv = "CLAWCONNECT_TEST_HOST_SOCKET"
	hostRoleEnv   = "CLAWCONNECT_TEST_HOST_ROLE"
	hostCallsEnv  = "CLAWCONNECT_TEST_HOST_CALLS"
)

// recordingGateway is a fake OpenClaw gateway that also appends each call
// ("<method> <message or run id>") to a file several processes share, so
// a test counts the deliveries of every host process.
type recordingGateway struct {
	gw   *outboxtest.Gateway
	path string
}

func (r recordingGateway) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	b, _ := json.Marshal(params)
	var p struct {
		Message struct {
			ID string `json:"id"`
		} `json:"message"`
		IdempotencyKey string `json:"idempotencyKey"`
	}
	_ = json.Unmarshal(b, &p)
	f, err := os.OpenFile(r.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	_, err = fmt.Fprintf(f, "%s %s%s\n", method, p.Message.ID, p.IdempotencyKey)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return r.gw.Call(ctx, method, params)
}

// TestE2EHostProcessHelper is not a test: TestE2ETwoHostsKill9HandsOverTurn
// runs it in child processes, each a long-lived terminal host (monitor
// host and callback outbox) on the shared store, until it is killed.
func TestE2EHostProcessHelper(t *testing.T) {
	path := os.Getenv(hostStoreEnv)
	if path == "" {
		t.Skip("run by TestE2ETwoHostsKill9HandsOverTurn")
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	terms, err := NewTmuxTerminals(tmux.Options{Sockets: []string{os.Getenv(hostSocketEnv)}, NoDefaultServer: true})
	if err != nil {
		t.Fatal(err)
	}
	gw := recordingGateway{gw: outboxtest.NewGateway(), path: os.Getenv(hostCallsEnv)}
	x := outbox.New(outbox.Options{Store: st, Dial: func(context.Context, string) (outbox.Caller, error) { return gw, nil }})
	svc := NewService(Options{Store: st, Terminals: terms, Agents: DefaultAgents()})
	h := hostpkg.New(svc, hostpkg.Options{Store: svc.o.Store, Role: os.Getenv(hostRoleEnv), Rescan: time.Second, Recheck: 2 * time.Second, Outbox: x})
	t.Fatalf("the host ended instead of running until killed: %v", h.Run(ctx))
}

// hostProcess is a child host process; done is closed when it has ended.
type hostProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startHostProcess(t *testing.T, path, socket, calls, role string) *hostProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestE2EHostProcessHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), hostStoreEnv+"="+path, hostSocketEnv+"="+socket, hostRoleEnv+"="+role, hostCallsEnv+"="+calls)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &hostProcess{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

// registered waits (bounded) until a live process with role is in the
// store's registry and returns it.
func registered(t *testing.T, reg store.ProcessRegistry, role string) store.Process {
	t.Helper()
	var ps []store.Process
	var err error
	var found store.Process
	if !poll.WithinEvery(30*time.Second, 50*time.Millisecond, func() bool {
		ps, err = reg.Processes(t.Context())
		for _, p := range ps {
			if p.Role == role {
				found = p
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no %q host registered: %+v, %v", role, ps, err)
	}
	return found
}

// TestE2ETwoHostsKill9HandsOverTurn: two host processes share one store
// and a real Codex pane answers slowly. The Turn is followed by host A;
// host B, running all along, leaves it to A. A is killed with SIGKILL in
// the middle of the Turn: B proves A dead, takes the Turn over long before
// A's lease would have run out, and completes it: exactly one completion
// claim and one callback, delivered once.
func TestE2ETwoHostsKill9HandsOverTurn(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.Codex, model)
	if owner.Self().Host == "" {
		t.Skip("proving a process dead needs /proc")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, sqlite.FileName)
	calls := filepath.Join(dir, "gateway-calls")
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx := t.Context()
	a := startHostProcess(t, path, rp.socket, calls, "terminal host A")
	hostA := registered(t, st, "terminal host A")

	// This process only sends; it runs no host.
	svc := NewService(Options{Store: st, Terminals: rp.terms, Agents: DefaultAgents()})
	res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "WAIT=12000 ECHO=handed-over", OriginSession: "agent:main:handover"})
	if err != nil || res.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("send = %+v, %v; screen:\n%s", res, err, rp.debug())
	}
	var held store.WorkLease
	var leases []store.WorkLease
	if !poll.WithinEvery(30*time.Second, 50*time.Millisecond, func() bool {
		leases, err = st.WorkLeases(ctx, store.LeaseMonitor, []string{res.TurnID})
		if err == nil && len(leases) == 1 && leases[0].Until > time.Now().UnixMilli() {
			held = leases[0]
		}
		return held.Owner == hostA.ID
	}) {
		t.Fatalf("host A does not follow the Turn: lease %+v, %v", leases, err)
	}
	startHostProcess(t, path, rp.socket, calls, "terminal host B")
	hostB := registered(t, st, "terminal host B")
	if v, err := svc.Status(ctx, res.TurnID); err != nil || !v.Status.Monitored() {
		t.Fatalf("the Turn ended before host A was killed: %+v, %v", v, err)
	}

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	killedAt := time.Now()
	// A's lease as A last renewed it: B must not wait for it to run out.
	// (B may already have proved A dead and freed it, which keeps A as its
	// owner and ends it now: that is not a renewal.)
	if ls, err := st.WorkLeases(ctx, store.LeaseMonitor, []string{res.TurnID}); err == nil && len(ls) == 1 && ls[0].Owner == hostA.ID && ls[0].Until > held.Until {
		held = ls[0]
	}
	v := waitTurnStatus(t, svc, res.TurnID, 90*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled)
	if v.Status != termapi.TurnIdle || v.Result == nil || v.Result.Text != "handed-over" {
		t.Fatalf("turn after host A was killed = %+v; screen:\n%s", v, rp.debug())
	}
	doneAt := time.Now()
	ls, err := st.WorkLeases(ctx, store.LeaseMonitor, []string{res.TurnID})
	if err != nil || len(ls) != 1 || ls[0].Owner != hostB.ID || ls[0].Fence <= held.Fence {
		t.Fatalf("monitor lease after the handover = %+v, %v; want host B's (%s) with a fence above %d", ls, err, hostB.ID, held.Fence)
	}
	if doneAt.UnixMilli() >= held.Until {
		t.Fatalf("the Turn was completed at %s, after host A's lease ran out (%s): host B waited instead of proving A dead",
			doneAt.Format(time.TimeOnly), time.UnixMilli(held.Until).Format(time.TimeOnly))
	}
	if claims := completionClaims(t, st, res.TurnID); claims != 1 {
		t.Fatalf("%d completion claims, want 1", claims)
	}
	var cs store.CallbackStore = st
	var cbs []*store.Callback
	if !poll.WithinEvery(60*time.Second, 100*time.Millisecond, func() bool {
		cbs, err = cs.TurnCallbacks(ctx, res.TurnID, 10)
		return err == nil && len(cbs) == 1 && cbs[0].Status == termapi.CallbackDelivered
	}) {
		t.Fatalf("callbacks of the Turn = %+v, %v; want one delivered", cbs, err)
	}
	b, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	sends := 0
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(line, "chat.send ") && strings.Contains(line, cbs[0].MessageID) {
			sends++
		}
	}
	if sends != 1 {
		t.Fatalf("the callback reached the gateway's chat.send %d times, want 1; calls:\n%s", sends, b)
	}
	t.Logf("host B completed the Turn %.1fs after host A was killed, %.1fs before A's lease would have run out; one completion claim, one callback, one chat.send",
		doneAt.Sub(killedAt).Seconds(), time.UnixMilli(held.Until).Sub(doneAt).Seconds())
}

// TestE2ERecoverTransitionsLeavesOtherHostsAlone: on a real Codex pane, a
// thread transition run by a live process on another host (an identity
// with another host and boot id, its transition lease renewed) keeps the
// pane blocked through every recovery scan, which never touches it; once
// its lease runs out, the next scan aborts it (nothing was typed) and the
// pane takes a Turn again.
func TestE2ERecoverTransitionsLeavesOtherHostsAlone(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.Codex, model)
	svc, st := newRealService(t, rp)
	ctx := t.Context()
	ts := st
	remote := owner.Identity{ID: "elsewhere/4242/beef", Host: "elsewhere/pid:[4026531836]", PID: 4242, Start: "another-boot:1"}
	now := nowMs()
	p := rp.pane
	tr := &store.Transition{TransitionID: "transition-" + ids.UUID(), Kind: store.TransitionNewThread, Agent: p.Agent, TerminalID: p.TerminalID,
		TerminalKey: p.Key, PID: p.PID, ProcessBirth: p.Birth, Workspace: p.Cwd, TargetSessionID: ids.Session(time.Now()), ToGeneration: 1,
		Plan: []string{"/new"}, Owner: remote.Encode(), PreparedAt: now, Status: store.TransitionPrepared, UpdatedAt: now}
	l, err := st.ClaimWork(ctx, store.LeaseTransition, tr.TransitionID, remote.ID, now, now+time.Hour.Milliseconds())
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.PrepareTransition(ctx, tr); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if n, err := svc.RecoverTransitions(ctx); err != nil || n != 0 {
			t.Fatalf("recover = %d, %v; want the live remote owner's transition left alone", n, err)
		}
	}
	if got, err := ts.GetTransition(ctx, tr.TransitionID); err != nil || got.Status != store.TransitionPrepared {
		t.Fatalf("the remote owner's transition = %+v, %v; want it prepared", got, err)
	}
	if _, err := svc.Send(ctx, termapi.SendRequest{TerminalID: p.TerminalID, Request: "ECHO=while-transitioning"}); err == nil {
		t.Fatal("a send went through while another host's transition is open on the pane")
	}
	// The remote owner stops renewing: its lease ends.
	if err := st.ReleaseWork(ctx, l); err != nil {
		t.Fatal(err)
	}
	if n, err := svc.RecoverTransitions(ctx); err != nil || n != 1 {
		t.Fatalf("recover after the lease ran out = %d, %v; want 1", n, err)
	}
	if got, err := ts.GetTransition(ctx, tr.TransitionID); err != nil || got.Status != store.TransitionAborted {
		t.Fatalf("the abandoned transition = %+v, %v; want aborted", got, err)
	}
	runHost(t, svc)
	sendAndWait(t, svc, rp, "ECHO=after-the-remote-transition", "after-the-remote-transition")
}
