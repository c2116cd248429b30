package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/peers"
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
