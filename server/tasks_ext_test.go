package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/bridge"
	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/internal/testbed/pgtest"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
	"github.com/clawconnect/clawconnect/termapi"
)

const (
	modernVersion = "2026-07-28"
	tokAlice      = "tok-alice-0123456789"
	tokBob        = "tok-bob-0123456789ab"
)

// tasksRig is a real bridge (SQLite store, fake gateway) behind serve's
// HTTP handler with two personal tokens. The gateway replies tasksReply,
// and holds a task containing HOLD until released or cancelled.
type tasksRig struct {
	fg   *fakegateway.Server
	b    *bridge.Bridge
	url  string
	home string
	n    atomic.Int64
}

func openTasksRig(t *testing.T, home string) *tasksRig {
	t.Helper()
	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: tasksScript})
	return openTasksRigOn(t, home, fg)
}

func tasksScript(s fakegateway.Submit) fakegateway.Turn {
	switch {
	case strings.Contains(s.Message, "HOLD"):
		return fakegateway.Turn{Reply: "held reply", Hold: true}
	}
	return fakegateway.Turn{Reply: tasksReply}
}

// openTasksRigOn opens a rig on home's agents and store, or on the
// PostgreSQL database at dbURL when it is set.
func openTasksRigOn(t *testing.T, home string, fg *fakegateway.Server, dbURL ...string) *tasksRig {
	t.Helper()
	env := map[string]string{}
	if len(dbURL) > 0 {
		env["CLAWCONNECT_DATABASE_URL"] = dbURL[0]
	}
	return openTasksRigWith(t, home, fg, env, time.Hour)
}

