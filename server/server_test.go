package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/server/servertest"
	"github.com/clawconnect/clawconnect/taskapi"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const registryJSON = `{
  "default": "alpha",
  "agents": [
    {"id": "alpha", "url": "ws://127.0.0.1:1", "password": "p", "emoji": "🦀", "role": "generalist", "qmdToken": "q"},
    {"id": "beta", "url": "ws://127.0.0.1:2", "password": "p", "whenToUse": "reviews"},
    {"id": "gamma", "url": "ws://127.0.0.1:3", "password": "p"}
  ],
  "groups": {"team": ["alpha", "beta"], "solo": ["gamma"]},
  "groupLabels": {"team": "Team Claw"}
}`

func testRegistry(t testing.TB) *taskapi.Registry {
	t.Helper()
	r, err := config.ParseRegistry([]byte(registryJSON))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

type bundle struct {
	srv   *server.Server
	tasks *servertest.Tasks
}

func setup(t testing.TB, mutate func(*server.Options)) *bundle {
	t.Helper()
	f := servertest.New()
	opts := server.Options{Tasks: f, Registry: testRegistry(t), Version: "test", Build: "abc123"}
	if mutate != nil {
		mutate(&opts)
	}
	s, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{srv: s, tasks: f}
}

// connect opens an in-memory client session on the server of a scope.
func connect(t testing.TB, ms *mcp.Server, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := ms.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

func (b *bundle) fullSession(t testing.TB) *mcp.ClientSession {
	return connect(t, b.srv.MCPServer(testRegistry(t).FullScope(), taskapi.Identity{}), nil)
}

func call(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	checkOutputSchema(t, cs, name, res)
	return res
}

// checkOutputSchema fails t when res's structured content does not match
// the tool's output schema. go-sdk checks that for the calls it answers;
// the server answers calls with plain arguments itself, so the tests
// check it for every call they make through call.
func checkOutputSchema(t testing.TB, cs *mcp.ClientSession, name string, res *mcp.CallToolResult) {
	t.Helper()
	if res.StructuredContent == nil {
		return
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	for _, tool := range list.Tools {
		if tool.Name != name || tool.OutputSchema == nil {
			continue
		}
		var schema jsonschema.Schema
		data, _ := json.Marshal(tool.OutputSchema)
		if err := json.Unmarshal(data, &schema); err != nil {
			t.Fatalf("%s output schema: %v", name, err)
		}
		resolved, err := schema.Resolve(nil)
		if err != nil {
			t.Fatalf("%s output schema: %v", name, err)
		}
		var out any
		data, _ = json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(data, &out)
		if err := resolved.Validate(&out); err != nil {
			t.Errorf("%s: structured content %s does not match the output schema: %v", name, data, err)
		}
	}
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func structured(t testing.TB, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	if r.StructuredContent == nil {
		return nil
	}
	data, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNewRequiresTasksAndRegistry(t *testing.T) {
	t.Parallel()
	if _, err := server.New(server.Options{Registry: testRegistry(t)}); err == nil {
		t.Error("New without Tasks succeeded")
	}
	if _, err := server.New(server.Options{Tasks: servertest.New()}); err == nil {
		t.Error("New without Registry succeeded")
	}
}

func TestToolsGolden(t *testing.T) {
	t.Parallel()
	checkToolsGolden(t, setup(t, nil), "testdata/tools.golden.json", "TestToolsGolden")
}

// checkToolsGolden compares b's tools/list with the golden file (rewritten
// with -update; test names the test that regenerates it) and returns it.
func checkToolsGolden(t *testing.T, b *bundle, golden, test string) []*mcp.Tool {
	t.Helper()
	res, err := b.fullSession(t).ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.MarshalIndent(res.Tools, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./server -run %s -update)", err, test)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("tools/list mismatch (-want +got):\n%s", diff)
	}
	return res.Tools
}

func TestToolSurfaceRules(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tools := b.srv.Tools()
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
		ro := tool.Annotations.ReadOnlyHint
		if got := strings.HasPrefix(tool.Description, "READ ONLY: never starts, changes, or cancels any work."); got != ro {
			t.Errorf("%s: READ ONLY prefix %v but readOnlyHint %v", tool.Name, got, ro)
		}
		data, _ := json.Marshal(tool.OutputSchema)
		var out struct {
			AdditionalProperties any `json:"additionalProperties"`
		}
		_ = json.Unmarshal(data, &out)
		if out.AdditionalProperties != true {
			t.Errorf("%s: output additionalProperties = %v, want true", tool.Name, out.AdditionalProperties)
		}
	}
	want := []string{"run_task", "check_task", "get_task", "list_tasks", "get_session", "list_sessions", "cancel_task", "list_agents", "get_connection_info"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tool names (-want +got):\n%s", diff)
	}
	for _, tool := range tools {
		if tool.Name == "check_task" {
			data, _ := json.Marshal(tool.InputSchema)
			if !strings.Contains(string(data), `\"wait\" (default)`) {
				t.Errorf("check_task mode description lacks \"wait\" (default): %s", data)
			}
		}
	}
	if v := b.srv.ToolsetVersion(); len(v) != 12 {
		t.Errorf("ToolsetVersion = %q, want 12 hex digits", v)
	}
}

func TestRunCheckRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	cs := b.fullSession(t)
	res := call(t, cs, "run_task", map[string]any{"task": "write a haiku", "senderName": "Ann"})
	if res.IsError {
		t.Fatalf("run_task error: %s", text(res))
	}
	sc := structured(t, res)
	jobID := sc["jobId"].(string)
	if !strings.Contains(text(res), `"message":"Task submitted. Use check_task to poll for progress."`) {
		t.Errorf("run_task text = %s", text(res))
	}
	if diff := cmp.Diff(server.RunRequest{Agent: "alpha", Task: "write a haiku", SenderName: "Ann"}, b.tasks.Runs()[0]); diff != "" {
		t.Errorf("run request (-want +got):\n%s", diff)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "check_task", Arguments: map[string]any{"jobId": jobID}})
		if err != nil {
			r = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- r
	}()
	if got := <-b.tasks.Waiting; got != jobID {
		t.Fatalf("waiting on %q, want %q", got, jobID)
	}
	b.tasks.Finish(jobID, "completed", "an old silent pond")
	r := <-done
	if r.IsError || text(r) != "an old silent pond" {
		t.Fatalf("check_task = %v %q", r.IsError, text(r))
	}
	sc = structured(t, r)
	if sc["isTerminal"] != true || sc["status"] != "completed" || sc["nextAction"] != nil {
		t.Errorf("check_task structured = %v", sc)
	}
}

func TestCheckTaskProgress(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	progress := make(chan *mcp.ProgressNotificationParams, 8)
	cs := connect(t, b.srv.MCPServer(testRegistry(t).FullScope(), taskapi.Identity{}), &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			progress <- req.Params
		},
	})
	jobID := structured(t, call(t, cs, "run_task", map[string]any{"task": "t"}))["jobId"].(string)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "check_task", Arguments: map[string]any{"jobId": jobID, "mode": "wait"}}
		p.SetProgressToken("tok-1")
		r, _ := cs.CallTool(context.Background(), p)
		done <- r
	}()
	<-b.tasks.Waiting
	b.tasks.Log(jobID, "reading files")
	select {
	case p := <-progress:
		if p.ProgressToken != "tok-1" || p.Message != "reading files" || p.Progress != 1 {
			t.Errorf("progress = %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification within 10s")
	}
	b.tasks.Log(jobID, "writing")
	select {
	case p := <-progress:
		if p.Progress != 2 {
			t.Errorf("second progress = %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no second progress notification within 10s")
	}
	b.tasks.Finish(jobID, "completed", "ok")
	if r := <-done; r == nil || r.IsError || text(r) != "ok" {
		t.Fatalf("check_task = %+v", r)
	}
}

func TestPollModeReturnsOnNewLogs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	cs := b.fullSession(t)
	jobID := structured(t, call(t, cs, "run_task", map[string]any{"task": "t"}))["jobId"].(string)
	b.tasks.Log(jobID, "step one")
	r := call(t, cs, "check_task", map[string]any{"jobId": jobID, "mode": "poll", "knownLogCount": 0})
	if r.IsError || text(r) != "Still running. Poll again with knownLogCount=1." {
		t.Fatalf("poll check = %v %q", r.IsError, text(r))
	}
	if sc := structured(t, r); sc["continuePolling"] != true || sc["logCursor"] != float64(1) {
		t.Errorf("structured = %v", sc)
	}
}

