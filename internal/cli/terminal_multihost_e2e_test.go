package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestE2ETerminalSendAcrossHosts runs two terminal hosts, each in a UTS
// and pid namespace of its own (its own host name, /proc and tmux server,
// a real Codex on the fake model, and `terminal daemon`), on one
// PostgreSQL store. A send from host A's command line to host B's pane
// is typed by B and returns B's exact reply; A's list shows both hosts.
func TestE2ETerminalSendAcrossHosts(t *testing.T) {
	peers.RequireE2E(t)
	base := os.Getenv("TEST_DATABASE_URL")
	if base == "" {
		t.Skip("TEST_DATABASE_URL is not set")
	}
	if os.Geteuid() != 0 {
		t.Skip("namespaces for the hosts need root")
	}
	for _, tool := range []string{"unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s: %v", tool, err)
		}
	}
	dbURL := freshDatabase(t, base)
	// The origin's gateway: host A is configured with it, B is not (B
	// must leave every callback to A).
	gw := fakegateway.New(t, fakegateway.Options{})
	callbacks := make(chan callbackSeen, 16)
	gw.Handle(outbox.CallbackMethod, func(_ context.Context, params json.RawMessage) (any, error) {
		var p struct {
			TurnID  string `json:"turn_id"`
			Message struct {
				ID   string `json:"id"`
				Type string `json:"type"`
			} `json:"message"`
		}
		_ = json.Unmarshal(params, &p)
		callbacks <- callbackSeen{turnID: p.TurnID, id: p.Message.ID, typ: p.Message.Type}
		return map[string]any{"ok": true, "enqueued": true, "delivery_required": false, "message_id": p.Message.ID}, nil
	})
	hostA := startNamespacedHost(t, "mh-host-a", dbURL, "OPENCLAW_URL="+gw.URL())
	hostB := startNamespacedHost(t, "mh-host-b", dbURL)

	// The pane of B as every machine names it, once B published it sendable.
	var bID, listed string
	if !poll.WithinEvery(3*time.Minute, time.Second, func() bool {
		listed = nsCLI(t, hostA, dbURL, "list", "--json")
		var l struct {
			Hosts []terminal.HostView `json:"hosts"`
		}
		_ = json.Unmarshal([]byte(listed), &l)
		for _, h := range l.Hosts {
			if h.Host == "mh-host-b" && h.Live && len(h.Terminals) == 1 && len(h.Terminals[0].AvailableActions) > 0 {
				bID = h.Terminals[0].ID
			}
		}
		return bID != ""
	}) {
		t.Fatalf("host B never published a sendable pane; A lists:\n%s", listed)
	}
	if !strings.HasPrefix(bID, "terminal:v3:mh-host-b:tmux:codex:") {
		t.Fatalf("B's pane id %q does not name host B", bID)
	}
	out := nsCLI(t, hostA, dbURL, "send", "--terminal", bID, "--wait", "--timeout", "120s", "--json", "ECHO=reply-from-host-b")
	var v termapi.TurnView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("send --json: %v\n%s", err, out)
	}
	if v.Status != "idle" || v.Result == nil || v.Result.Text != "reply-from-host-b" || v.TerminalID != bID {
		t.Fatalf("turn = %+v", v)
	}

	// B's daemon is killed with SIGKILL while its Turn runs (the model
	// holds the reply): A's host stalls the Turn host_lost once B's lease
	// passed; B's next daemon follows it again to its reply.
	out = nsCLI(t, hostA, dbURL, "send", "--terminal", bID, "--json", "--origin-session", "agent:main:e2e", "--gateway-url", gw.URL(),
		"WAIT=75000 ECHO=after-host-b-returned")
	var sent termapi.SendResult
	if err := json.Unmarshal([]byte(out), &sent); err != nil || sent.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("send: %v\n%s", err, out)
	}
	initB := namespaceInit(t, hostB)
	if err := syscall.Kill(initB, syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	status := func() termapi.TurnView { return status2(t, hostA, dbURL, sent.TurnID) }
	if !poll.WithinEvery(90*time.Second, time.Second, func() bool { v = status(); return v.Status == "stalled" }) {
		t.Fatalf("90 s after B's daemon was killed its Turn is %+v, want stalled host_lost", v)
	}
	if !strings.HasPrefix(v.StalledReason, "host_lost") {
		t.Fatalf("stalled reason %q, want host_lost", v.StalledReason)
	}
	t.Logf("stalled host_lost %s after the kill", time.Since(killed).Round(time.Second))
	// Its stall callback reaches the origin's gateway, once, through A.
	stall := waitCallback(t, callbacks, sent.TurnID, 60*time.Second)
	t.Logf("host_lost callback %s (%s) %s after the kill", stall.id, stall.typ, time.Since(killed).Round(time.Second))
	if err := syscall.Kill(initB, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	if !poll.WithinEvery(4*time.Minute-time.Since(killed), time.Second, func() bool {
		if v = status(); v.Status == "failed" {
			t.Fatalf("after B's daemon restarted its Turn is %+v, want idle with the reply", v)
		}
		return v.Status == "idle"
	}) {
		t.Fatalf("after B's daemon restarted its Turn is %+v, want idle with the reply", v)
	}
	if v.Result == nil || v.Result.Text != "after-host-b-returned" {
		t.Fatalf("turn after B returned = %+v", v)
	}
	// The completion's callback too, once, each in one attempt (no host
	// spent an attempt it could not make).
	done := waitCallback(t, callbacks, sent.TurnID, 60*time.Second)
	if done.id == stall.id {
		t.Fatalf("the stall callback %s was delivered twice", stall.id)
	}
	if v = status(); v.CallbackDelivery == nil || v.CallbackDelivery.MessageID != done.id || v.CallbackDelivery.Status != "delivered" || v.CallbackDelivery.Attempts != 1 {
		t.Fatalf("completion callback = %+v, want %s delivered in one attempt", v.CallbackDelivery, done.id)
	}

	// A Turn for B's pane written straight into the store by someone who
	// is not B (it cannot seal it with B's key) is refused by B.
	forged := forgeTurn(t, dbURL, sent.TurnID)
	if !poll.WithinEvery(60*time.Second, time.Second, func() bool { v = status2(t, hostA, dbURL, forged); return v.Status == "failed" }) {
		t.Fatalf("B did not refuse the forged Turn: %+v", v)
	}
	if v.Result == nil || v.Result.Match != "forged_turn" {
		t.Fatalf("forged Turn = %+v, want failed forged_turn", v)
	}
	select {
	case c := <-callbacks:
		t.Fatalf("a callback beyond one per message: %+v", c)
	default:
	}
}

// callbackSeen is one clawconnect.callback the origin's gateway received.
type callbackSeen struct{ turnID, id, typ string }

// waitCallback returns the next callback the gateway received, which must
// be turnID's, within d.
func waitCallback(t *testing.T, seen <-chan callbackSeen, turnID string, d time.Duration) callbackSeen {
	t.Helper()
	select {
	case c := <-seen:
		if c.turnID != turnID {
			t.Fatalf("callback %+v, want one of turn %s", c, turnID)
		}
		return c
	case <-time.After(d):
		t.Fatalf("no callback of turn %s within %v", turnID, d)
	}
	return callbackSeen{}
}

// status2 is `terminal status --json ID` on host pid's command line.
func status2(t *testing.T, pid int, dbURL, id string) termapi.TurnView {
	t.Helper()
	var v termapi.TurnView
	out := nsCLI(t, pid, dbURL, "status", "--json", id)
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	return v
}

// forgeTurn writes into the store at dbURL a new Turn for the pane of the
// Turn like, as a process without that host's key would (a copy with a
// seal of its own), announces it, and returns its id.
func forgeTurn(t *testing.T, dbURL, like string) string {
	t.Helper()
	ctx := t.Context()
	st, err := postgres.Open(ctx, postgres.Options{URL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	orig, err := st.GetTurn(ctx, like)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	f := *orig
	f.TurnID = "turn-" + time.Now().UTC().Format("20060102T150405") + "-f0f0f0f0"
	f.Status, f.Result, f.Version, f.CreatedAt, f.UpdatedAt = termapi.TurnCreated, nil, 0, now, now
	f.UserRequest, f.Takeover.RequestText = "ECHO=forged", "ECHO=forged"
	f.HostSeal = strings.Repeat("ab", 32)
	sub := f.Takeover.Submission
	d := &store.Dispatch{TerminalKey: f.Takeover.TerminalKey, GenerationID: "dispatch-forged", SessionID: f.SessionID, TurnID: f.TurnID,
		MessageID: "msg-forged", MessageType: sub.MessageType, RequestHash: sub.RequestHash, Status: termapi.DispatchPrepared,
		BindingID: f.TerminalBindingID, BindingGeneration: f.TerminalBindingGeneration, PreparedAt: now}
	f.Takeover.Submission = store.Submission{MessageID: d.MessageID, MessageType: d.MessageType, RequestHash: d.RequestHash, Status: termapi.DispatchPrepared, PreparedAt: now}
	if err := st.CreateTurn(ctx, store.TurnCreate{Turn: &f, Dispatch: d}); err != nil {
		t.Fatal(err)
	}
	st.AnnounceTerminalWork(ctx)
	return f.TurnID
}

// startNamespacedHost starts the test binary as TestHelperNamespacedHost in
// new UTS, pid and mount namespaces named host, and returns the pid of
// the process that entered them (nsenter's target).
func startNamespacedHost(t *testing.T, host, dbURL string, env ...string) int {
	t.Helper()
	cmd := exec.Command("unshare", "--uts", "--pid", "--fork", "--mount-proc", "--kill-child",
		os.Args[0], "-test.run=^TestHelperNamespacedHost$", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), "CLAWCONNECT_TEST_HELPER_DAEMON=1", "CLAWCONNECT_TEST_HOSTNAME="+host,
		"CLAWCONNECT_DATABASE_URL="+dbURL, "CLAWCONNECT_HOME="+t.TempDir(), "CLAWCONNECT_TMUX_DEFAULT_SERVER=off")
	cmd.Env = append(cmd.Env, env...)
	logs, err := os.CreateTemp(t.TempDir(), host+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("host %s log:\n%s", host, b)
		}
	})
	return cmd.Process.Pid
}

