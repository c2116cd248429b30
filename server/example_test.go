package server_test

// This file is written as a host outside the module would write it: it
// imports only the public server and taskapi packages (never internal/...),
// brings its own task service and its own credential check, and serves the
// tools over HTTP.

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// echoTasks is a host's own task service: every task finishes at once,
// and its summary echoes the request. It keeps everything in memory.
type echoTasks struct {
	mu   sync.Mutex
	jobs map[string]taskapi.Snapshot
}

func (e *echoTasks) Run(_ context.Context, req server.RunRequest) (taskapi.RunResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	id := fmt.Sprintf("job-%d", len(e.jobs)+1)
	sessionKey := req.SessionKey
	if sessionKey == "" {
		sessionKey = "session-" + id
	}
	e.jobs[id] = taskapi.Snapshot{JobID: id, TaskID: id, SessionKey: sessionKey, Agent: req.Agent, Status: "completed",
		Summary: req.Agent + " did: " + req.Task, IsTerminal: true, Principal: req.Principal, Logs: []taskapi.LogEntry{}}
	return taskapi.RunResult{JobID: id, TaskID: id, SessionKey: sessionKey, Status: "running", Agent: req.Agent,
		NextAction: &taskapi.NextAction{Tool: "check_task", Args: taskapi.NextActionArgs{JobID: id, SessionKey: sessionKey}}}, nil
}

func (e *echoTasks) Check(_ context.Context, req server.CheckRequest, _ func(taskapi.Snapshot)) (taskapi.Snapshot, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.jobs[req.JobID]
	if !ok {
		return taskapi.Snapshot{}, &taskapi.NotFoundError{Message: taskapi.MsgJobNotFound}
	}
	return s, nil
}

// GetTask answers the server's owner checks too: a caller with a personal
// identity sees only the tasks whose Principal is that identity.
func (e *echoTasks) GetTask(_ context.Context, id string, _ taskapi.Detail, _ int64) (taskapi.TaskDetail, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.jobs[id]
	if !ok {
		return taskapi.TaskDetail{}, &taskapi.NotFoundError{Message: taskapi.MsgTaskNotFound}
	}
	return taskapi.TaskDetail{TaskID: s.TaskID, JobID: s.JobID, SessionKey: s.SessionKey, Agent: s.Agent, Status: s.Status,
		Summary: s.Summary, IsTerminal: s.IsTerminal, Principal: s.Principal}, nil
}

func (e *echoTasks) GetPrompt(context.Context, string) (taskapi.PromptResult, error) {
	return taskapi.PromptResult{}, &taskapi.NotFoundError{Message: taskapi.MsgTaskNotFound}
}

func (e *echoTasks) ListTasks(context.Context, taskapi.ListView, *string) ([]taskapi.TaskSummary, error) {
	return nil, nil
}

func (e *echoTasks) GetSession(context.Context, server.SessionRequest) (taskapi.SessionResult, error) {
	return taskapi.SessionResult{}, taskapi.ErrNotFound
}

func (e *echoTasks) ListSessions(context.Context, *string) ([]taskapi.ContinuationState, error) {
	return nil, nil
}

func (e *echoTasks) Cancel(context.Context, string) (taskapi.CancelResult, error) {
	return taskapi.CancelResult{}, &taskapi.NotFoundError{Message: taskapi.MsgCancelNotFound}
}

// oneToken is a host's own credential check: one bearer token, acting as
// one named user.
type oneToken struct{ user, token string }

func (o oneToken) Required() bool { return true }

func (o oneToken) Authenticate(_, bearer string) (taskapi.Identity, bool) {
	if subtle.ConstantTimeCompare([]byte(bearer), []byte(o.token)) != 1 {
		return taskapi.Identity{}, false
	}
	return taskapi.Identity{User: o.user}, true
}

// bearer adds a token to every request of a client.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// Example_embed embeds the MCP server in a host with its own task service,
// its own agent list and its own credential check, serves it over HTTP,
// and calls it as an MCP client would.
func Example_embed() {
	srv, err := server.New(server.Options{
		Tasks: &echoTasks{jobs: map[string]taskapi.Snapshot{}},
		Registry: &taskapi.Registry{Default: "helper", Agents: []taskapi.Agent{
			{ID: "helper", Description: "Answers questions"},
			{ID: "reviewer", Description: "Reviews changes"},
		}},
		Auth: oneToken{user: "ada", token: "s3cret"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()

	// Without the token the host's Authenticator refuses the request.
	resp, err := http.Post(ts.URL+"/mcp", "application/json", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = resp.Body.Close()
	fmt.Println("without a token:", resp.StatusCode)

	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "host-example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: "s3cret"}}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cs.Close()
	fmt.Println("server:", cs.InitializeResult().ServerInfo.Name)

	run, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_task",
		Arguments: map[string]any{"task": "say hello", "agent": "reviewer"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	jobID := run.StructuredContent.(map[string]any)["jobId"]
	fmt.Println("run_task:", jobID)

	check, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "check_task", Arguments: map[string]any{"jobId": jobID}})
	if err != nil {
		fmt.Println(err)
		return
	}
	sc := check.StructuredContent.(map[string]any)
	fmt.Println("check_task:", sc["status"], "-", sc["summary"])
	// Output:
	// without a token: 403
	// server: ClawConnect (ada)
	// run_task: job-1
	// check_task: completed - reviewer did: say hello
}