// openTasksRigWith opens a rig with more settings and the retention the
// server reports.
func openTasksRigWith(t *testing.T, home string, fg *fakegateway.Server, env map[string]string, retention time.Duration) *tasksRig {
	t.Helper()
	agents := `{"default":"alpha","agents":[{"id":"alpha","url":"` + fg.URL() + `","password":"pw"}]}`
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	env["CLAWCONNECT_HOME"] = home
	b, err := bridge.Open(context.Background(), bridge.Options{Settings: settingsOf(t, env)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	srv, err := server.New(server.Options{
		Tasks: b, Registry: b.Registry(), TaskRetention: retention,
		Auth: mustAuth(t, config.AuthOptions{UserTokens: "alice:" + tokAlice + ",bob:" + tokBob}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &tasksRig{fg: fg, b: b, url: ts.URL + "/mcp", home: home}
}

// call posts one 2026-07-28 request as the holder of tok, declaring the
// Tasks extension when tasks is set, and returns the JSON-RPC message.
func (r *tasksRig) call(t *testing.T, tok string, tasks bool, method string, params map[string]any) rpcMessage {
	t.Helper()
	ext := map[string]any{}
	if tasks {
		ext[server.TasksExtension] = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernVersion,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "tasks-test", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": ext},
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": r.n.Add(1), "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{"Mcp-Protocol-Version": modernVersion, "Mcp-Method": method}
	if tok != "" {
		hdr["Authorization"] = "Bearer " + tok
	}
	if name, ok := params["name"].(string); ok {
		hdr["Mcp-Name"] = name
	} else if id, ok := params["taskId"].(string); ok {
		hdr["Mcp-Name"] = id
	}
	code, _, payload := rpc(t, r.url, string(body), hdr)
	var msg rpcMessage
	if err := json.Unmarshal([]byte(payload), &msg); err != nil {
		t.Fatalf("%s: status %d, undecodable %q: %v", method, code, payload, err)
	}
	return msg
}

type rpcMessage struct {
	Result map[string]any `json:"result"`
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (m rpcMessage) must(t *testing.T) map[string]any {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("JSON-RPC error %d: %s", m.Error.Code, m.Error.Message)
	}
	return m.Result
}

func runTaskParams(task string) map[string]any {
	return map[string]any{"name": "run_task", "arguments": map[string]any{"task": task}}
}

// wait blocks until the job ends, through the task service's own wait.
func (r *tasksRig) wait(t *testing.T, jobID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		s, err := r.b.Check(ctx, server.CheckRequest{JobID: jobID, Mode: server.ModeWait, Wait: 10 * time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s.IsTerminal {
			return
		}
	}
	t.Fatalf("job %s did not end", jobID)
}

// tasksReply is the agent's reply to every task that neither holds nor fails.
const tasksReply = "The haiku:\nold pond / a frog jumps / splash"

// TestTasksCreateAndGet: a run_task from a client declaring the extension
// answers with a task handle that tasks/get resolves at once; the finished
// task is completed with exactly what check_task returns at the end.
func TestTasksCreateAndGet(t *testing.T) {
	t.Parallel()
	r := openTasksRig(t, t.TempDir())

	created := r.call(t, tokAlice, true, "tools/call", runTaskParams("write the haiku")).must(t)
	for _, k := range []string{"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} {
		if created[k] == nil {
			t.Errorf("CreateTaskResult lacks %s: %v", k, created)
		}
	}
	if created["resultType"] != "task" || created["status"] != "working" {
		t.Fatalf("CreateTaskResult = %v", created)
	}
	id := created["taskId"].(string)
	if len(id) != 36 {
		t.Errorf("taskId %q is not a random UUID (the job id)", id)
	}
	if _, err := time.Parse(time.RFC3339, created["createdAt"].(string)); err != nil {
		t.Errorf("createdAt: %v", err)
	}
	if ttl := created["ttlMs"].(float64); ttl < float64(time.Hour.Milliseconds()) {
		t.Errorf("ttlMs = %v, want at least the retention", ttl)
	}
	r.wait(t, id)

	got := r.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": id}).must(t)
	if got["resultType"] != "complete" || got["status"] != "completed" || got["taskId"] != id {
		t.Fatalf("tasks/get = %v", got)
	}
	res := got["result"].(map[string]any)
	if res["resultType"] != "complete" || res["isError"] != nil {
		t.Errorf("result = %v", res)
	}
	content := res["content"].([]any)[0].(map[string]any)
	if content["text"] != tasksReply {
		t.Errorf("result text = %q, want the agent's exact reply", content["text"])
	}
	// The same result check_task gives a client without the extension.
	check := r.call(t, tokAlice, false, "tools/call", map[string]any{"name": "check_task", "arguments": map[string]any{"jobId": id}}).must(t)
	if diff := cmp.Diff(check["content"], res["content"]); diff != "" {
		t.Errorf("tasks/get result differs from check_task (-check +tasks/get):\n%s", diff)
	}
	sc := res["structuredContent"].(map[string]any)
	if sc["status"] != "completed" || sc["jobId"] != id {
		t.Errorf("structuredContent = %v", sc)
	}

}

// TestTasksAgentErrorIsCompleted: a task whose agent failed is completed
// with the isError result check_task gives, never failed (which the
// extension keeps for JSON-RPC errors).
func TestTasksAgentErrorIsCompleted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ts := httptest.NewServer(b.srv.Handler())
	t.Cleanup(ts.Close)
	r := &tasksRig{url: ts.URL + "/mcp"}
	id := r.call(t, "", true, "tools/call", runTaskParams("do it")).must(t)["taskId"].(string)
	b.tasks.Finish(id, "error", "the model refused")
	got := r.call(t, "", true, "tasks/get", map[string]any{"taskId": id}).must(t)
	res, _ := got["result"].(map[string]any)
	if got["status"] != "completed" || res["isError"] != true {
		t.Fatalf("an agent error = %v, want completed with isError", got)
	}
	check := r.call(t, "", false, "tools/call", map[string]any{"name": "check_task", "arguments": map[string]any{"jobId": id}}).must(t)
	if diff := cmp.Diff(check["content"], res["content"]); diff != "" {
		t.Errorf("tasks/get result differs from check_task (-check +tasks/get):\n%s", diff)
	}
}

// TestTasksWithoutTheExtension: a client that does not declare the
// extension, and any client under 2025-11-25, gets today's run_task
// result, and tasks/* refuse it with the extension's error.
func TestTasksWithoutTheExtension(t *testing.T) {
	t.Parallel()
	r := openTasksRig(t, t.TempDir())
	plain := r.call(t, tokAlice, false, "tools/call", runTaskParams("plain")).must(t)
	if plain["resultType"] != "complete" || plain["structuredContent"].(map[string]any)["jobId"] == nil {
		t.Fatalf("run_task without the extension = %v", plain)
	}
	id := plain["structuredContent"].(map[string]any)["jobId"].(string)
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		e := r.call(t, tokAlice, false, m, map[string]any{"taskId": id, "inputResponses": map[string]any{}}).Error
		if e == nil || e.Code != -32021 || !strings.Contains(string(e.Data), server.TasksExtension) {
			t.Errorf("%s without the extension = %+v, want -32021 naming it", m, e)
		}
	}

	// Under 2025-11-25 a declared capability enables nothing, over HTTP
	// and over a session that keeps it from initialize (stdio); initialize
	// does not advertise the extension.
	st, ct := mcp.NewInMemoryTransports()
	ms := setup(t, nil).srv.MCPServer(testRegistry(t).FullScope(), taskapi.Identity{})
	ss, err := ms.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	for name, tr := range map[string]mcp.Transport{
		"http":       &mcp.StreamableClientTransport{Endpoint: r.url, HTTPClient: bearerClient(tokAlice), MaxRetries: -1},
		"stdio-like": ct,
	} {
		cs := connectLegacyWithTasks(t, tr)
		if ext := cs.InitializeResult().Capabilities.Extensions; ext != nil {
			t.Errorf("%s: initialize advertises extensions %v under %s", name, ext, cs.InitializeResult().ProtocolVersion)
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "run_task", Arguments: map[string]any{"task": "legacy"}})
		if err != nil || res.IsError {
			t.Fatalf("%s: legacy run_task = %v, %v", name, res, err)
		}
		if sc, _ := res.StructuredContent.(map[string]any); sc["jobId"] == nil {
			t.Errorf("%s: legacy run_task structured = %v", name, res.StructuredContent)
		}
	}
}

// connectLegacyWithTasks connects a 2025-11-25 client that declares the
// Tasks extension at initialize.
func connectLegacyWithTasks(t *testing.T, tr mcp.Transport) *mcp.ClientSession {
	t.Helper()
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension(server.TasksExtension, map[string]any{})
	c := mcp.NewClient(&mcp.Implementation{Name: "legacy", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
	cs, err := c.Connect(t.Context(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if v := cs.InitializeResult().ProtocolVersion; v != "2025-11-25" {
		t.Fatalf("negotiated %s, want 2025-11-25", v)
	}
	return cs
}

// TestTasksDiscoverAdvertises: server/discover names the extension.
func TestTasksDiscoverAdvertises(t *testing.T) {
	t.Parallel()
	r := openTasksRig(t, t.TempDir())
	res := r.call(t, tokAlice, false, "server/discover", map[string]any{}).must(t)
	ext, _ := res["capabilities"].(map[string]any)["extensions"].(map[string]any)
	if diff := cmp.Diff(map[string]any{server.TasksExtension: map[string]any{}}, ext); diff != "" {
		t.Errorf("discover extensions (-want +got):\n%s", diff)
	}
}

// TestTasksCancelAndOwnership: tasks/cancel stops the task as cancel_task
// does; another personal token gets, for the task, exactly the error an
// unknown id gets, and cannot cancel it.
func TestTasksCancelAndOwnership(t *testing.T) {
	t.Parallel()
	r := openTasksRig(t, t.TempDir())
	created := r.call(t, tokAlice, true, "tools/call", runTaskParams("HOLD on")).must(t)
	id := created["taskId"].(string)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := r.fg.AwaitRun(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := r.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": id}).must(t); got["status"] != "working" || got["statusMessage"] == "" {
		t.Errorf("running task = %v", got)
	}
	const ghost = "00000000-0000-4000-8000-000000000000"
	for _, m := range []string{"tasks/get", "tasks/cancel", "tasks/update"} {
		theirs := r.call(t, tokBob, true, m, map[string]any{"taskId": id, "inputResponses": map[string]any{}}).Error
		unknown := r.call(t, tokBob, true, m, map[string]any{"taskId": ghost, "inputResponses": map[string]any{}}).Error
		if theirs == nil || unknown == nil || theirs.Code != -32602 || strings.ReplaceAll(theirs.Message, id, ghost) != unknown.Message {
			t.Errorf("bob's %s on alice's task = %+v, want what an unknown id gets: %+v", m, theirs, unknown)
		}
	}
	if got := r.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": id}).must(t); got["status"] != "working" {
		t.Fatalf("bob's cancel stopped alice's task: %v", got)
	}
	ack := r.call(t, tokAlice, true, "tasks/cancel", map[string]any{"taskId": id}).must(t)
	if ack["resultType"] != "complete" {
		t.Errorf("tasks/cancel = %v", ack)
	}
	r.wait(t, id)
	got := r.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": id}).must(t)
	if got["status"] != "cancelled" || got["result"] != nil {
		t.Errorf("after tasks/cancel = %v", got)
	}
}

// TestTasksSurviveRestart: a task created before the process restarts is
// read by the next process from the store.
func TestTasksSurviveRestart(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: tasksScript})
	first := openTasksRigOn(t, home, fg)
	created := first.call(t, tokAlice, true, "tools/call", runTaskParams("before restart")).must(t)
	id := created["taskId"].(string)
	first.wait(t, id)
	first.b.Close()
	second := openTasksRigOn(t, home, fg)
	got := second.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": id}).must(t)
	if got["status"] != "completed" {
		t.Fatalf("after restart = %v", got)
	}
	if txt := got["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]; txt != tasksReply {
		t.Errorf("after restart text = %q", txt)
	}
}

// bearerClient is an HTTP client that sends tok as a Bearer token.
func bearerClient(tok string) *http.Client {
	return &http.Client{Transport: bearerTransport(tok)}
}

type bearerTransport string

func (b bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(req)
}

// TestTasksTTL: ttlMs is the retention counted from creation, and a task
// the store's retention swept is gone for tasks/get (an unknown id).
func TestTasksTTL(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: tasksScript})
	first := openTasksRigOn(t, home, fg)
	id := first.call(t, tokAlice, true, "tools/call", runTaskParams("short-lived")).must(t)["taskId"].(string)
	first.wait(t, id)
	got := first.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": id}).must(t)
	d, err := first.b.GetTask(t.Context(), id, "core", 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(d.EndedAt - d.StartedAt + time.Hour.Milliseconds()); got["ttlMs"] != want {
		t.Errorf("ttlMs = %v, want end - creation + retention = %v", got["ttlMs"], want)
	}
	first.b.Close()
	// The next process keeps ended tasks 1 ms: the task is past its TTL
	// (whether or not that process's sweep has removed it yet).
	second := openTasksRigWith(t, home, fg, map[string]string{"CLAWCONNECT_RETENTION_MS": "1"}, time.Millisecond)
	if e := second.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": id}).Error; e == nil || e.Code != -32602 {
		t.Errorf("tasks/get after the retention = %+v, want not found", e)
	}
}

// TestTasksAcrossReplicasOnPostgres: two serve replicas share one
// PostgreSQL database; the task handle one hands out resolves on the other
// at once, and the other reads its completed result and cancels for its
// owner only.
func TestTasksAcrossReplicasOnPostgres(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.FreshDatabase(t)
	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: tasksScript})
	a := openTasksRigOn(t, t.TempDir(), fg, dbURL)
	b := openTasksRigOn(t, t.TempDir(), fg, dbURL)

	id := a.call(t, tokAlice, true, "tools/call", runTaskParams("on replica a")).must(t)["taskId"].(string)
	if got := b.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": id}).must(t); got["taskId"] != id {
		t.Fatalf("replica b's tasks/get right after creation = %v", got)
	}
	a.wait(t, id)
	got := b.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": id}).must(t)
	if txt := got["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]; got["status"] != "completed" || txt != tasksReply {
		t.Errorf("replica b's tasks/get = %v", got)
	}
	if e := b.call(t, tokBob, true, "tasks/get", map[string]any{"taskId": id}).Error; e == nil || e.Code != -32602 {
		t.Errorf("bob on replica b = %+v, want not found", e)
	}

	held := a.call(t, tokAlice, true, "tools/call", runTaskParams("HOLD on a")).must(t)["taskId"].(string)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := fg.AwaitRun(ctx, held); err != nil {
		t.Fatal(err)
	}
	b.call(t, tokAlice, true, "tasks/cancel", map[string]any{"taskId": held}).must(t)
	// Read where the cancel was made: the follower's in-memory copy of the
	// task may trail the store for a moment after the outcome.
	b.wait(t, held)
	if got := b.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": held}).must(t); got["status"] != "cancelled" {
		t.Errorf("after replica b's tasks/cancel = %v", got)
	}
}

