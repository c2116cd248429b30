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

	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
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
	hostA := startNamespacedHost(t, "mh-host-a", dbURL)
	startNamespacedHost(t, "mh-host-b", dbURL)

	// The pane of B as every machine names it, once B published it sendable.
	var bID string
	deadline := time.Now().Add(3 * time.Minute)
	for bID == "" {
		out := nsCLI(t, hostA, dbURL, "list", "--json")
		var l struct {
			Hosts []terminal.HostView `json:"hosts"`
		}
		_ = json.Unmarshal([]byte(out), &l)
		for _, h := range l.Hosts {
			if h.Host == "mh-host-b" && h.Live && len(h.Terminals) == 1 && len(h.Terminals[0].AvailableActions) > 0 {
				bID = h.Terminals[0].ID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("host B never published a sendable pane; A lists:\n%s", out)
		}
		time.Sleep(time.Second)
	}
	if !strings.HasPrefix(bID, "terminal:v3:mh-host-b:tmux:codex:") {
		t.Fatalf("B's pane id %q does not name host B", bID)
	}
	out := nsCLI(t, hostA, dbURL, "send", "--terminal", bID, "--wait", "--timeout", "120s", "--json", "ECHO=reply-from-host-b")
	var v terminal.TurnView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("send --json: %v\n%s", err, out)
	}
	if v.Status != "idle" || v.Result == nil || v.Result.Text != "reply-from-host-b" || v.TerminalID != bID {
		t.Fatalf("turn = %+v", v)
	}
}

// startNamespacedHost starts the test binary as TestHelperNamespacedHost in
// new UTS, pid and mount namespaces named host, and returns the pid of
// the process that entered them (nsenter's target).
func startNamespacedHost(t *testing.T, host, dbURL string) int {
	t.Helper()
	cmd := exec.Command("unshare", "--uts", "--pid", "--fork", "--mount-proc", "--kill-child",
		os.Args[0], "-test.run=^TestHelperNamespacedHost$", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), "CLAWCONNECT_TEST_HELPER_DAEMON=1", "CLAWCONNECT_TEST_HOSTNAME="+host,
		"CLAWCONNECT_DATABASE_URL="+dbURL, "CLAWCONNECT_HOME="+t.TempDir(), "CLAWCONNECT_TMUX_DEFAULT_SERVER=off")
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
// its own and runs `clawconnect terminal daemon` on it until SIGTERM.
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
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	env := map[string]string{"CLAWCONNECT_TMUX_SOCKETS": tui.Socket}
	getenv := func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	if err := Run(ctx, Env{Args: []string{"terminal", "daemon"}, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: getenv}); err != nil {
		t.Fatal(err)
	}
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
