package openclaw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
	"github.com/clawconnect/clawconnect/termapi"
)

// buildOnce builds the clawconnect binary once per test binary run; the
// end-to-end tests share it.
var buildOnce struct {
	sync.Once
	bin string
	err error
	out []byte
}

// binary returns the path of a freshly built clawconnect binary.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "clawconnect-plugin-e2e-")
		if err != nil {
			buildOnce.err = err
			return
		}
		buildOnce.bin = filepath.Join(dir, "clawconnect")
		build := exec.Command("go", "build", "-o", buildOnce.bin, "./cmd/clawconnect")
		build.Dir = filepath.Join(srcDir(), "..", "..")
		buildOnce.out, buildOnce.err = build.CombinedOutput()
	})
	if buildOnce.err != nil {
		t.Fatalf("build clawconnect: %v\n%s", buildOnce.err, buildOnce.out)
	}
	return buildOnce.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := stopShared(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the shared plugin rig:", err)
		code = 1
	}
	if buildOnce.bin != "" {
		_ = os.RemoveAll(filepath.Dir(buildOnce.bin))
	}
	os.Exit(code)
}

// sharedSockets is how many tmux sockets the shared rig's daemon watches:
// one per test that uses the shared rig (startRig fails when they run out).
const sharedSockets = 14

// shared is the package's one real gateway with this plugin loaded (its
// service runs the daemon over one clawconnect home) and the fake model
// that serves it and every test's coding agent: a gateway takes 20–60 s to
// start, so the tests that need no gateway or daemon of their own share it.
// Each test still has its own session key, coding agent and tmux server.
// The daemon learns the tmux sockets from its environment when the gateway
// starts, so they are reserved up front and handed out one per test; the
// tests run one after another, so the daemon sees one pane at a time.
var shared struct {
	mu      sync.Mutex
	started bool
	err     error
	dir     string // holds the home and the sockets
	home    string
	model   *fakemodel.Server
	g       *realgateway.Gateway
	tmuxEnv []string
	sockets []string
	next    int // the next unused socket
}

// sharedRig returns the shared gateway, model and home and a tmux socket of
// the caller's own, starting the gateway on first use.
func sharedRig(t *testing.T) (g *realgateway.Gateway, model *fakemodel.Server, home, socket string, tmuxEnv []string) {
	t.Helper()
	bin := binary(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.started = true
		shared.err = startShared(bin)
		if shared.err == nil {
			t.Logf("shared plugin rig: gateway ready at %s in %v", shared.g.URL(), shared.g.StartDuration().Round(time.Millisecond))
		}
	}
	if shared.err != nil {
		t.Fatalf("start the shared plugin rig: %v", shared.err)
	}
	if shared.next == len(shared.sockets) {
		t.Fatalf("the shared plugin rig's %d tmux sockets are used up: raise sharedSockets", len(shared.sockets))
	}
	socket = shared.sockets[shared.next]
	shared.next++
	return shared.g, shared.model, shared.home, socket, shared.tmuxEnv
}