// TestTasksReplicaGoneMidTask: the replica that created and followed a
// task goes away while the agent still works; the other replica takes the
// task over once its lease lapses, and its tasks/get settles to the
// agent's reply.
func TestTasksReplicaGoneMidTask(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.FreshDatabase(t)
	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: tasksScript})
	env := func() map[string]string {
		return map[string]string{"CLAWCONNECT_DATABASE_URL": dbURL, "CLAWCONNECT_LEASE_MS": "300"}
	}
	a := openTasksRigWith(t, t.TempDir(), fg, env(), time.Hour)
	b := openTasksRigWith(t, t.TempDir(), fg, env(), time.Hour)
	id := a.call(t, tokAlice, true, "tools/call", runTaskParams("HOLD while a replica goes")).must(t)["taskId"].(string)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := fg.AwaitRun(ctx, id); err != nil {
		t.Fatal(err)
	}
	a.b.Close()
	fg.Release(id)
	b.wait(t, id)
	got := b.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": id}).must(t)
	if txt := got["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]; got["status"] != "completed" || txt != "held reply" {
		t.Errorf("on the remaining replica = %v", got)
	}
}

// listen opens a subscriptions/listen for taskIds as the holder of tok and
// returns its messages as they arrive; the channel closes with the stream.
func (r *tasksRig) listen(t *testing.T, tok string, ids ...string) <-chan map[string]any {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"taskIds": ids},
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    modernVersion,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "tasks-test", "version": "1"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{server.TasksExtension: map[string]any{}}},
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": modernVersion, "Mcp-Method": "subscriptions/listen", "Authorization": "Bearer " + tok} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make(chan map[string]any, 16)
	go func() {
		defer close(msgs)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") && !strings.HasPrefix(line, "{") {
				continue
			}
			var m map[string]any
			if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m) == nil {
				msgs <- m
			}
		}
	}()
	return msgs
}