// TestHelperNamespacedHost is not a test: TestE2ETerminalSendAcrossHosts
// runs the test binary with it as pid 1 of a pid namespace, which takes
// the host name given, starts Codex on the fake model in a tmux server of
// its own and runs `clawconnect terminal daemon` on it as a child process
// (TestHelperTerminalDaemon) until SIGTERM: SIGUSR1 kills that daemon with
// SIGKILL, SIGUSR2 starts a new one.
func TestHelperNamespacedHost(t *testing.T) {
	host := os.Getenv("CLAWCONNECT_TEST_HOSTNAME")
	if os.Getenv("CLAWCONNECT_TEST_HELPER_DAEMON") != "1" || host == "" {
		t.Skip("helper process only")
	}
	if err := syscall.Sethostname([]byte(host)); err != nil {
		t.Fatal(err)
	}
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{Width: 200, Height: 50})
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt, syscall.SIGUSR1, syscall.SIGUSR2)
	defer signal.Stop(sig)
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperTerminalDaemon$")
		cmd.Env = append(os.Environ(), "CLAWCONNECT_TMUX_SOCKETS="+tui.Socket)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	daemon := start()
	for s := range sig {
		switch s {
		case syscall.SIGUSR1:
			_ = daemon.Process.Kill()
			_ = daemon.Wait()
		case syscall.SIGUSR2:
			daemon = start()
		default:
			_ = daemon.Process.Signal(syscall.SIGTERM)
			_ = daemon.Wait()
			return
		}
	}
}

