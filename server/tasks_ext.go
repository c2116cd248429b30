package server

// The MCP Tasks extension (io.modelcontextprotocol/tasks) as an adapter
// over the task tools: a run_task call from a client that declares the
// extension answers with a task handle instead of the jobId text, and
// tasks/get, tasks/update and tasks/cancel read and stop the job the same
// way check_task and cancel_task do. Nothing here is stored separately: a
// task id is the job id, so a task outlives the connection, the process and
// the replica exactly as a job does.
//
// go-sdk does not implement the extension. The three methods are custom
// JSON-RPC methods of each MCP server (mcp.AddReceivingCustomMethod), which
// the stateless streamable HTTP handler accepts like the standard ones; the
// switch from a tool result to a task handle, and the capability checks the
// extension requires, are one receiving middleware (tasksMiddleware).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/taskapi"
)

// TasksExtension is the MCP Tasks extension's identifier, as advertised in
// server/discover and declared by a client in a request's
// _meta["io.modelcontextprotocol/clientCapabilities"].extensions.
const TasksExtension = "io.modelcontextprotocol/tasks"

// TaskPollInterval is the pollIntervalMs every task carries. An agent's
// reply takes seconds to minutes, and a tasks/get costs a few indexed store
// reads, so a poll a second shows a finished task within a second of the
// agent's reply at a load no store notices; a client that wants it sooner
// listens for notifications/tasks instead.
const TaskPollInterval = time.Second

// The extension's wire names.
const (
	methodTasksGet    = "tasks/get"
	methodTasksUpdate = "tasks/update"
	methodTasksCancel = "tasks/cancel"
	// tasksProtocol is the first protocol version the extension is defined
	// for: under older versions a declared capability enables nothing.
	tasksProtocol = "2026-07-28"
	// relatedTaskMeta is the _meta key that ties a message to a task.
	relatedTaskMeta = "io.modelcontextprotocol/related-task"
	// codeMissingCapability is the extension's error for a client that did
	// not declare it.
	codeMissingCapability = -32021
)

// Task statuses of the extension.
const (
	taskWorking   = "working"
	taskCompleted = "completed"
	taskCancelled = "cancelled"
)

// taskIDParams are the params of tasks/get, tasks/cancel and tasks/update.
type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
	// InputResponses answers input_required (tasks/update only).
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

// taskResult is the extension's Task: a CreateTaskResult (resultType
// "task") as the answer of tools/call, and a DetailedTask (resultType
// "complete") as the answer of tasks/get.
type taskResult struct {
	mcp.ResultBase
	ResultType     string          `json:"resultType"`
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          *int64          `json:"ttlMs"` // null: kept without limit
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	Result         *completeResult `json:"result,omitempty"`
	// InputRequests are the prompts of an input_required task (a Turn's).
	InputRequests map[string]any `json:"inputRequests,omitempty"`
}

// completeResult is the CallToolResult of a completed task, with the
// resultType every 2026-07-28 result carries (go-sdk sets it only on the
// results it sends itself).
type completeResult struct {
	ResultType        string        `json:"resultType"`
	Content           []mcp.Content `json:"content"`
	StructuredContent any           `json:"structuredContent,omitempty"`
	IsError           bool          `json:"isError,omitempty"`
}

// ackResult is the empty acknowledgement of tasks/update and tasks/cancel.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// tasksRequest is what every go-sdk server request offers about its caller.
type tasksRequest interface {
	ProtocolVersion() string
	ClientCapabilities() *mcp.ClientCapabilities
}

// declaresTasks reports whether req enables the extension: protocol
// 2026-07-28 or later and the extension in its per-request capabilities.
func declaresTasks(req mcp.Request) bool {
	r, ok := req.(tasksRequest)
	if !ok || r.ProtocolVersion() < tasksProtocol {
		return false
	}
	caps := r.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok = caps.Extensions[TasksExtension]
	return ok
}

// errMissingTasks is the extension's answer to a tasks/* call from a client
// that did not declare it.
var errMissingTasks = &jsonrpc.Error{
	Code:    codeMissingCapability,
	Message: "Missing required client capability: declare the " + TasksExtension + " extension in _meta[\"io.modelcontextprotocol/clientCapabilities\"].extensions (protocol " + tasksProtocol + ")",
	Data:    json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + TasksExtension + `":{}}}}`),
}

// errTaskNotFound answers an unknown id and another caller's task alike, so
// a caller learns nothing about tasks that are not its own.
func errTaskNotFound(id string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("Failed to retrieve task: task %q not found (it never existed, is not yours, or its retention ended)", id)}
}

