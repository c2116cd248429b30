package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/postgres"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
	"github.com/clawconnect/clawconnect/plugins/openclaw"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestE2ETerminalSendAcrossHosts runs three terminal hosts, each in a UTS
// and pid namespace of its own (its own host name, /proc and tmux server,
// a real Codex on the fake model, and `terminal daemon`), on one
// PostgreSQL store, and one real OpenClaw gateway with the ClawConnect
// plugin on host A's side (A is configured with it, B and C are not, so
// every callback is A's to deliver):
//   - a send from host A's command line to host B's pane is typed by B and
//     returns B's exact reply; A's list shows every host;
//   - session S's model calls the plugin's clawconnect_terminal_send on host
//     C's pane: C types it, its Codex answers, and exactly one callback run
//     arrives in S;
//   - B's daemon is killed with SIGKILL mid-Turn: the Turn stalls host_lost
//     and its callback reaches the origin session; B's next daemon follows
//     it again to its reply, whose callback follows, each in one attempt;
//   - a Turn for B's pane forged into the store is refused by B.
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
	began := time.Now()
	dbURL := freshDatabase(t, base)
	// B and C start their Codex while the gateway starts; A needs the
	// gateway's URL and token.
	hostB := startNamespacedHost(t, "mh-host-b", dbURL, t.TempDir())
	startNamespacedHost(t, "mh-host-c", dbURL, t.TempDir())
	homeA := t.TempDir()
	og := startOriginGateway(t, dbURL, "mh-host-a", homeA)
	hostA := startNamespacedHost(t, "mh-host-a", dbURL, homeA, "OPENCLAW_URL="+og.g.URL(), "OPENCLAW_GATEWAY_TOKEN="+og.g.Token())
	panes := sendablePanes(t, hostA, dbURL, "mh-host-b", "mh-host-c")
	bID, cID := panes["mh-host-b"], panes["mh-host-c"]
	t.Logf("three hosts live with sendable panes %s after the start", time.Since(began).Round(time.Second))

	out := nsCLI(t, hostA, dbURL, "send", "--terminal", bID, "--wait", "--timeout", "120s", "--json", "ECHO=reply-from-host-b")
	var v termapi.TurnView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("send --json: %v\n%s", err, out)
	}
	if v.Status != "idle" || v.Result == nil || v.Result.Text != "reply-from-host-b" || v.TerminalID != bID {
		t.Fatalf("turn = %+v", v)
	}

	// Session S hands work to C's pane through the plugin's tool, which
	// runs A's command line in the gateway: C types it, and A delivers its
	// one callback into S.
	const S = "agent:main:mh-plugin-s"
	args, _ := json.Marshal(map[string]string{"terminal_id": cID, "request": "ECHO=reply-from-host-c"})
	og.ask(S, "hand this to the agent TOOLUSE: clawconnect_terminal_send "+string(args), "mh-plugin-send")
	rowsS := og.waitCallbacks(S, 1, 4*time.Minute)
	cTurn := rowsS[0].turnID
	if len(rowsS) != 1 || rowsS[0].typ != "done" || cTurn == "" || !strings.Contains(rowsS[0].text, "reply-from-host-c") {
		t.Fatalf("S's callback rows = %+v; history:\n%s", rowsS, og.transcript(S))
	}
	if v = status2(t, hostA, dbURL, cTurn); v.TerminalID != cID || v.OriginSession != S || v.Result == nil || v.Result.Text != "reply-from-host-c" {
		t.Fatalf("the plugin's Turn on C = %+v", v)
	}
	oneAttemptEach(t, dbURL, cTurn, "done")
	t.Logf("S's one callback run from host C's pane %s after the start", time.Since(began).Round(time.Second))

	// B's daemon is killed with SIGKILL while its Turn runs (the model
	// holds the reply): a live host stalls the Turn host_lost once B's
	// lease passed, and A delivers that callback into S2; B's next daemon
	// follows the Turn again to its reply.
	const S2 = "agent:main:mh-cli-s2"
	out = nsCLI(t, hostA, dbURL, "send", "--terminal", bID, "--json", "--origin-session", S2, "--gateway-url", og.g.URL(),
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
	rows2 := og.waitCallbacks(S2, 1, 60*time.Second)
	// A stall is a blocked message: it waits for OpenClaw to renew,
	// cancel or close the Turn.
	if rows2[0].typ != "blocked" || rows2[0].turnID != sent.TurnID || !strings.Contains(rows2[0].text, "The Turn stalled: host_lost") {
		t.Fatalf("S2's first callback row = %+v, want the Turn's host_lost stall", rows2[0])
	}
	t.Logf("host_lost callback run in S2 %s after the kill", time.Since(killed).Round(time.Second))
	if err := syscall.Kill(initB, syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	if !poll.WithinEvery(4*time.Minute, time.Second, func() bool { v = status(); return v.Status == "idle" || v.Status == "failed" }) || v.Status != "idle" {
		t.Fatalf("after B's daemon restarted its Turn is %+v, want idle with the reply", v)
	}
	if v.Result == nil || v.Result.Text != "after-host-b-returned" {
		t.Fatalf("turn after B returned = %+v", v)
	}
	// The completion's callback too; one delivery of each, in one attempt
	// (no host spent an attempt it could not make).
	rows2 = og.waitCallbacks(S2, 2, 60*time.Second)
	if len(rows2) != 2 || rows2[1].typ != "done" || rows2[1].turnID != sent.TurnID || !strings.Contains(rows2[1].text, "after-host-b-returned") {
		t.Fatalf("S2's callback rows = %+v; history:\n%s", rows2, og.transcript(S2))
	}
	oneAttemptEach(t, dbURL, sent.TurnID, "blocked", "done")

	// A Turn for B's pane written straight into the store by someone who
	// is not B (it cannot seal it with B's key) is refused by B.
	forged := forgeTurn(t, dbURL, sent.TurnID)
	if !poll.WithinEvery(60*time.Second, time.Second, func() bool { v = status2(t, hostA, dbURL, forged); return v.Status == "failed" }) {
		t.Fatalf("B did not refuse the forged Turn: %+v", v)
	}
	if v.Result == nil || v.Result.Match != "forged_turn" {
		t.Fatalf("forged Turn = %+v, want failed forged_turn", v)
	}

	// Everything since S's callback (B's Turn, its two callbacks through
	// the same outbox, the forged Turn) is the window in which a second
	// callback into S would have shown: S still holds its request and the
	// one callback run, and no other session received one.
	if rows, users := og.callbacks(S); len(rows) != 1 || users != 2 {
		t.Fatalf("S has %d callback rows and %d user rows, want 1 and 2 (the request); history:\n%s", len(rows), users, og.transcript(S))
	}
	if rows, users := og.callbacks(S2); len(rows) != 2 || users != 2 {
		t.Fatalf("S2 has %d callback rows and %d user rows, want 2 and 2; history:\n%s", len(rows), users, og.transcript(S2))
	}
	if rows, _ := og.callbacks("agent:main:main"); len(rows) != 0 {
		t.Fatalf("the main session received callbacks: %+v", rows)
	}
	t.Logf("whole run: %s", time.Since(began).Round(time.Second))
}

// sendablePanes waits until host pid's command line lists its own host
// live and every host in hosts live with one sendable pane, and returns
// each host's pane id. (The command line lists its own host's panes from
// the tmux it sees, and a host's tmux server lives in its namespaces.)
func sendablePanes(t *testing.T, pid int, dbURL string, hosts ...string) map[string]string {
	t.Helper()
	var listed string
	ids := map[string]string{}
	if !poll.WithinEvery(4*time.Minute, time.Second, func() bool {
		listed = nsCLI(t, pid, dbURL, "list", "--json")
		var l struct {
			Hosts []struct {
				Host      string                `json:"host"`
				Live      bool                  `json:"live"`
				Self      bool                  `json:"self"`
				Terminals []termapi.TerminalRow `json:"terminals"`
			} `json:"hosts"`
		}
		_ = json.Unmarshal([]byte(listed), &l)
		self := false
		for _, h := range l.Hosts {
			self = self || h.Self && h.Live
			if h.Live && slices.Contains(hosts, h.Host) && len(h.Terminals) == 1 && len(h.Terminals[0].AvailableActions) > 0 {
				ids[h.Host] = h.Terminals[0].ID
			}
		}
		return self && len(ids) == len(hosts)
	}) {
		t.Fatalf("the list does not show its own host live and a sendable pane on each of %v:\n%s", hosts, listed)
	}
	for _, h := range hosts {
		if !strings.HasPrefix(ids[h], "terminal:v3:"+h+":tmux:codex:") {
			t.Fatalf("%s's pane id %q does not name its host (panes %v)", h, ids[h], ids)
		}
	}
	return ids
}

// oneAttemptEach fails the test unless turnID's callbacks are exactly the
// message types want, oldest first, each delivered in one attempt.
func oneAttemptEach(t *testing.T, dbURL, turnID string, want ...string) {
	t.Helper()
	st, err := postgres.Open(t.Context(), postgres.Options{URL: dbURL})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cbs, err := st.TurnCallbacks(t.Context(), turnID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got, wantRows []string
	for _, cb := range slices.Backward(cbs) {
		var m struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(cb.Message, &m)
		got = append(got, fmt.Sprintf("%s %s/%d", m.Type, cb.Status, cb.Attempts))
	}
	for _, typ := range want {
		wantRows = append(wantRows, typ+" "+string(termapi.CallbackDelivered)+"/1")
	}
	if d := cmp.Diff(wantRows, got); d != "" {
		t.Fatalf("turn %s's callbacks (type status/attempts) (-want +got):\n%s", turnID, d)
	}
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
// new UTS, pid and mount namespaces named host, over the clawconnect home
// (where the host keeps its key), and returns the pid of the process that
// entered them (nsenter's target).
func startNamespacedHost(t *testing.T, host, dbURL, home string, env ...string) int {
	t.Helper()
	cmd := exec.Command("unshare", "--uts", "--pid", "--fork", "--mount-proc", "--kill-child",
		os.Args[0], "-test.run=^TestHelperNamespacedHost$", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), "CLAWCONNECT_TEST_HELPER_DAEMON=1", "CLAWCONNECT_TEST_HOSTNAME="+host,
		"CLAWCONNECT_DATABASE_URL="+dbURL, "CLAWCONNECT_HOME="+home, "CLAWCONNECT_TMUX_DEFAULT_SERVER=off")
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
		// unshare ignores SIGTERM while it waits for its child: the host's
		// pid 1 is told to stop, which stops its daemon first.
		if init, err := unshareChild(cmd.Process.Pid); err == nil {
			_ = syscall.Kill(init, syscall.SIGTERM)
		}
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
	// The daemon's exit is awaited once, here; one that exits on its own
	// ends this host, so the test fails at its next command rather than
	// waiting out a poll for a host that is gone.
	var daemon *exec.Cmd
	var exited chan struct{}
	start := func() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperTerminalDaemon$")
		cmd.Env = append(os.Environ(), "CLAWCONNECT_TMUX_SOCKETS="+tui.Socket)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		daemon, exited = cmd, done
	}
	stop := func(s os.Signal) {
		if daemon != nil {
			_ = daemon.Process.Signal(s)
			<-exited
			daemon, exited = nil, nil
		}
	}
	start()
	for {
		select {
		case s := <-sig:
			switch s {
			case syscall.SIGUSR1:
				stop(syscall.SIGKILL)
			case syscall.SIGUSR2:
				stop(syscall.SIGKILL)
				start()
			default:
				stop(syscall.SIGTERM)
				return
			}
		case <-exited:
			t.Fatalf("host %s: its terminal daemon exited on its own (%v)", host, daemon.ProcessState)
		}
	}
}

// namespaceInit returns the pid (in this pid namespace) of the first
// process unshare started: pid 1 of the host's namespace.
func namespaceInit(t *testing.T, unsharePid int) int {
	t.Helper()
	pid, err := unshareChild(unsharePid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func unshareChild(unsharePid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(unsharePid) + "/task/" + strconv.Itoa(unsharePid) + "/children")
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0, fmt.Errorf("unshare %d has children %q, want one", unsharePid, f)
	}
	return strconv.Atoi(f[0])
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

// originGateway is the origin's real OpenClaw gateway with the ClawConnect
// plugin, as a machine's host runs it, and a client reading its sessions.
type originGateway struct {
	t  *testing.T
	g  *realgateway.Gateway
	gc *gateway.Client
}

// startOriginGateway starts a real gateway with the plugin loaded on the
// side of host (named so, over its home and the store at dbURL): the
// plugin's tools run this test binary as host's `clawconnect` command
// line; its daemon is the host's own (the plugin starts none). The
// session models' fake answers each callback run with a fixed word, so a
// request the callback quotes (a WAIT) is not acted on again.
func startOriginGateway(t *testing.T, dbURL, host, home string) *originGateway {
	t.Helper()
	self, err := filepath.Abs(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsRune(self, '\'') {
		t.Fatalf("the test binary's path %q has a quote: the plugin's command cannot name it", self)
	}
	bin := filepath.Join(t.TempDir(), "clawconnect")
	script := "#!/bin/sh\nexec env " + asMainEnv + "=1 '" + self + "' -test.run='^$' -- \"$@\"\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	model := fakemodel.New(t, fakemodel.Options{Rewrite: func(p string) string {
		if strings.Contains(p, "[ClawConnect callback]") {
			return "ECHO=callback-noted"
		}
		return p
	}})
	// A start was seen taking over three minutes on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	g, err := realgateway.Start(ctx, realgateway.Options{ModelServer: model, ToolSearchOff: true,
		ExtraEnv: []string{"CLAWCONNECT_DATABASE_URL=" + dbURL, "CLAWCONNECT_TERMINAL_HOST=" + host, "CLAWCONNECT_TMUX_DEFAULT_SERVER=off"},
		Plugins:  []realgateway.Plugin{{ID: "clawconnect", Dir: openclaw.Dir(), Config: map[string]any{"binary": bin, "home": home, "daemon": false}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log tail:\n%s", g.LogTail(80))
		}
		if err := g.Close(); err != nil {
			t.Errorf("stop the gateway: %v", err)
		}
	})
	t.Logf("real gateway with the plugin ready in %s", g.StartDuration().Round(time.Second))
	if !strings.Contains(string(g.Hello()), `"clawconnect.callback"`) {
		t.Fatalf("hello-ok does not list clawconnect.callback: the plugin did not load\n%s", g.LogTail(60))
	}
	// chat.history was seen taking 34 s on a loaded machine.
	gc, err := gateway.Dial(t.Context(), gateway.Options{URL: g.URL(), Token: g.Token(), CallTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gc.Close() })
	return &originGateway{t: t, g: g, gc: gc}
}