func TestToolResults(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	cs := b.fullSession(t)
	done := structured(t, call(t, cs, "run_task", map[string]any{"task": "first", "context": "ctx", "agent": "beta"}))
	doneID := done["jobId"].(string)
	b.tasks.Finish(doneID, "completed", "finished it")
	failed := structured(t, call(t, cs, "run_task", map[string]any{"task": "second"}))["jobId"].(string)
	b.tasks.Finish(failed, "error", "tests failed")
	running := structured(t, call(t, cs, "run_task", map[string]any{"task": "third"}))
	runningID := running["jobId"].(string)

	tests := []struct {
		name     string
		tool     string
		args     map[string]any
		isError  bool
		text     string // exact when set
		contains string
		sc       map[string]any // keys checked when set
	}{
		{name: "check unknown job", tool: "check_task", args: map[string]any{"jobId": "nope"}, isError: true,
			text: taskapi.MsgJobNotFound, sc: map[string]any{"status": "error", "error": taskapi.MsgJobNotFound, "jobId": "nope"}},
		{name: "check unknown session", tool: "check_task", args: map[string]any{"sessionKey": "nope"}, isError: true,
			text: taskapi.MsgSessionJobMissing},
		{name: "check needs an id", tool: "check_task", args: map[string]any{}, isError: true, text: "Pass jobId (or sessionKey) to say which task to check. run_task returns both."},
		{name: "check failed task is error", tool: "check_task", args: map[string]any{"jobId": failed}, isError: true, text: "tests failed",
			sc: map[string]any{"status": "error", "isError": true, "isTerminal": true}},
		{name: "check by session key", tool: "check_task", args: map[string]any{"sessionKey": done["sessionKey"]}, text: "finished it"},
		{name: "check negative waitMs clamps", tool: "check_task", args: map[string]any{"jobId": doneID, "waitMs": -5}, text: "finished it"},
		{name: "check huge waitMs clamps", tool: "check_task", args: map[string]any{"jobId": doneID, "waitMs": 1e300}, text: "finished it"},
		{name: "check bad mode", tool: "check_task", args: map[string]any{"jobId": doneID, "mode": "forever"}, isError: true, contains: "validating \"arguments\""},
		{name: "check waitMs wrong type", tool: "check_task", args: map[string]any{"jobId": doneID, "waitMs": "soon"}, isError: true, contains: "waitMs"},
		{name: "check unknown agent", tool: "check_task", args: map[string]any{"jobId": doneID, "agent": "zeta"}, isError: true, contains: "validating"},
		{name: "run missing task", tool: "run_task", args: map[string]any{}, isError: true, contains: "missing properties"},
		{name: "run blank task", tool: "run_task", args: map[string]any{"task": "  "}, isError: true, contains: "task must not be empty"},
		{name: "run task wrong type", tool: "run_task", args: map[string]any{"task": 42}, isError: true, contains: "task"},
		{name: "run unknown field", tool: "run_task", args: map[string]any{"task": "x", "bogus": 1}, isError: true, contains: "bogus"},
		{name: "run unknown agent", tool: "run_task", args: map[string]any{"task": "x", "agent": "zeta"}, isError: true, contains: "validating"},
		{name: "run oversized", tool: "run_task", args: map[string]any{"task": strings.Repeat("x", server.MaxTextBytes+1)}, isError: true, contains: "task is too long"},
		{name: "run busy session", tool: "run_task", args: map[string]any{"task": "x", "sessionKey": running["sessionKey"]}, isError: true,
			contains: "Failed to submit: A task is already running on this session"},
		{name: "get task summary", tool: "get_task", args: map[string]any{"taskId": doneID}, sc: map[string]any{"taskId": doneID, "summary": "finished it", "agent": "beta"}},
		{name: "get task prompt", tool: "get_task", args: map[string]any{"taskId": doneID, "detail": "prompt"}, sc: map[string]any{"taskId": doneID, "prompt": map[string]any{"task": "first", "context": "ctx"}}},
		{name: "get task unknown detail", tool: "get_task", args: map[string]any{"taskId": doneID, "detail": "everything"}, isError: true, contains: "detail"},
		{name: "get task missing", tool: "get_task", args: map[string]any{"taskId": "nope"}, isError: true, text: taskapi.MsgTaskNotFound,
			sc: map[string]any{"taskId": "nope", "status": "error", "error": "Task not found."}},
		{name: "get task no id", tool: "get_task", args: map[string]any{}, isError: true, contains: "taskId"},
		{name: "list tasks active", tool: "list_tasks", args: map[string]any{"view": "active"}, contains: runningID},
		{name: "list tasks bad view", tool: "list_tasks", args: map[string]any{"view": "some"}, isError: true, contains: "view"},
		{name: "get session", tool: "get_session", args: map[string]any{"sessionId": done["sessionKey"], "mode": "tail", "limit": 500, "after": -3},
			sc: map[string]any{"found": true, "jobId": doneID, "nextAfter": float64(0)}},
		{name: "get session missing", tool: "get_session", args: map[string]any{"sessionId": "nope"}, isError: true, text: "Session not found.",
			sc: map[string]any{"sessionId": "nope", "found": false}},
		{name: "list sessions", tool: "list_sessions", args: map[string]any{}, sc: map[string]any{"configuredAgents": []any{"alpha", "beta", "gamma"}}},
		{name: "cancel needs id", tool: "cancel_task", args: map[string]any{}, isError: true, text: "Pass taskId (or sessionKey) to say which task to stop."},
		{name: "cancel missing", tool: "cancel_task", args: map[string]any{"taskId": "nope"}, isError: true,
			text: taskapi.MsgCancelNotFound, sc: map[string]any{"found": false}},
		{name: "cancel finished", tool: "cancel_task", args: map[string]any{"taskId": doneID},
			text: `Task already finished with status "completed" — nothing to stop.`, sc: map[string]any{"found": true, "requested": false, "alreadyTerminal": true}},
		{name: "cancel running by session", tool: "cancel_task", args: map[string]any{"sessionKey": running["sessionKey"]},
			text: "Stop requested. Check get_task for the terminal cancellation result.", sc: map[string]any{"found": true, "requested": true, "jobId": runningID}},
		{name: "list agents", tool: "list_agents", args: map[string]any{}, sc: map[string]any{"default": "alpha"}, contains: `"memorySearchable":true`},
		{name: "connection info", tool: "get_connection_info", args: map[string]any{},
			sc: map[string]any{"serverName": "ClawConnect", "build": "abc123", "serverVersion": "test", "toolCount": float64(9), "toolsetVersion": b.srv.ToolsetVersion()}},
		{name: "unknown tool args type", tool: "list_agents", args: map[string]any{"x": 1}, isError: true, contains: "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, cs, tt.tool, tt.args)
			if r.IsError != tt.isError {
				t.Fatalf("isError = %v, want %v; text %q", r.IsError, tt.isError, text(r))
			}
			if tt.text != "" && text(r) != tt.text {
				t.Errorf("text = %q, want %q", text(r), tt.text)
			}
			if tt.contains != "" && !strings.Contains(text(r), tt.contains) {
				t.Errorf("text %q lacks %q", text(r), tt.contains)
			}
			if tt.sc != nil {
				got := structured(t, r)
				for k, want := range tt.sc {
					if diff := cmp.Diff(want, got[k]); diff != "" {
						t.Errorf("structuredContent[%q] (-want +got):\n%s", k, diff)
					}
				}
			}
		})
	}
}

