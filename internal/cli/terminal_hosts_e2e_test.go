package cli

import (
	"encoding/json"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestE2EServeWithoutSocketsCLIWithSockets: a `serve` runs on the home but
// was started without the tmux socket of the agent's private server (as
// run.sh's serve is); a command that knows the socket lists the pane and
// `send --wait` returns the exact reply, the Turn followed by serve's host
// (the command does not follow it itself).
func TestE2EServeWithoutSocketsCLIWithSockets(t *testing.T) {
	cliEnv := codexEnv(t)
	hostEnv := maps.Clone(cliEnv)
	delete(hostEnv, "CLAWCONNECT_TMUX_SOCKETS")
	hostEnv["HOME"] = t.TempDir()
	hostEnv["OPENCLAW_URL"], hostEnv["OPENCLAW_PASSWORD"] = "ws://127.0.0.1:9", "unused"
	_, logPath := startHelper(t, hostEnv, "TestHelperServe")
	row := waitSendableRow(t, cliEnv)
	out, stderr, err := runTerminal(t.Context(), cliEnv, "send", "--terminal", row.ID, "--wait", "--timeout", "90s", "--json", "ECHO=through-serve")
	if err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("send --wait: %v\nstdout:\n%s\nstderr:\n%s\nserve log:\n%s", err, out, stderr, b)
	}
	var v termapi.TurnView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("send --wait --json: %v\n%s", err, out)
	}
	if v.Status != "idle" || v.Result == nil || v.Result.Outcome != "completed" || v.Result.Text != "through-serve" {
		t.Fatalf("turn = %+v", v)
	}
	if strings.Contains(stderr, "no monitor host runs") {
		t.Fatalf("the command followed the Turn itself although serve runs:\n%s", stderr)
	}
}

// TestE2ENoHostApproveThenStatusWait: with no monitor host at all, the
// commands follow their Turn themselves: send says its Turn is unfollowed,
// status --wait sees the approval prompt, approve follows the approved
// Turn to its end, and status --wait reports it idle and completed.
func TestE2ENoHostApproveThenStatusWait(t *testing.T) {
	envm := codexEnv(t)
	ctx := t.Context()
	row := waitSendableRow(t, envm)
	out, stderr, err := runTerminal(ctx, envm, "send", "--terminal", row.ID, "--json", "TOOLCALL: ESCALATE touch approved.txt")
	if err != nil {
		t.Fatalf("send: %v\n%s\n%s", err, out, stderr)
	}
	var sent termapi.SendResult
	if err := json.Unmarshal([]byte(out), &sent); err != nil || sent.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("send = %s (%v)", out, err)
	}
	if !strings.Contains(stderr, "no monitor host runs; turn "+sent.TurnID+" is followed once `clawconnect terminal daemon` or `clawconnect serve` starts") {
		t.Fatalf("send without a host did not say its Turn is unfollowed:\n%s", stderr)
	}
	turnView := func(what string, args ...string) termapi.TurnView {
		t.Helper()
		out, stderr, err := runTerminal(ctx, envm, args...)
		if err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", what, err, out, stderr)
		}
		var v termapi.TurnView
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%s --json: %v\n%s", what, err, out)
		}
		return v
	}
	v := turnView("status --wait", "status", sent.TurnID, "--wait", "--timeout", "90s", "--json")
	if v.Status != "waiting_for_openclaw" || v.Approval == nil || !strings.Contains(v.Approval.Command, "touch approved.txt") {
		t.Fatalf("before approval: %+v", v)
	}
	v = turnView("approve", "approve", sent.TurnID, "--fingerprint", v.Approval.Fingerprint, "--json")
	if v.Status != "idle" || v.Result == nil || v.Result.Outcome != "completed" ||
		!strings.HasPrefix(v.Result.Text, strings.TrimSpace(fakemodel.ToolResultPrefix)) {
		t.Fatalf("approve without a host returned %+v, want the Turn followed to its end", v)
	}
	if v = turnView("status --wait", "status", sent.TurnID, "--wait", "--json"); v.Status != "idle" || v.Result.Outcome != "completed" {
		t.Fatalf("after approval: %+v", v)
	}
}

// TestE2EWatchFiresWhenHostStarts: a watch set while no monitor host runs
// says so; the human's task in the pane ends before any host runs; once a
// host starts, the watch settles completed with the reply and queues its
// notification.
func TestE2EWatchFiresWhenHostStarts(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{Width: 200, Height: 50})
	envm := map[string]string{
		"CLAWCONNECT_HOME": t.TempDir(), "CLAWCONNECT_TMUX_SOCKETS": tui.Socket,
		"CLAWCONNECT_TMUX_DEFAULT_SERVER": "off",
	}
	ctx := t.Context()
	row := waitSendableRow(t, envm)
	const origin = "agent:main:watcher"
	out, stderr, err := runTerminal(ctx, envm, "watch", row.ID, "--origin", origin, "--json")
	if err != nil {
		t.Fatalf("watch: %v\n%s\n%s", err, out, stderr)
	}
	var w watch.View
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.Status != store.WatchActive {
		t.Fatalf("watch = %s (%v)", out, err)
	}
	if !strings.Contains(stderr, "no monitor host runs; the watch is followed once") {
		t.Fatalf("watch without a host did not say it is unfollowed:\n%s", stderr)
	}
	if err := tui.Submit(ctx, "ECHO=watched-without-a-host"); err != nil {
		t.Fatal(err)
	}
	// The human's task ends with nobody following the watch: the reply is
	// on the screen (besides the prompt) and the TUI is idle again.
	if screen, err := tui.WaitFor(ctx, "the reply", func(screen string) bool {
		return strings.Count(screen, "watched-without-a-host") >= 2 && tui.Idle(screen)
	}); err != nil {
		t.Fatalf("%v:\n%s", err, screen)
	}
	if v := watchStatus(t, envm, w.WatchID); v.Status != store.WatchActive {
		t.Fatalf("watch settled with no host: %+v", v)
	}
	startHelperDaemon(t, envm)
	var v watch.View
	if !poll.WithinEvery(90*time.Second, 200*time.Millisecond, func() bool {
		v = watchStatus(t, envm, w.WatchID)
		return v.Status != store.WatchActive
	}) {
		t.Fatalf("the watch never fired once a host started: %+v", v)
	}
	if v.Status != store.WatchCompleted || v.Settlement == nil || v.Settlement.Text != "watched-without-a-host" || len(v.Notifications) != 1 {
		t.Fatalf("watch once a host runs = %+v", v)
	}
}

// watchStatus is `terminal watch-status ID --json` in envm.
func watchStatus(t *testing.T, envm map[string]string, id string) watch.View {
	t.Helper()
	out, stderr, err := runTerminal(t.Context(), envm, "watch-status", id, "--json")
	if err != nil {
		t.Fatalf("watch-status: %v\n%s\n%s", err, out, stderr)
	}
	var v watch.View
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("watch-status --json: %v\n%s", err, out)
	}
	return v
}