// ask starts a run of session key with message, as its user would.
func (o *originGateway) ask(key, message, idem string) {
	o.t.Helper()
	if _, err := o.gc.Call(o.t.Context(), "chat.send", map[string]any{"sessionKey": key, "message": message, "idempotencyKey": idem, "deliver": false}); err != nil {
		o.t.Fatal(err)
	}
}

// callbackRow is one user row of a session that carries a ClawConnect
// callback.
type callbackRow struct{ text, typ, turnID string }

var (
	callbackTypeRe = regexp.MustCompile(`Message type: ([a-z]+)`)
	callbackTurnRe = regexp.MustCompile(`Turn: (turn-[A-Za-z0-9-]+)`)
)

// callbacks reads key's chat.history: its callback rows, oldest first, and
// how many user rows it has in all.
func (o *originGateway) callbacks(key string) (rows []callbackRow, users int) {
	o.t.Helper()
	h, err := o.gc.History(o.t.Context(), gateway.HistoryRequest{SessionKey: key, Limit: 200})
	if err != nil {
		o.t.Fatalf("chat.history of %s: %v", key, err)
	}
	for _, m := range h.Messages {
		if m.Role != "user" {
			continue
		}
		users++
		if !strings.Contains(m.Text, "[ClawConnect callback]") {
			continue
		}
		row := callbackRow{text: m.Text}
		if s := callbackTypeRe.FindStringSubmatch(m.Text); s != nil {
			row.typ = s[1]
		}
		if s := callbackTurnRe.FindStringSubmatch(m.Text); s != nil {
			row.turnID = s[1]
		}
		rows = append(rows, row)
	}
	return rows, users
}

// waitCallbacks waits until key holds at least n callback rows and returns
// them.
func (o *originGateway) waitCallbacks(key string, n int, timeout time.Duration) []callbackRow {
	o.t.Helper()
	var rows []callbackRow
	if !poll.WithinEvery(timeout, 500*time.Millisecond, func() bool { rows, _ = o.callbacks(key); return len(rows) >= n }) {
		o.t.Fatalf("%s has %d callback rows after %v, want %d; history:\n%s", key, len(rows), timeout, n, o.transcript(key))
	}
	return rows
}

// transcript is key's history, for a failure message.
func (o *originGateway) transcript(key string) string {
	h, err := o.gc.History(o.t.Context(), gateway.HistoryRequest{SessionKey: key, Limit: 50})
	if err != nil {
		return err.Error()
	}
	var rows []string
	for _, m := range h.Messages {
		rows = append(rows, m.Role+": "+m.Text)
	}
	return strings.Join(rows, "\n---\n")
}