// next returns the stream's next message, failing after a bounded wait.
func next(t *testing.T, msgs <-chan map[string]any) map[string]any {
	t.Helper()
	select {
	case m, ok := <-msgs:
		if !ok {
			t.Fatal("the listen stream ended early")
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatal("no message on the listen stream within 30 s")
	}
	return nil
}

// TestTasksListen: a listen naming tasks is acknowledged with the caller's
// own tasks only, sends each task's state at once and again when it
// completes (with the result tasks/get gives), then ends; a listen without
// the extension is refused with the extension's error.
func TestTasksListen(t *testing.T) {
	t.Parallel()
	r := openTasksRig(t, t.TempDir())
	id := r.call(t, tokAlice, true, "tools/call", runTaskParams("HOLD for the listener")).must(t)["taskId"].(string)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := r.fg.AwaitRun(ctx, id); err != nil {
		t.Fatal(err)
	}
	const ghost = "00000000-0000-4000-8000-000000000000"

	if ack := next(t, r.listen(t, tokBob, id)); fmt.Sprint(ack["params"].(map[string]any)["notifications"]) != "map[taskIds:[]]" {
		t.Errorf("bob's listen on alice's task acknowledged %v", ack)
	}
	msgs := r.listen(t, tokAlice, id, ghost)
	ack := next(t, msgs)
	if ack["method"] != "notifications/subscriptions/acknowledged" || fmt.Sprint(ack["params"].(map[string]any)["notifications"]) != "map[taskIds:["+id+"]]" {
		t.Fatalf("ack = %v", ack)
	}
	first := next(t, msgs)
	if first["method"] != "notifications/tasks" || first["params"].(map[string]any)["status"] != "working" {
		t.Fatalf("first notification = %v", first)
	}
	if sub := first["params"].(map[string]any)["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"]; sub != "listen-1" {
		t.Errorf("subscriptionId = %v", sub)
	}
	r.fg.Release(id)
	var done map[string]any
	for done == nil {
		m := next(t, msgs)
		if p, _ := m["params"].(map[string]any); p["status"] == "completed" {
			done = p
		}
	}
	// The same result as tasks/get (but the poll counters each read moves).
	got := r.call(t, tokAlice, true, "tasks/get", map[string]any{"taskId": id}).must(t)
	if diff := cmp.Diff(got["result"].(map[string]any)["content"], done["result"].(map[string]any)["content"]); diff != "" {
		t.Errorf("notification result differs from tasks/get (-get +notification):\n%s", diff)
	}
	if end := next(t, msgs); end["id"] != "listen-1" || end["result"] == nil {
		t.Errorf("listen end = %v", end)
	}

	// Without the extension: refused.
	code, _, payload := rpc(t, r.url, `{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["`+id+`"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"`+modernVersion+`","io.modelcontextprotocol/clientCapabilities":{}}}}`,
		map[string]string{"Mcp-Protocol-Version": modernVersion, "Mcp-Method": "subscriptions/listen", "Authorization": "Bearer " + tokAlice})
	if !strings.Contains(payload, "-32021") {
		t.Errorf("listen without the extension = %d %s", code, payload)
	}
}

// FuzzTaskListen feeds arbitrary request bodies through /mcp, where the
// task-listen layer reads every POST before go-sdk does: nothing panics, a
// listen this layer takes starts with its acknowledgement, and what it
// does not take reaches go-sdk with its body intact (a tools/list still
// lists the tools).
func FuzzTaskListen(f *testing.F) {
	for _, seed := range []string{
		toolsListReq,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["x","x"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":null}}}`,
		`{"jsonrpc":"2.0","method":"subscriptions/listen","params":{"notifications":{"taskIds":[]}}}`,
		`{"method":"subscriptions/listen"`,
		`[{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}]`,
	} {
		f.Add(seed)
	}
	b := setup(f, nil)
	h := b.srv.Handler()
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", legacyVersion)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		out := rec.Body.String()
		stream := strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream")
		if stream && strings.Contains(out, `"taskIds"`) && strings.Contains(out, "subscriptions/acknowledged") && !strings.HasPrefix(out, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\"") {
			t.Errorf("a task listen stream does not start with its acknowledgement: %q", out)
		}
		if body == toolsListReq && !strings.Contains(out, `"run_task"`) {
			t.Errorf("tools/list through the layer = %d %q", rec.Code, out)
		}
	})
}