func TestUnknownToolIsProtocolError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	cs := b.fullSession(t)
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "drop_tables", Arguments: map[string]any{}})
	if err == nil {
		t.Fatal("calling an unknown tool succeeded")
	}
}

func TestRunTaskSubmitFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.tasks.RunErr = errors.New("gateway refused: bad password")
	r := call(t, b.fullSession(t), "run_task", map[string]any{"task": "x"})
	if !r.IsError || text(r) != "Failed to submit: gateway refused: bad password" {
		t.Errorf("run_task = %v %q", r.IsError, text(r))
	}
}

func TestIdentityEffects(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	scope := testRegistry(t).FullScope()
	user := connect(t, b.srv.MCPServer(scope, taskapi.Identity{User: "Dana"}), nil)
	call(t, user, "run_task", map[string]any{"task": "x", "senderName": "Mallory"})
	if got := b.tasks.Runs()[0].SenderName; got != "Dana" {
		t.Errorf("senderName = %q, want the token's name", got)
	}
	if got := user.InitializeResult().ServerInfo.Name; got != "ClawConnect (Dana)" {
		t.Errorf("server name = %q", got)
	}
	info := structured(t, call(t, user, "get_connection_info", map[string]any{}))
	if diff := cmp.Diff(map[string]any{"user": "Dana"}, info["identity"]); diff != "" {
		t.Errorf("identity (-want +got):\n%s", diff)
	}
	legacy := connect(t, b.srv.MCPServer(scope, taskapi.Identity{Legacy: true}), nil)
	r := call(t, legacy, "run_task", map[string]any{"task": "y"})
	if !strings.HasSuffix(text(r), "\n\nNote: This connection uses the shared password. Ask the operator for a personal token so your tasks carry your name.") {
		t.Errorf("legacy run_task text lacks the token hint: %q", text(r))
	}
}