// namespaceInit returns the pid (in this pid namespace) of the first
// process unshare started: pid 1 of the host's namespace.
func namespaceInit(t *testing.T, unsharePid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(unsharePid) + "/task/" + strconv.Itoa(unsharePid) + "/children")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		t.Fatalf("unshare %d has children %q, want one", unsharePid, f)
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// nsCLI runs `clawconnect terminal args...` in the UTS namespace of the
// process pid (a host's), as that host's command line, and returns its
// stdout; a failure fails the test.
func nsCLI(t *testing.T, pid int, dbURL string, args ...string) string {
	t.Helper()
	b, _ := json.Marshal(args)
	cmd := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--uts", os.Args[0], "-test.run=^TestHelperCLI$")
	cmd.Env = append(os.Environ(), "CLAWCONNECT_TEST_HELPER_DAEMON=1", "CLAWCONNECT_TEST_CLI_ARGS="+string(b),
		"CLAWCONNECT_DATABASE_URL="+dbURL, "CLAWCONNECT_HOME="+t.TempDir(), "CLAWCONNECT_TMUX_DEFAULT_SERVER=off")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("terminal %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out.String(), errb.String())
	}
	s := out.String()
	// The helper test's own PASS/ok lines follow the command's output.
	if i := strings.LastIndex(s, "\nPASS"); i >= 0 {
		s = s[:i+1]
	}
	return strings.TrimSuffix(s, "PASS\n")
}

// TestHelperCLI is not a test: nsCLI runs the test binary with it as
// `clawconnect terminal ARGS` inside a host's namespace.
func TestHelperCLI(t *testing.T) {
	raw := os.Getenv("CLAWCONNECT_TEST_CLI_ARGS")
	if os.Getenv("CLAWCONNECT_TEST_HELPER_DAEMON") != "1" || raw == "" {
		t.Skip("helper process only")
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		t.Fatal(err)
	}
	if err := Run(t.Context(), Env{Args: append([]string{"terminal"}, args...), Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}); err != nil {
		t.Fatal(err)
	}
}