// openTurnsRig serves the terminal tools over fake terminals, with the
// two personal tokens.
func openTurnsRig(t *testing.T) (*tasksRig, *fakeTerminals) {
	t.Helper()
	ft := newFakeTerminals()
	b := setup(t, func(o *server.Options) {
		o.Terminals = ft
		o.Auth = mustAuth(t, config.AuthOptions{UserTokens: "alice:" + tokAlice + ",bob:" + tokBob})
	})
	ts := httptest.NewServer(b.srv.Handler())
	t.Cleanup(ts.Close)
	return &tasksRig{url: ts.URL + "/mcp"}, ft
}

// TestTasksTerminalTurns: with the terminal tools on, a terminal_send from
// a client declaring the extension is a task (its id the turn id); an
// approval is input_required with an elicitation whose key is never used
// again; tasks/update with accept approves as terminal_approve does, with
// decline refuses (stops the Turn) as terminal_cancel does; an idle Turn is
// completed with terminal_status's result; another token's view is an
// unknown id's.
func TestTasksTerminalTurns(t *testing.T) {
	t.Parallel()
	r, ft := openTurnsRig(t)
	send := func(request string) string {
		t.Helper()
		res := r.call(t, tokAlice, true, "tools/call", map[string]any{"name": "terminal_send", "arguments": map[string]any{"terminal_id": fakeTerminalID, "request": request}}).must(t)
		if res["resultType"] != "task" || res["status"] != "working" || !strings.HasPrefix(res["taskId"].(string), "turn-") {
			t.Fatalf("terminal_send with the extension = %v", res)
		}
		return res["taskId"].(string)
	}
	get := func(tok, id string) rpcMessage {
		return r.call(t, tok, true, "tasks/get", map[string]any{"taskId": id})
	}
	id := send("build it")
	keys := map[string]bool{}
	approve := func(action string) {
		t.Helper()
		ft.finish(id, termapi.TurnWaitingForOpenClaw, "")
		got := get(tokAlice, id).must(t)
		reqs, _ := got["inputRequests"].(map[string]any)
		if got["status"] != "input_required" || len(reqs) != 1 {
			t.Fatalf("an approval = %v", got)
		}
		for k, v := range reqs {
			if keys[k] {
				t.Errorf("input request key %s used again", k)
			}
			keys[k] = true
			if m := v.(map[string]any); m["method"] != "elicitation/create" || !strings.Contains(fmt.Sprint(m["params"]), "rm -rf build") {
				t.Errorf("input request = %v", m)
			}
			if e := r.call(t, tokBob, true, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{k: map[string]any{"action": "accept"}}}).Error; e == nil || e.Code != -32602 {
				t.Errorf("bob's tasks/update = %+v, want not found", e)
			}
			r.call(t, tokAlice, true, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{k: map[string]any{"action": action}}}).must(t)
		}
	}
	approve("accept")
	if got := get(tokAlice, id).must(t); got["status"] != "working" {
		t.Errorf("after accept = %v, want working (approved)", got)
	}
	ghost := get(tokBob, "turn-20260101T120000-99999999").Error
	if theirs := get(tokBob, id).Error; theirs == nil || ghost == nil || strings.ReplaceAll(theirs.Message, id, "turn-20260101T120000-99999999") != ghost.Message {
		t.Errorf("bob's tasks/get = %+v, want what an unknown turn gets: %+v", theirs, ghost)
	}
	approve("decline")
	if got := get(tokAlice, id).must(t); got["status"] != "cancelled" {
		t.Errorf("after decline = %v, want cancelled (refused)", got)
	}

	done := send("and test it")
	ft.finish(done, termapi.TurnIdle, "all tests pass")
	got := get(tokAlice, done).must(t)
	res, _ := got["result"].(map[string]any)
	if got["status"] != "completed" || !strings.Contains(fmt.Sprint(res["content"]), "all tests pass") {
		t.Errorf("an idle Turn = %v", got)
	}

	// A stalled Turn takes no reply (the Turn service refuses one): its
	// task completes with isError and the steps terminal_status names.
	stalled := send("deploy")
	ft.finish(stalled, termapi.TurnStalled, "")
	got = get(tokAlice, stalled).must(t)
	res, _ = got["result"].(map[string]any)
	if got["status"] != "completed" || res["isError"] != true || got["inputRequests"] != nil {
		t.Fatalf("a stalled Turn = %v, want completed with isError", got)
	}
	ft.finish(stalled, termapi.TurnCancelled, "") // frees the pane for the next send

	// A prompt that cannot be answered from here: accept leaves it to the
	// terminal (nothing is pressed), decline cancels the Turn.
	blocked := send("rotate the keys")
	ft.finish(blocked, termapi.TurnWaitingForOpenClaw, "")
	ft.mu.Lock()
	v := ft.turns[blocked]
	v.NextSteps = []string{"answer_in_terminal", "cancel", "close", "status"}
	ft.turns[blocked] = v
	ft.mu.Unlock()
	got = get(tokAlice, blocked).must(t)
	if got["status"] != "input_required" || !strings.Contains(fmt.Sprint(got["inputRequests"]), "cannot be answered safely") {
		t.Fatalf("a blocked prompt = %v", got)
	}
	for k := range got["inputRequests"].(map[string]any) {
		r.call(t, tokAlice, true, "tasks/update", map[string]any{"taskId": blocked, "inputResponses": map[string]any{k: map[string]any{"action": "accept"}}}).must(t)
		ft.mu.Lock()
		status := ft.turns[blocked].Status // the fake's Approve would make it running
		ft.mu.Unlock()
		if status != termapi.TurnWaitingForOpenClaw {
			t.Fatalf("accepting a blocked prompt: status %s, want it left to the terminal", status)
		}
		r.call(t, tokAlice, true, "tasks/update", map[string]any{"taskId": blocked, "inputResponses": map[string]any{k: map[string]any{"action": "decline"}}}).must(t)
	}
	if got := get(tokAlice, blocked).must(t); got["status"] != "cancelled" {
		t.Errorf("after declining a blocked prompt = %v, want cancelled", got)
	}

	// Without the extension terminal_send answers as today.
	plain := r.call(t, tokAlice, false, "tools/call", map[string]any{"name": "terminal_send", "arguments": map[string]any{"terminal_id": fakeTerminalID, "request": "plain"}}).must(t)
	if plain["resultType"] != "complete" || plain["structuredContent"].(map[string]any)["turn_id"] == nil {
		t.Errorf("terminal_send without the extension = %v", plain)
	}
}

