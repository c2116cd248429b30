package bridge_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/bridge"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// openBridge starts a fake gateway and a Bridge over it with two agents
// (alpha, the default, and beta) and returns an MCP client session.
func openBridge(t testing.TB, script func(fakegateway.Submit) fakegateway.Turn) (*bridge.Bridge, *fakegateway.Server, *mcp.ClientSession) {
	t.Helper()
	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: script})
	home := t.TempDir()
	agents := `{"default":"alpha","agents":[
	  {"id":"alpha","url":"` + fg.URL() + `","password":"pw"},
	  {"id":"beta","url":"` + fg.URL() + `","password":"pw","openclawAgentId":"helper"}]}`
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CLAWCONNECT_HOME": home, "CLAWCONNECT_CHECK_WAIT_MS": "20000"}
	b, err := bridge.Open(context.Background(), bridge.Options{Settings: settingsOf(t, env)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	timeouts := b.Timeouts()
	srv, err := server.New(server.Options{Tasks: b, Registry: b.Registry(), CheckWait: timeouts.CheckWait, CheckMaxWait: timeouts.CheckMaxWait})
	if err != nil {
		t.Fatal(err)
	}
	return b, fg, connect(t, srv.MCPServer(b.Registry().FullScope(), configIdentity()), nil)
}

func TestBridgeRunToCompletion(t *testing.T) {
	t.Parallel()
	_, _, cs := openBridge(t, nil)
	for _, agent := range []string{"alpha", "beta"} {
		t.Run(agent, func(t *testing.T) {
			run := call(t, cs, "run_task", map[string]any{"task": "hello " + agent, "agent": agent})
			if run.IsError {
				t.Fatalf("run_task: %s", text(run))
			}
			sc := structured(t, run)
			jobID := sc["jobId"].(string)
			res := call(t, cs, "check_task", map[string]any{"jobId": jobID})
			if res.IsError || !strings.Contains(text(res), "FAKE-REPLY: ") || !strings.Contains(text(res), "hello "+agent) {
				t.Fatalf("check_task = %v %q", res.IsError, text(res))
			}
			got := structured(t, res)
			if got["status"] != "completed" || got["agent"] != agent {
				t.Errorf("check_task structured status %v agent %v", got["status"], got["agent"])
			}
			// get_task finds the task whichever agent owns it.
			if d := call(t, cs, "get_task", map[string]any{"taskId": jobID}); d.IsError || structured(t, d)["agent"] != agent {
				t.Errorf("get_task = %v %q", d.IsError, text(d))
			}
		})
	}
	list := call(t, cs, "list_tasks", map[string]any{})
	if n := len(structured(t, list)["tasks"].([]any)); n != 2 {
		t.Errorf("list_tasks rows = %d, want 2: %s", n, text(list))
	}
	if r := call(t, cs, "get_task", map[string]any{"taskId": "no-such-task"}); !r.IsError || text(r) != taskapi.MsgTaskNotFound {
		t.Errorf("get_task unknown = %v %q", r.IsError, text(r))
	}
}

func TestBridgeCancel(t *testing.T) {
	t.Parallel()
	_, fg, cs := openBridge(t, func(s fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "never", Hold: true}
	})
	sc := structured(t, call(t, cs, "run_task", map[string]any{"task": "long job"}))
	jobID := sc["jobId"].(string)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := fg.AwaitRun(ctx, jobID); err != nil {
		t.Fatal(err)
	}
	r := call(t, cs, "cancel_task", map[string]any{"taskId": jobID})
	if r.IsError {
		t.Fatalf("cancel_task: %s", text(r))
	}
	final := call(t, cs, "check_task", map[string]any{"jobId": jobID})
	if got := structured(t, final)["status"]; got != "cancelled" {
		t.Errorf("status after cancel = %v (%s)", got, text(final))
	}
	again := call(t, cs, "cancel_task", map[string]any{"taskId": jobID})
	if sc := structured(t, again); sc["alreadyTerminal"] != true {
		t.Errorf("second cancel = %s", text(again))
	}
}

func TestBridgeProgress(t *testing.T) {
	t.Parallel()
	b, fg, _ := openBridge(t, func(s fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "one two three four", Chunks: 2, MessageTool: "working on it", Hold: true}
	})
	timeouts := b.Timeouts()
	srv, err := server.New(server.Options{Tasks: b, Registry: b.Registry(), CheckWait: timeouts.CheckWait, CheckMaxWait: timeouts.CheckMaxWait})
	if err != nil {
		t.Fatal(err)
	}
	progress := make(chan *mcp.ProgressNotificationParams, 64)
	cs := connect(t, srv.MCPServer(b.Registry().FullScope(), configIdentity()), &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params:
			default:
			}
		},
	})
	jobID := structured(t, call(t, cs, "run_task", map[string]any{"task": "stream please"}))["jobId"].(string)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "check_task", Arguments: map[string]any{"jobId": jobID, "waitMs": 60000}}
		p.SetProgressToken("p1")
		r, err := cs.CallTool(context.Background(), p)
		if err != nil {
			r = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- r
	}()
	select {
	case p := <-progress:
		if p.ProgressToken != "p1" || p.Progress < 1 {
			t.Errorf("progress = %+v", p)
		}
	case r := <-done:
		t.Fatalf("check_task returned before any progress: %q", text(r))
	case <-time.After(30 * time.Second):
		t.Fatal("no progress notification within 30s")
	}
	actx, acancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer acancel()
	if err := fg.AwaitRun(actx, jobID); err != nil {
		t.Fatal(err)
	}
	fg.Release(jobID)
	select {
	case r := <-done:
		if r.IsError || structured(t, r)["status"] != "completed" {
			t.Fatalf("check_task after release = %v %q", r.IsError, text(r))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("check_task did not return within 30s of the run ending")
	}
}

func configIdentity() taskapi.Identity { return taskapi.Identity{} }

// settingsOf is the effective settings of the environment env.
func settingsOf(t testing.TB, env map[string]string) *settings.Values {
	t.Helper()
	v, err := settings.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return &v
}