// tasksMiddleware turns a task-enabled run_task answer into a task handle,
// refuses tasks/* to a client that did not declare the extension, and keeps
// the extension out of a legacy initialize answer (where it is undefined).
func (c *conn) tasksMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if ir, ok := res.(*mcp.InitializeResult); ok && ir.Capabilities != nil && ir.Capabilities.Extensions != nil {
				caps := *ir.Capabilities
				caps.Extensions = nil
				ir.Capabilities = &caps
			}
			return res, err
		case methodTasksGet, methodTasksUpdate, methodTasksCancel:
			if !declaresTasks(req) {
				return nil, errMissingTasks
			}
		case "tools/call":
			ctr, ok := req.(*mcp.CallToolRequest)
			if !ok || ctr.Params == nil || !declaresTasks(req) {
				break
			}
			created := c.createdTask
			switch {
			case ctr.Params.Name == "run_task":
			case ctr.Params.Name == "terminal_send" && c.s.terminals != nil:
				created = c.createdTurnTask
			default:
				return next(ctx, method, req)
			}
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			// A refusal (bad arguments, busy session) stays the immediate
			// result it is today: the extension lets the server decide per
			// call, and there is no task to poll.
			tr, ok := res.(*mcp.CallToolResult)
			if !ok || tr.IsError {
				return res, err
			}
			task, err := created(ctx, tr)
			if err != nil {
				return nil, err
			}
			// The related-task evidence of the extension's requester, in
			// _meta: a client library that parses the answer as a
			// CallToolResult (go-sdk's keeps _meta, not the task's fields)
			// still learns the task id.
			task.SetMeta(map[string]any{relatedTaskMeta: map[string]any{"taskId": task.TaskID}})
			return task, nil
		}
		return next(ctx, method, req)
	}
}

// createdTask is the CreateTaskResult of a submitted run_task. Run returned
// after the task was stored; reading it back here is what the extension
// demands before the handle is handed out (a tasks/get on any replica
// resolves), and gives its creation time.
func (c *conn) createdTask(ctx context.Context, tr *mcp.CallToolResult) (*taskResult, error) {
	var run taskapi.RunResult
	data, err := json.Marshal(tr.StructuredContent)
	if err == nil {
		err = json.Unmarshal(data, &run)
	}
	if err != nil || run.JobID == "" {
		return nil, fmt.Errorf("run task: the submitted task has no job id (%v)", err)
	}
	d, err := c.s.tasks.GetTask(ctx, run.JobID, taskapi.DetailCore, 0)
	if err != nil {
		return nil, fmt.Errorf("run task: read back task %s: %w", run.JobID, err)
	}
	v := c.view(d)
	v.ResultType = "task"
	v.Status = taskWorking
	v.StatusMessage = "The agent is working on the task."
	return v, nil
}

// view is the status-independent part of a task's Task.
func (c *conn) view(d taskapi.TaskDetail) *taskResult {
	last := max(d.LastEventAt, d.EndedAt, d.StartedAt)
	v := &taskResult{
		ResultType: "complete", TaskID: d.TaskID,
		CreatedAt: isoMillis(d.StartedAt), LastUpdatedAt: isoMillis(last),
		PollIntervalMs: TaskPollInterval.Milliseconds(),
	}
	if c.s.retention > 0 {
		// Retention counts from the end, the extension's TTL from creation:
		// an ended task is kept until its end plus retention, a running one
		// at least until now plus retention (so its TTL grows while it runs).
		end := d.EndedAt
		if !d.IsTerminal || end == 0 {
			end = max(time.Now().UnixMilli(), last)
		}
		ttl := end - d.StartedAt + c.s.retention.Milliseconds()
		v.TTLMs = &ttl
	}
	return v
}

func isoMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// owned returns the caller's task, or the not-found error for an unknown id
// and for a task the caller may not see.
func (c *conn) owned(ctx context.Context, id string, detail taskapi.Detail, known int64) (taskapi.TaskDetail, error) {
	if strings.TrimSpace(id) == "" {
		return taskapi.TaskDetail{}, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "taskId must not be empty: pass the taskId that tools/call returned"}
	}
	d, err := c.s.tasks.GetTask(ctx, id, detail, known)
	switch {
	case errors.Is(err, ErrNotFound):
		return d, errTaskNotFound(id)
	case err != nil:
		return d, fmt.Errorf("get task: %w", err)
	case !c.inScope(d.Agent) || !c.mine(d.Principal):
		return taskapi.TaskDetail{}, errTaskNotFound(id)
	case c.s.retention > 0 && d.IsTerminal && d.EndedAt > 0 &&
		time.Now().UnixMilli() > d.EndedAt+c.s.retention.Milliseconds():
		// Past its TTL: gone for the extension even before the store's
		// next sweep removes it.
		return taskapi.TaskDetail{}, errTaskNotFound(id)
	}
	return d, nil
}

