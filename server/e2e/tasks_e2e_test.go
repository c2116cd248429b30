package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/pgtest"
)

// TestTasksRequesterHTTP runs the MCP Tasks extension's official requester
// (testdata/tasks.mjs) against clawconnect serve on the real gateway, with
// two personal tokens: a task-enabled run_task settles to the agent's
// exact reply; the other token gets, for a running task, exactly what an
// unknown id gets and cannot cancel it; its owner cancels it.
func TestTasksRequesterHTTP(t *testing.T) {
	t.Parallel() // own home and processes; the shared gateway is never restarted
	f := setup(t)
	in := peers.Require(t, peers.MCPExtTasks)
	const alice, bob = "e2e-alice-token-0123456789", "e2e-bob-token-0123456789"
	f.extraEnv = append(f.extraEnv, "MCP_USER_TOKENS=alice:"+alice+",bob:"+bob)
	url := f.serve(t)

	script := stageScript(t, in, peers.MCPExtTasks, "tasks.mjs")
	c := in.MustCommand(t, peers.MCPExtTasks)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := c.Cmd(ctx, script, url, alice, bob)
	cmd.Env = append(f.env(), c.Env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ext-tasks requester: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	var doc struct {
		Run struct {
			Kind, TaskID, Status, LastStatus, Text, JobStatus string
			PollIntervalMs                                    float64
			IsError                                           bool
		}
		Isolation struct {
			BobGet, BobCancel, UnknownGet, UnknownCancel *struct {
				Code    int
				Message string
			}
			HangID, Ghost, AliceAfterBob string
		}
		Cancel struct{ Status, Snapshot string }
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("requester output is not JSON: %v\n%s\nstderr: %s", err, out, stderr.String())
	}
	t.Logf("requester: %s", out)

	if r := doc.Run; r.Kind != "task" || r.TaskID == "" || r.Status != "completed" || r.LastStatus != "completed" || r.IsError || r.JobStatus != "completed" {
		t.Errorf("run = %+v, want a task that completed", r)
	}
	if doc.Run.Text != "ext-tasks-ok" {
		t.Errorf("settled text = %q, want the agent's exact reply %q", doc.Run.Text, "ext-tasks-ok")
	}
	if doc.Run.PollIntervalMs != 1000 {
		t.Errorf("pollIntervalMs = %v", doc.Run.PollIntervalMs)
	}

	iso := doc.Isolation
	for name, pair := range map[string][2]*struct {
		Code    int
		Message string
	}{"tasks/get": {iso.BobGet, iso.UnknownGet}, "tasks/cancel": {iso.BobCancel, iso.UnknownCancel}} {
		theirs, unknown := pair[0], pair[1]
		if theirs == nil || unknown == nil || theirs.Code != -32602 || strings.ReplaceAll(theirs.Message, iso.HangID, iso.Ghost) != unknown.Message {
			t.Errorf("bob's %s on alice's task = %+v, want what an unknown id gets: %+v", name, theirs, unknown)
		}
	}
	if iso.AliceAfterBob != "working" {
		t.Errorf("alice's task after bob's cancel = %q, want still working", iso.AliceAfterBob)
	}
	if doc.Cancel.Status != "cancelled" || doc.Cancel.Snapshot != "cancelled" {
		t.Errorf("after alice's cancel = %+v", doc.Cancel)
	}
}

// TestTasksRequesterTerminalApproval: with the terminal tools on, the
// official requester sends a request to a real Codex TUI (private tmux, fake
// model) as a task; the shell command Codex wants to run surfaces as
// input_required with an elicitation, the requester's input handler
// accepts it through tasks/update (terminal_approve), and the task settles
// completed with Codex's exact reply.
func TestTasksRequesterTerminalApproval(t *testing.T) {
	t.Parallel() // own home, processes and tmux server
	f, tui := codexFixture(t, peers.MCPExtTasks)
	const alice = "e2e-alice-token-0123456789"
	f.extraEnv = append(f.extraEnv, "CLAWCONNECT_TERMINAL_TOOLS=1", "MCP_USER_TOKENS=alice:"+alice)
	url := f.serve(t)

	script := stageScript(t, f.in, peers.MCPExtTasks, "tasks.mjs")
	c := f.in.MustCommand(t, peers.MCPExtTasks)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := c.Cmd(ctx, script, url, alice, "-", "terminal", "TOOLCALL: ESCALATE touch approved.txt")
	cmd.Env = append(f.env(), c.Env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		screen, _ := tui.Capture(context.Background())
		t.Fatalf("ext-tasks requester: %v\nstdout: %s\nstderr: %s\nscreen:\n%s", err, out, stderr.String(), screen)
	}
	t.Logf("requester: %s", out)
	var doc struct {
		Kind, TaskID, Status, Text, TurnStatus string
		InputRequests                          []struct{ Kind, InputID, Message string }
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("requester output is not JSON: %v\n%s", err, out)
	}
	if doc.Kind != "task" || !strings.HasPrefix(doc.TaskID, "turn-") || doc.Status != "completed" || doc.TurnStatus != "idle" {
		t.Errorf("terminal task = %+v", doc)
	}
	if len(doc.InputRequests) != 1 || doc.InputRequests[0].Kind != "elicitation" || !strings.Contains(doc.InputRequests[0].Message, "touch approved.txt") {
		t.Errorf("input requests = %+v, want the one approval", doc.InputRequests)
	}
	if !strings.HasPrefix(doc.Text, strings.TrimSpace(fakemodel.ToolResultPrefix)) {
		t.Errorf("settled reply = %q, want the fake model's tool result reply", doc.Text)
	}
}

// TestTasksRequesterReplicaKilled: two serve replicas share one PostgreSQL
// store and the real gateway. The official requester starts a task on
// replica A and follows it; once the gateway runs it, A is killed with
// SIGKILL mid-run. The requester's next request cannot reach A and goes to
// replica B, which takes the task over once A's lease lapses and settles it
// to the agent's exact reply.
func TestTasksRequesterReplicaKilled(t *testing.T) {
	t.Parallel() // own homes, database and processes
	dbURL := pgtest.FreshDatabase(t)
	const alice = "e2e-alice-token-0123456789"
	shared := []string{"CLAWCONNECT_DATABASE_URL=" + dbURL, "CLAWCONNECT_LEASE_MS=1000", "MCP_USER_TOKENS=alice:" + alice}
	fa, fb := setup(t), setup(t)
	in := peers.Require(t, peers.MCPExtTasks)
	fa.extraEnv = append(fa.extraEnv, shared...)
	fb.extraEnv = append(fb.extraEnv, shared...)
	urlA, killA := fa.serveKillable(t)
	urlB := fb.serve(t)

	script := stageScript(t, in, peers.MCPExtTasks, "tasks.mjs")
	c := in.MustCommand(t, peers.MCPExtTasks)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := c.Cmd(ctx, script, urlA, alice, "-", "replica", urlB)
	cmd.Env = append(fa.env(), c.Env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	var ready struct{ Ready string }
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &ready) != nil || ready.Ready == "" {
		_ = cmd.Wait()
		t.Fatalf("requester did not report a running task: %q\nstderr: %s", lines.Text(), stderr.String())
	}
	killA()
	var doc struct {
		Kind, TaskID, Status, LastStatus, Text, JobStatus string
		Failovers                                         []struct{ Method, From, Error string }
	}
	got := lines.Scan()
	out := lines.Text()
	if err := cmd.Wait(); err != nil || !got {
		t.Fatalf("ext-tasks requester: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	t.Logf("requester: %s", out)
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("requester output is not JSON: %v\n%s", err, out)
	}
	if doc.Kind != "task" || doc.TaskID != ready.Ready || doc.Status != "completed" || doc.JobStatus != "completed" || doc.Text != "replica-ok" {
		t.Errorf("settled = %+v, want the task completed with the agent's exact reply %q", doc, "replica-ok")
	}
	if len(doc.Failovers) != 1 || doc.Failovers[0].From != urlA {
		t.Errorf("failovers = %+v, want one, from replica A %s", doc.Failovers, urlA)
	}
}