func TestScopeHidesOtherAgents(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	full := b.fullSession(t)
	gammaJob := structured(t, call(t, full, "run_task", map[string]any{"task": "secret", "agent": "gamma"}))
	b.tasks.Finish(gammaJob["jobId"].(string), "completed", "classified")
	scope, _ := testRegistry(t).Scope([]string{"team"}, nil)
	team := connect(t, b.srv.MCPServer(scope, taskapi.Identity{}), nil)
	if got := team.InitializeResult().ServerInfo.Name; got != "Team Claw" {
		t.Errorf("server name = %q, want the group label", got)
	}
	id, key := gammaJob["jobId"].(string), gammaJob["sessionKey"].(string)
	tests := []struct {
		tool string
		args map[string]any
		text string
	}{
		{"check_task", map[string]any{"jobId": id}, "Job not found."},
		{"check_task", map[string]any{"sessionKey": key}, "Job not found."},
		{"get_task", map[string]any{"taskId": id}, taskapi.MsgTaskNotFound},
		{"get_task", map[string]any{"taskId": id, "detail": "prompt"}, taskapi.MsgTaskNotFound},
		{"get_session", map[string]any{"sessionId": key}, "Session not found."},
		{"cancel_task", map[string]any{"taskId": id}, taskapi.MsgCancelNotFound},
		{"run_task", map[string]any{"task": "x", "agent": "gamma"}, "validating"},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			r := call(t, team, tt.tool, tt.args)
			// Exact text: an out-of-scope check_task reads "Job not found."
			// without the restart hint an unknown job gets.
			got := text(r)
			if tt.tool == "run_task" {
				got = got[:min(len(got), len(tt.text))]
			}
			if !r.IsError || got != tt.text {
				t.Errorf("%s = %v %q, want error %q", tt.tool, r.IsError, text(r), tt.text)
			}
			if tt.tool == "check_task" {
				if sc := structured(t, r); sc["status"] != "error" || sc["error"] != tt.text {
					t.Errorf("check_task structured = %v, want status error and error %q", sc, tt.text)
				}
			}
		})
	}
	for _, tool := range []string{"list_tasks", "list_sessions", "list_agents"} {
		if r := call(t, team, tool, map[string]any{}); strings.Contains(text(r), "gamma") {
			t.Errorf("%s leaks gamma: %s", tool, text(r))
		}
	}
}

func TestServeStdioExitsOnEOF(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- b.srv.ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil || !strings.Contains(line, `"serverInfo"`) {
		t.Fatalf("first stdout line = %q, %v; want an initialize result", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	_ = inW.Close()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("ServeStdio = %v, want nil after stdin closed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return within 10s of stdin closing")
	}
}