// tasksGetParams and tasksGetResult are tasks/get as a go-sdk client
// declares it (a custom method of the client).
type tasksGetParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

type tasksGetResult struct {
	mcp.ResultBase
	ResultType    string         `json:"resultType"`
	TaskID        string         `json:"taskId"`
	Status        string         `json:"status"`
	StatusMessage string         `json:"statusMessage"`
	Result        map[string]any `json:"result"`
}

// TestTasksGoSDKClient: a go-sdk client that declares the extension (its
// per-request capabilities carry it under 2026-07-28) over stateless HTTP
// gets a task handle from run_task and reads it with tasks/get as a custom
// method; the same client without the declaration gets today's result.
func TestTasksGoSDKClient(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.tasks.Instant = true
	ts := httptest.NewServer(b.srv.Handler())
	t.Cleanup(ts.Close)
	connectModern := func(tasks bool) *mcp.ClientSession {
		caps := &mcp.ClientCapabilities{}
		if tasks {
			caps.AddExtension(server.TasksExtension, map[string]any{})
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "go-sdk", Version: "1"}, &mcp.ClientOptions{Capabilities: caps})
		if err := mcp.AddSendingCustomMethod[*tasksGetParams, *tasksGetResult](c, "tasks/get"); err != nil {
			t.Fatal(err)
		}
		cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	cs := connectModern(true)
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "run_task", Arguments: map[string]any{"task": "go"}})
	if err != nil {
		t.Fatal(err)
	}
	// go-sdk parses the CreateTaskResult as a CallToolResult: no content,
	// and the task id only in the related-task _meta.
	related, _ := res.Meta["io.modelcontextprotocol/related-task"].(map[string]any)
	id, _ := related["taskId"].(string)
	if id == "" || len(res.Content) != 0 || res.StructuredContent != nil {
		t.Fatalf("run_task through a declaring go-sdk client = %+v", res)
	}
	got, err := mcp.CallCustomMethod[*tasksGetParams, *tasksGetResult](t.Context(), cs, "tasks/get", &tasksGetParams{TaskID: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResultType != "complete" || got.TaskID != id || got.Status != "completed" || fmt.Sprint(got.Result["content"]) != "[map[text:done: go type:text]]" {
		t.Errorf("tasks/get through go-sdk = %+v", got)
	}

	plain := connectModern(false)
	res, err = plain.CallTool(t.Context(), &mcp.CallToolParams{Name: "run_task", Arguments: map[string]any{"task": "go again"}})
	if err != nil || res.IsError {
		t.Fatalf("run_task without the declaration = %+v, %v", res, err)
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc["jobId"] == nil || res.Meta["io.modelcontextprotocol/related-task"] != nil {
		t.Errorf("run_task without the declaration = %+v", res)
	}
	if _, err := mcp.CallCustomMethod[*tasksGetParams, *tasksGetResult](t.Context(), plain, "tasks/get", &tasksGetParams{TaskID: id}); err == nil || !strings.Contains(err.Error(), "-32021") && !strings.Contains(err.Error(), "Missing required client capability") {
		t.Errorf("tasks/get without the declaration: %v, want the missing-capability error", err)
	}
}

// TestTasksListenTurn: a listen follows a terminal Turn's task through
// every change the Turn service's wait reports: working, an approval
// (input_required with its elicitation), working again once tasks/update
// approves it, and completed with terminal_status's result; then the
// listen ends. Another token's listen is acknowledged without the Turn.
func TestTasksListenTurn(t *testing.T) {
	t.Parallel()
	r, ft := openTurnsRig(t)
	id := r.call(t, tokAlice, true, "tools/call", map[string]any{"name": "terminal_send", "arguments": map[string]any{"terminal_id": fakeTerminalID, "request": "build it"}}).must(t)["taskId"].(string)

	if ack := next(t, r.listen(t, tokBob, id)); fmt.Sprint(ack["params"].(map[string]any)["notifications"]) != "map[taskIds:[]]" {
		t.Errorf("bob's listen on alice's Turn acknowledged %v", ack)
	}
	msgs := r.listen(t, tokAlice, id)
	if ack := next(t, msgs); fmt.Sprint(ack["params"].(map[string]any)["notifications"]) != "map[taskIds:["+id+"]]" {
		t.Fatalf("ack = %v", ack)
	}
	status := func(want string) map[string]any {
		t.Helper()
		m := next(t, msgs)
		p, _ := m["params"].(map[string]any)
		if m["method"] != "notifications/tasks" || p["taskId"] != id || p["status"] != want {
			t.Fatalf("notification = %v, want %s", m, want)
		}
		return p
	}
	status("working")
	ft.finish(id, termapi.TurnWaitingForOpenClaw, "")
	asked := status("input_required")
	for k := range asked["inputRequests"].(map[string]any) {
		r.call(t, tokAlice, true, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{k: map[string]any{"action": "accept"}}}).must(t)
	}
	status("working")
	ft.finish(id, termapi.TurnIdle, "all tests pass")
	if done := status("completed"); !strings.Contains(fmt.Sprint(done["result"]), "all tests pass") {
		t.Errorf("completed notification = %v, want the Turn's reply", done)
	}
	if end := next(t, msgs); end["id"] != "listen-1" || end["result"] == nil {
		t.Errorf("listen end = %v", end)
	}
}

// TestTasksListenStdio: over stdio, where go-sdk reads the messages, a
// listen naming tasks is served as over HTTP: its acknowledgement, the
// task working, then completed when the agent replies, then the listen's
// result; a listen the client cancels stops without a response, and
// go-sdk still answers everything else on the same stdout.
func TestTasksListenStdio(t *testing.T) {
	t.Parallel()
	r := openTasksRig(t, t.TempDir())
	srv, err := server.New(server.Options{Tasks: r.b, Registry: r.b.Registry(), TaskRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
	}()
	meta := map[string]any{
		"io.modelcontextprotocol/protocolVersion":    modernVersion,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "tasks-test", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{server.TasksExtension: map[string]any{}}},
	}
	write := func(id any, method string, params map[string]any) {
		t.Helper()
		params["_meta"] = meta
		msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
		if id != nil {
			msg["id"] = id
		}
		data, _ := json.Marshal(msg)
		if _, err := inW.Write(append(data, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	// A task created elsewhere (HTTP, one store) is followed over stdio.
	id := r.call(t, tokAlice, true, "tools/call", runTaskParams("HOLD for the stdio listener")).must(t)["taskId"].(string)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := r.fg.AwaitRun(ctx, id); err != nil {
		t.Fatal(err)
	}
	write("cancelled-listen", "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
	write("listen-1", "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id}}})
	seen := map[string][]string{} // subscription id -> what it said, in order
	say := func(m map[string]any) (sub, what string) {
		if m["id"] != nil {
			return fmt.Sprint(m["id"]), "result"
		}
		p, _ := m["params"].(map[string]any)
		sub = fmt.Sprint(p["_meta"].(map[string]any)["io.modelcontextprotocol/subscriptionId"])
		if m["method"] == "notifications/subscriptions/acknowledged" {
			return sub, "ack " + fmt.Sprint(p["notifications"])
		}
		return sub, fmt.Sprint(m["method"], " ", p["status"])
	}
	until := func(sub string, n int) {
		t.Helper()
		for len(seen[sub]) < n {
			select {
			case m, ok := <-lines:
				if !ok {
					t.Fatalf("stdout ended; seen %v", seen)
				}
				// A working task's new progress line is a new
				// notification with the same status: count it once.
				if s, what := say(m); len(seen[s]) == 0 || seen[s][len(seen[s])-1] != what {
					seen[s] = append(seen[s], what)
				}
			case <-ctx.Done():
				t.Fatalf("waiting for %d messages of %s; seen %v", n, sub, seen)
			}
		}
	}
	until("listen-1", 2)
	until("cancelled-listen", 2)
	write(nil, "notifications/cancelled", map[string]any{"requestId": "cancelled-listen"})
	write(7, "tools/call", map[string]any{"name": "check_task", "arguments": map[string]any{"jobId": id, "mode": "poll"}})
	until("7", 1)
	r.fg.Release(id)
	until("listen-1", 4)
	ack := "ack map[taskIds:[" + id + "]]"
	if diff := cmp.Diff([]string{ack, "notifications/tasks working", "notifications/tasks completed", "result"}, seen["listen-1"]); diff != "" {
		t.Errorf("listen-1 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{ack, "notifications/tasks working"}, seen["cancelled-listen"]); diff != "" {
		t.Errorf("the cancelled listen (-want +got):\n%s", diff)
	}
	_ = inW.Close()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for m := range lines {
		if s, what := say(m); s == "cancelled-listen" {
			t.Errorf("the cancelled listen said %s after its cancellation", what)
		}
	}
}

// FuzzStdioTaskListen feeds arbitrary lines to a stdio session, where the
// task-listen layer reads every message before go-sdk does: nothing
// panics or hangs, and every line written is one JSON-RPC message.
func FuzzStdioTaskListen(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["x","x"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`,
		`{"jsonrpc":"2.0","id":"a","method":"subscriptions/listen","params":{"notifications":{"taskIds":[]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"taskIds":null}}}`,
		`{"jsonrpc":"2.0","method":"subscriptions/listen","params":{"notifications":{"taskIds":["x"]}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		toolsListReq,
	} {
		f.Add(seed)
	}
	b := setup(f, nil)
	f.Fuzz(func(t *testing.T, line string) {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.srv.ServeStdio(ctx, strings.NewReader(line+"\n"), &out); err != nil {
			t.Fatalf("stdio session: %v", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("the session did not end with its input")
		}
		for l := range strings.Lines(out.String()) {
			if !json.Valid([]byte(l)) {
				t.Errorf("written line is not JSON: %q", l)
			}
		}
	})
}