// tasksGet answers tasks/get: working with the latest progress line while
// the agent runs; completed with what check_task returns at the end (an
// agent's error is a completed result with isError, never "failed", which
// the extension keeps for JSON-RPC errors); cancelled after a stop.
func (c *conn) tasksGet(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*taskResult, error) {
	if c.isTurnTask(p.TaskID) {
		v, err := c.ownedTurn(ctx, p.TaskID)
		if err != nil {
			return nil, err
		}
		return c.turnTask(v), nil
	}
	// Past every log entry: the preset reports the count, not the entries.
	d, err := c.owned(ctx, p.TaskID, taskapi.DetailUpdates, 1<<62)
	if err != nil {
		return nil, err
	}
	v := c.view(d)
	switch {
	case !d.IsTerminal:
		v.Status = taskWorking
		v.StatusMessage = c.progress(ctx, d)
	case d.Status == string(taskapi.TaskCancelled):
		v.Status = taskCancelled
		v.StatusMessage = "The task was cancelled."
	default:
		snap, err := c.s.tasks.Check(ctx, CheckRequest{JobID: d.TaskID, Mode: ModeWait, Wait: c.s.waits.max}, nil)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, errTaskNotFound(p.TaskID)
		case err != nil:
			return nil, fmt.Errorf("get task result: %w", err)
		}
		v.Status = taskCompleted
		v.StatusMessage = "The agent finished with status " + snap.Status + "."
		v.Result = &completeResult{
			ResultType: "complete", Content: []mcp.Content{&mcp.TextContent{Text: checkText(snap)}},
			StructuredContent: snap, IsError: snap.Status == "error",
		}
	}
	return v, nil
}

// progress is a running task's statusMessage: its latest log line.
func (c *conn) progress(ctx context.Context, d taskapi.TaskDetail) string {
	const fallback = "The agent is working on the task."
	if d.LogEventCount == nil || *d.LogEventCount == 0 {
		return fallback
	}
	last, err := c.s.tasks.GetTask(ctx, d.TaskID, taskapi.DetailUpdates, *d.LogEventCount-1)
	if err != nil || len(last.Updates) == 0 {
		return fallback
	}
	return last.Updates[len(last.Updates)-1].Text
}

// tasksCancel answers tasks/cancel exactly as cancel_task stops a task; a
// task that already ended is acknowledged too (the extension's
// cancellation is a request, and the task's status tells the outcome).
func (c *conn) tasksCancel(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*ackResult, error) {
	if c.isTurnTask(p.TaskID) {
		if _, err := c.ownedTurn(ctx, p.TaskID); err != nil {
			return nil, err
		}
		// A Turn that is already over cannot be cancelled; the request is
		// acknowledged all the same and its status tells.
		_, _ = c.s.terminals.Cancel(ctx, p.TaskID)
		return &ackResult{ResultType: "complete"}, nil
	}
	if _, err := c.owned(ctx, p.TaskID, taskapi.DetailCore, 0); err != nil {
		return nil, err
	}
	res, _, err := c.cancelTask(ctx, nil, CancelTaskInput{TaskID: p.TaskID})
	switch {
	case err != nil:
		return nil, err
	case res.IsError:
		return nil, errTaskNotFound(p.TaskID)
	}
	return &ackResult{ResultType: "complete"}, nil
}

// tasksUpdate answers tasks/update. A run_task task never asks for input,
// so every response is for a key that is not outstanding, which the
// extension says to ignore; the task must still be the caller's. A Turn's
// answers act as the terminal tools do (turnUpdate).
func (c *conn) tasksUpdate(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*ackResult, error) {
	if c.isTurnTask(p.TaskID) {
		if err := c.turnUpdate(ctx, p.TaskID, p.InputResponses); err != nil {
			return nil, err
		}
		return &ackResult{ResultType: "complete"}, nil
	}
	if _, err := c.owned(ctx, p.TaskID, taskapi.DetailCore, 0); err != nil {
		return nil, err
	}
	return &ackResult{ResultType: "complete"}, nil
}

// addTasksExtension registers the extension's methods and middleware on ms.
func (c *conn) addTasksExtension(ms *mcp.Server) {
	for _, err := range []error{
		mcp.AddReceivingCustomMethod(ms, methodTasksGet, c.tasksGet),
		mcp.AddReceivingCustomMethod(ms, methodTasksCancel, c.tasksCancel),
		mcp.AddReceivingCustomMethod(ms, methodTasksUpdate, c.tasksUpdate),
	} {
		if err != nil {
			panic(err) // a method name go-sdk took over: a programming error
		}
	}
	ms.AddReceivingMiddleware(c.tasksMiddleware)
}