// startShared starts the shared rig; call with shared.mu held.
func startShared(bin string) (err error) {
	shared.dir, err = os.MkdirTemp("", "ccplug-") // short: tmux socket paths are limited
	if err != nil {
		return err
	}
	shared.home = filepath.Join(shared.dir, "home")
	if err := os.Mkdir(shared.home, 0o700); err != nil {
		return err
	}
	for i := range sharedSockets {
		shared.sockets = append(shared.sockets, filepath.Join(shared.dir, fmt.Sprintf("tmux-%d.sock", i)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	// Every test's prompts pass approveOnCallback: it only acts on an
	// approval callback, which only the approval tests provoke.
	if shared.model, err = fakemodel.Start(ctx, fakemodel.Options{Rewrite: approveOnCallback}); err != nil {
		return err
	}
	shared.tmuxEnv = []string{"CLAWCONNECT_TMUX_SOCKETS=" + strings.Join(shared.sockets, ","), "CLAWCONNECT_TMUX_DEFAULT_SERVER=off"}
	shared.g, err = realgateway.Start(ctx, realgateway.Options{ModelServer: shared.model, ToolSearchOff: true, ExtraEnv: shared.tmuxEnv,
		Plugins: []realgateway.Plugin{{ID: "clawconnect", Dir: Dir(), Config: map[string]any{"binary": bin, "home": shared.home}, Install: true}}})
	return err
}

// stopShared stops the shared rig if it was started.
func stopShared() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	var errs []error
	if shared.g != nil {
		errs = append(errs, shared.g.Close())
	}
	if shared.model != nil {
		errs = append(errs, shared.model.Close())
	}
	if shared.dir != "" {
		errs = append(errs, os.RemoveAll(shared.dir))
	}
	return errors.Join(errs...)
}

// rigOptions configures startRig.
type rigOptions struct {
	// Kind is the coding agent in the pane; realcli.Codex by default.
	Kind realcli.Kind
	// TUIArgs are appended to the agent's command line.
	TUIArgs []string
	// OwnDaemon: the test gets a gateway, fake model and home of its own,
	// and the plugin does not start `clawconnect terminal daemon`; the test
	// runs it (rig.startDaemon). Without it the test uses the package's
	// shared gateway (see shared), whose model applies approveOnCallback.
	OwnDaemon bool
}

// rig is the whole loop but the model: a real gateway with this plugin
// loaded, a real coding agent TUI in a private tmux server, the fake model
// serving both, and a clawconnect home the plugin's daemon (or the test's)
// runs over.
type rig struct {
	t          *testing.T
	ctx        context.Context
	bin, home  string
	model      *fakemodel.Server
	tui        *realtui.TUI
	g          *realgateway.Gateway
	gc         *gateway.Client
	env        []string // the clawconnect environment
	terminalID string
	daemon     *daemonProc // the test's daemon (rigOptions.OwnDaemon)
	run        string      // unique to this rig: see key
}

// rigRuns numbers the rigs of one test binary run.
var rigRuns atomic.Int64

// key makes a session key or idempotency key unique to this rig: the
// shared gateway outlives a test, so a second run of it (-count) must not
// meet the first run's sessions or reuse its message ids.
func (r *rig) key(name string) string { return name + "-" + r.run }

// daemonProc is a `clawconnect terminal daemon` the test started.
type daemonProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited and was reaped
}

// running reports whether the daemon has not exited.
func (d *daemonProc) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// requireE2E skips unless CLAWCONNECT_E2E=1.
func requireE2E(t *testing.T) {
	t.Helper()
	if os.Getenv("CLAWCONNECT_E2E") != "1" {
		t.Skip("set CLAWCONNECT_E2E=1 to run against the real gateway and coding agents")
	}
}

// startRig starts everything and returns once a daemon serves its socket
// and the agent's pane is sendable.
func startRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	requireE2E(t)
	if o.Kind == "" {
		o.Kind = realcli.Codex
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	t.Cleanup(cancel)
	r := &rig{t: t, ctx: ctx, bin: binary(t), run: fmt.Sprintf("%d-%d", os.Getpid(), rigRuns.Add(1))}
	var tmuxEnv []string
	// Registered before the TUI's own cleanup, so it runs after it: the
	// TUI's tmux server, pane and agent are gone, whatever the test did to
	// their socket.
	t.Cleanup(func() {
		if r.tui == nil {
			return
		}
		if left := r.tui.Leftovers(); len(left) > 0 {
			t.Errorf("the rig left processes running: %v (tmux server %d)", left, r.tui.ServerPID)
		}
	})
	if o.OwnDaemon {
		r.home = t.TempDir()
		r.model = fakemodel.New(t, fakemodel.Options{})
		r.tui = realtui.Require(t, o.Kind, r.model, realtui.Options{Width: 200, Height: 50, Args: o.TUIArgs})
		tmuxEnv = []string{"CLAWCONNECT_TMUX_SOCKETS=" + r.tui.Socket, "CLAWCONNECT_TMUX_DEFAULT_SERVER=off"}
		cfg := map[string]any{"binary": r.bin, "home": r.home, "daemon": false}
		g, err := realgateway.Start(ctx, realgateway.Options{ModelServer: r.model, ToolSearchOff: true, ExtraEnv: tmuxEnv,
			Plugins: []realgateway.Plugin{{ID: "clawconnect", Dir: Dir(), Config: cfg, Install: true}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = g.Close() })
		r.g = g
	} else {
		var socket string
		r.g, r.model, r.home, socket, tmuxEnv = sharedRig(t)
		r.tui = realtui.Require(t, o.Kind, r.model, realtui.Options{Width: 200, Height: 50, Args: o.TUIArgs, Socket: socket})
	}
	g := r.g
	var err error
	if !strings.Contains(string(g.Hello()), `"clawconnect.callback"`) {
		t.Fatal("hello-ok does not list clawconnect.callback: the plugin did not load")
	}
	r.env = append(os.Environ(), append(tmuxEnv, "CLAWCONNECT_HOME="+r.home, "OPENCLAW_URL="+g.URL(), "OPENCLAW_GATEWAY_TOKEN="+g.Token())...)
	if r.gc, err = gateway.Dial(ctx, gateway.Options{URL: g.URL(), Token: g.Token()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.gc.Close() })
	if o.OwnDaemon {
		r.daemon = r.startDaemon()
	}
	r.waitSendable(2 * time.Minute)
	return r
}

// cli runs clawconnect with args in the rig's environment and returns its
// standard output.
func (r *rig) cli(args ...string) (string, error) {
	cmd := exec.CommandContext(r.ctx, r.bin, args...)
	cmd.Env = r.env
	out, err := cmd.Output()
	return string(out), err
}

// startDaemon starts `clawconnect terminal daemon` as the plugin's service
// would and returns it; the test's cleanup kills it if it still runs.
func (r *rig) startDaemon() *daemonProc {
	r.t.Helper()
	cmd := exec.Command(r.bin, "terminal", "daemon")
	cmd.Env = append(slices.Clone(r.env), "CLAWCONNECT_LOG_LEVEL=debug")
	logf, err := os.OpenFile(filepath.Join(r.home, "daemon.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(done)
	}()
	r.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return &daemonProc{cmd: cmd, done: done}
}

// hostLive returns nil once the daemon is registered as a live monitor
// host on the rig's store.
func (r *rig) hostLive() error {
	st, err := sqlite.Open(r.t.Context(), sqlite.Options{Path: filepath.Join(r.home, sqlite.FileName)})
	if err != nil {
		return err
	}
	defer st.Close()
	if _, ok, err := hostpkg.Live(r.t.Context(), st); err != nil || !ok {
		return fmt.Errorf("no live monitor host (%v)", err)
	}
	return nil
}

// waitSendable waits for the daemon to be a live host and a sendable agent pane
// (the same process in two listings in a row: Codex's launcher hands over
// to its native binary during start-up).
func (r *rig) waitSendable(timeout time.Duration) {
	r.t.Helper()
	id, out := "", ""
	var serr, err error
	if !poll.WithinEvery(timeout, 300*time.Millisecond, func() bool {
		serr = r.hostLive()
		out, err = r.cli("terminal", "list", "--json")
		var res termapi.ListResult
		if serr == nil && err == nil && json.Unmarshal([]byte(out), &res) == nil && len(res.Terminals) == 1 && len(res.Terminals[0].AvailableActions) > 0 {
			if res.Terminals[0].ID == id {
				return true
			}
			id = res.Terminals[0].ID
		}
		return false
	}) {
		r.t.Fatalf("no live daemon (%v) or sendable pane: %v\n%s", serr, err, out)
	}
	r.terminalID = id
}

// ask starts a run of session key with message, as a user of S would.
func (r *rig) ask(key, message, idem string) {
	r.t.Helper()
	if _, err := r.gc.Call(r.ctx, "chat.send", map[string]any{"sessionKey": key, "message": message, "idempotencyKey": idem, "deliver": false}); err != nil {
		r.t.Fatal(err)
	}
}

// sendTool is the user message that makes S's model call
// clawconnect_terminal_send with request on the rig's pane.
func (r *rig) sendTool(request string) string {
	args, _ := json.Marshal(map[string]string{"terminal_id": r.terminalID, "request": request})
	return "hand this to the agent TOOLUSE: clawconnect_terminal_send " + string(args)
}

// callbackRow is one user row of S that carries a ClawConnect callback.
type callbackRow struct {
	Text, IdempotencyKey, Type, TurnID string
	At                                 time.Time // the row's timestamp
}

var (
	ansi   = regexp.MustCompile("\x1b\\[[0-9;]*m")
	typeRe = regexp.MustCompile(`Message type: ([a-z]+)`)
	turnRe = regexp.MustCompile(`Turn: (turn-[A-Za-z0-9-]+)`)
)

// callbacks reads S's chat.history: its callback rows and how many user
// rows it has in all.
func (r *rig) callbacks(key string) (rows []callbackRow, users int) {
	h, err := r.gc.History(r.ctx, gateway.HistoryRequest{SessionKey: key, Limit: 200})
	if err != nil {
		return nil, 0
	}
	for _, m := range h.Messages {
		if m.Role != "user" {
			continue
		}
		users++
		if !strings.Contains(m.Text, "[ClawConnect callback]") {
			continue
		}
		row := callbackRow{Text: m.Text, IdempotencyKey: m.IdempotencyKey, At: time.UnixMilli(m.Timestamp)}
		if s := typeRe.FindStringSubmatch(m.Text); s != nil {
			row.Type = s[1]
		}
		if s := turnRe.FindStringSubmatch(m.Text); s != nil {
			row.TurnID = s[1]
		}
		rows = append(rows, row)
	}
	return rows, users
}

// waitCallbacks waits until S holds at least n callback rows.
func (r *rig) waitCallbacks(key string, n int, timeout time.Duration) []callbackRow {
	r.t.Helper()
	var rows []callbackRow
	if !poll.WithinEvery(timeout, 300*time.Millisecond, func() bool { rows, _ = r.callbacks(key); return len(rows) >= n }) {
		r.t.Fatalf("S has %d callback rows, want %d; history:\n%s\ngateway log %s\ndaemon log %s", len(rows), n,
			r.transcript(key), r.g.LogPath(), filepath.Join(r.home, "daemon.log"))
	}
	return rows
}

// transcript is S's history for a failure message.
func (r *rig) transcript(key string) string {
	h, err := r.gc.History(r.ctx, gateway.HistoryRequest{SessionKey: key, Limit: 50})
	if err != nil {
		return err.Error()
	}
	var rows []string
	for _, m := range h.Messages {
		rows = append(rows, m.Role+" ["+m.IdempotencyKey+m.RunID+"]: "+m.Text)
	}
	return strings.Join(rows, "\n---\n")
}

// waitTranscript waits until key's chat.history holds want.
func (r *rig) waitTranscript(key, want string, timeout time.Duration) {
	r.t.Helper()
	tr := ""
	if !poll.WithinEvery(timeout, 300*time.Millisecond, func() bool { tr = r.transcript(key); return strings.Contains(tr, want) }) {
		r.t.Fatalf("%s's history has no %q:\n%s", key, want, tr)
	}
}

// status is `clawconnect terminal status --json TURN_ID`.
func (r *rig) status(turnID string) termapi.TurnView {
	r.t.Helper()
	out, err := r.cli("terminal", "status", "--json", turnID)
	if err != nil {
		r.t.Fatalf("status %s: %v", turnID, err)
	}
	var v termapi.TurnView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		r.t.Fatalf("status %s: %v\n%s", turnID, err, out)
	}
	return v
}

// codexCompletedAt is the timestamp of the task_complete record Codex
// wrote for the reply that contains marker, or the zero time.
func (r *rig) codexCompletedAt(marker string) time.Time {
	files, err := r.tui.SessionFiles()
	if err != nil {
		return time.Time{}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(data)) {
			var ev struct {
				Timestamp time.Time `json:"timestamp"`
				Payload   struct {
					Type             string `json:"type"`
					LastAgentMessage string `json:"last_agent_message"`
				} `json:"payload"`
			}
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Payload.Type == "task_complete" && strings.Contains(ev.Payload.LastAgentMessage, marker) {
				return ev.Timestamp
			}
		}
	}
	return time.Time{}
}

// logLatency logs, for the callback row of a Codex reply containing
// marker, where the time from Codex's task_complete record to the row in S
// went: detection and claim (our monitor), then delivery (our outbox, the
// plugin's method and chat.send) until the gateway acked the run.
func (r *rig) logLatency(row callbackRow, marker string) {
	r.t.Helper()
	done := r.codexCompletedAt(marker)
	st, err := sqlite.Open(r.ctx, sqlite.Options{Path: filepath.Join(r.home, sqlite.FileName)})
	if err != nil || done.IsZero() {
		r.t.Logf("no latency breakdown: %v (task_complete found: %v)", err, !done.IsZero())
		return
	}
	defer st.Close()
	claim, err := st.GetCompletionClaim(r.ctx, row.TurnID)
	if err != nil {
		r.t.Logf("no latency breakdown: %v", err)
		return
	}
	cb, err := st.GetCallback(r.ctx, claim.CallbackMessageID)
	if err != nil {
		r.t.Logf("no latency breakdown: %v", err)
		return
	}
	var inj, wake struct {
		At        int64 `json:"at"`
		AttemptAt int64 `json:"attempt_at"`
		SentAt    int64 `json:"sent_at"`
	}
	_ = json.Unmarshal(cb.Injection, &inj)
	_ = json.Unmarshal(cb.Wake, &wake)
	ms := func(a, b int64) time.Duration { return time.Duration(b-a) * time.Millisecond }
	claimed := claim.ClaimedAt
	r.t.Logf("Codex's task_complete record → callback user row in S: %v (record → claim %v; claim → attempt %v; connect %v; "+
		"clawconnect.callback %v; chat.send %v; the row is stamped %v after the claim)", row.At.Sub(done), time.UnixMilli(claimed).Sub(done),
		ms(claimed, inj.AttemptAt), ms(inj.AttemptAt, inj.SentAt), ms(inj.SentAt, inj.At), ms(inj.At, wake.At), ms(claimed, row.At.UnixMilli()))
	// The gateway's own account of the two calls (its handler times).
	if log, err := os.ReadFile(r.g.LogPath()); err == nil {
		for line := range strings.Lines(string(log)) {
			if strings.Contains(line, "res ") && (strings.Contains(line, "clawconnect.callback") || strings.Contains(line, "clawconnect-callback:")) {
				r.t.Logf("gateway: %s", strings.TrimSpace(ansi.ReplaceAllString(line, "")))
			}
		}
	}
}

// daemonLog is the tail of the test's daemon log, for failure messages.
func (r *rig) daemonLog() string {
	b, err := os.ReadFile(filepath.Join(r.home, "daemon.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}
