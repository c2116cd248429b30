package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/taskapi"
)

// readOnlyPrefix starts the description of every tool that changes nothing.
const readOnlyPrefix = "READ ONLY: never starts, changes, or cancels any work. "

// MaxTextBytes bounds the task, context and payload arguments of run_task.
const MaxTextBytes = 1 << 20

// Model-facing texts. They are part of the contract with existing clients.
const (
	textSubmitted       = "Task submitted. Use check_task to poll for progress."
	textTokenHint       = "This connection uses the shared password. Ask the operator for a personal token so your tasks carry your name."
	textJobNotFound     = taskapi.MsgJobNotFound
	textJobNotFoundBare = "Job not found."
	textSessionJobGone  = taskapi.MsgSessionJobMissing
	textTaskNotFound    = taskapi.MsgTaskNotFound
	textTaskNotFoundSC  = "Task not found."
	textSessionMissing  = "Session not found."
	textCancelMissing   = taskapi.MsgCancelNotFound
	textCancelNeedsArg  = "Pass taskId (or sessionKey) to say which task to stop."
	textStopRequested   = "Stop requested. Check get_task for the terminal cancellation result."
	textDraining        = "The server is restarting; the task keeps running. Call check_task again in a few seconds."
	textCheckNeedsArg   = "Pass jobId (or sessionKey) to say which task to check. run_task returns both."
)

// RunTaskInput is the input of run_task.
type RunTaskInput struct {
	Task       string `json:"task" jsonschema:"What the agent should do, in plain language."`
	Agent      string `json:"agent,omitempty" jsonschema:"Agent id; omit for the default agent. See list_agents."`
	Context    string `json:"context,omitempty" jsonschema:"Background the agent needs: files, constraints, prior results."`
	SessionKey string `json:"sessionKey,omitempty" jsonschema:"Continue this thread (from an earlier result); omit to start a fresh thread."`
	SenderName string `json:"senderName,omitempty" jsonschema:"Who is asking, shown to the agent."`
	Payload    string `json:"payload,omitempty" jsonschema:"Opaque data stored beside the task and handed to the agent as a file path; never parsed or echoed."`
}

// CheckTaskInput is the input of check_task.
type CheckTaskInput struct {
	JobID         string   `json:"jobId,omitempty" jsonschema:"The jobId returned by run_task."`
	SessionKey    string   `json:"sessionKey,omitempty" jsonschema:"Check the latest task of this session instead of a jobId."`
	Agent         string   `json:"agent,omitempty" jsonschema:"Agent id the task runs on; omit unless you have several."`
	KnownLogCount int64    `json:"knownLogCount,omitempty" jsonschema:"The logCursor of the previous check_task result, passed back unchanged."`
	Mode          string   `json:"mode,omitempty" jsonschema:"\"wait\" (default): return when the task finishes or waitMs elapses. \"poll\": also return early when new log entries appear."`
	WaitMs        *float64 `json:"waitMs,omitempty" jsonschema:"How long to wait in milliseconds; default 45000, clamped to 1000..120000."`
}

// GetTaskInput is the input of get_task.
type GetTaskInput struct {
	TaskID        string `json:"taskId" jsonschema:"The taskId (same as jobId) of the task."`
	Detail        string `json:"detail,omitempty" jsonschema:"How much to include; default \"summary\". \"prompt\" returns only what was asked."`
	KnownLogCount int64  `json:"knownLogCount,omitempty" jsonschema:"With detail updates/full: only log entries after this cursor."`
}

// ListTasksInput is the input of list_tasks.
type ListTasksInput struct {
	View string `json:"view,omitempty" jsonschema:"\"all\" (default) or \"active\" (queued, running, blocked, needs-human)."`
}

// GetSessionInput is the input of get_session.
type GetSessionInput struct {
	SessionID string `json:"sessionId" jsonschema:"The sessionKey of the thread."`
	Mode      string `json:"mode,omitempty" jsonschema:"\"snapshot\" (default), \"events\", \"tail\" (events plus nextAfter) or \"tasks\" (every task of the session)."`
	Limit     *int64 `json:"limit,omitempty" jsonschema:"Events per page; default 50, clamped to 1..200."`
	After     *int64 `json:"after,omitempty" jsonschema:"Skip this many raw log entries (use nextAfter from the previous page); default 0."`
	Agent     string `json:"agent,omitempty" jsonschema:"Agent id the session belongs to."`
}

// CancelTaskInput is the input of cancel_task.
type CancelTaskInput struct {
	TaskID     string `json:"taskId,omitempty" jsonschema:"The task to stop."`
	SessionKey string `json:"sessionKey,omitempty" jsonschema:"Stop the latest task of this session instead."`
}

// EmptyInput is the input of the tools that take no arguments.
type EmptyInput struct{}

// AgentInfo is one row of list_agents.
type AgentInfo struct {
	ID               string   `json:"id"`
	Emoji            string   `json:"emoji,omitempty"`
	Role             string   `json:"role,omitempty"`
	Description      string   `json:"description,omitempty"`
	WhenToUse        string   `json:"whenToUse,omitempty"`
	MemorySearchable bool     `json:"memorySearchable"`
	Collections      []string `json:"collections"`
}

// ConnectionInfo is get_connection_info's result.
type ConnectionInfo struct {
	ProtocolEra     string   `json:"protocolEra"`
	ProtocolVersion string   `json:"protocolVersion,omitempty"`
	ServerName      string   `json:"serverName"`
	ServerVersion   string   `json:"serverVersion"`
	Build           string   `json:"build"`
	ToolsetVersion  string   `json:"toolsetVersion"`
	ToolCount       int      `json:"toolCount"`
	Tools           []string `json:"tools"`
	Identity        struct {
		User   *string `json:"user"`
		Legacy bool    `json:"legacy,omitempty"`
	} `json:"identity"`
	Agents struct {
		Allowed []string `json:"allowed"`
		Default string   `json:"default"`
	} `json:"agents"`
}

// conn is the per-connection context of the tool handlers: who is calling
// and which agents they may use.
type conn struct {
	s        *Server
	scope    taskapi.Scope
	identity taskapi.Identity
}

// toolDef is one tool declaration plus the function that registers its
// typed handler on an mcp.Server.
type toolDef struct {
	tool *mcp.Tool
	add  func(*mcp.Server, *mcp.Tool)
}

func boolPtr(b bool) *bool { return &b }

func readOnly(title string) *mcp.ToolAnnotations {
	return &mcp.ToolAnnotations{Title: title, ReadOnlyHint: true, DestructiveHint: boolPtr(false), IdempotentHint: true, OpenWorldHint: boolPtr(false)}
}

// inputSchema infers T's schema and lets tweak add enums.
func inputSchema[T any](tweak func(props map[string]*jsonschema.Schema)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("server: input schema %T: %v", *new(T), err))
	}
	if tweak != nil {
		tweak(s.Properties)
	}
	return s
}

func enumOf(values ...string) []any {
	out := make([]any, len(values))
	for i, v := range values {
		out[i] = v
	}
	return out
}

// prop is shorthand for an output property schema of one type.
func prop(typ string) *jsonschema.Schema { return &jsonschema.Schema{Type: typ} }

// nextActionProp is the nextAction output property: an object or null,
// spelled as anyOf branches of one type each (a type array is poorly
// portable across clients).
func nextActionProp() *jsonschema.Schema {
	return &jsonschema.Schema{
		Description: "The tool call to make next ({tool, args}), or null when the task is finished.",
		AnyOf:       []*jsonschema.Schema{{Type: "object"}, {Type: "null"}},
	}
}

// singleType replaces the ["null", T] type that a pointer field infers with
// T alone: absent means the default, and a type array is poorly portable.
func singleType(p *jsonschema.Schema, typ string) {
	p.Types, p.Type = nil, typ
}

// outputSchema is an open object schema: additionalProperties true and only
// the fields every branch returns in required.
func outputSchema(required []string, props map[string]*jsonschema.Schema) *jsonschema.Schema {
	return &jsonschema.Schema{Type: "object", Properties: props, Required: required, AdditionalProperties: &jsonschema.Schema{}}
}

// chainingProps are the properties a client chains from one call to the next.
func chainingProps() map[string]*jsonschema.Schema {
	return map[string]*jsonschema.Schema{
		"jobId":           prop("string"),
		"taskId":          prop("string"),
		"sessionKey":      prop("string"),
		"agent":           prop("string"),
		"status":          prop("string"),
		"isTerminal":      prop("boolean"),
		"isError":         prop("boolean"),
		"continuePolling": prop("boolean"),
		"logCursor":       prop("integer"),
		"logEventCount":   prop("integer"),
		"summary":         prop("string"),
		"error":           prop("string"),
		"nextAction":      nextActionProp(),
	}
}

var detailPresets = []string{"core", "summary", "updates", "artifacts", "diagnostics", "prompt", "full", "fullWithDiagnostics"}

// tools declares every tool once. The agent enum and the senderName text
// depend on the connection; everything else is fixed.
func (c *conn) tools() []toolDef {
	agentEnum := func(props map[string]*jsonschema.Schema) {
		if p := props["agent"]; p != nil && len(c.scope.Allowed) > 0 {
			p.Enum = enumOf(c.scope.Allowed...)
		}
	}
	senderDesc := "Who is asking, shown to the agent."
	if c.identity.User != "" {
		senderDesc = "Ignored on this connection: tasks carry the name of the personal token (" + c.identity.User + ")."
	}
	defs := []toolDef{
		{
			tool: &mcp.Tool{
				Name:  "run_task",
				Title: "Run a task on an agent",
				Description: "Hand a task to an OpenClaw agent and return at once with its jobId and sessionKey; it never waits for the run. " +
					"Then call check_task with the jobId until isTerminal is true. Pass sessionKey to continue an earlier thread.",
				InputSchema: inputSchema[RunTaskInput](func(p map[string]*jsonschema.Schema) {
					agentEnum(p)
					p["senderName"].Description = senderDesc
				}),
				OutputSchema: outputSchema([]string{"jobId", "taskId", "sessionKey", "status", "nextAction"}, map[string]*jsonschema.Schema{
					"jobId": prop("string"), "taskId": prop("string"), "sessionKey": prop("string"),
					"status":     {Type: "string", Enum: enumOf("running")},
					"agent":      prop("string"),
					"nextAction": nextActionProp(),
				}),
				Annotations: &mcp.ToolAnnotations{Title: "Run a task on an agent", DestructiveHint: boolPtr(false), OpenWorldHint: boolPtr(true)},
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.runTask) },
		},
		{
			tool: &mcp.Tool{
				Name:  "check_task",
				Title: "Check a task",
				Description: readOnlyPrefix + "Report a task's progress and result. By default it waits until the task finishes or waitMs elapses, " +
					"so one call usually suffices; if continuePolling is true, call it again with knownLogCount set to logCursor. " +
					"This is the only tool that waits.",
				InputSchema: inputSchema[CheckTaskInput](func(p map[string]*jsonschema.Schema) {
					agentEnum(p)
					p["mode"].Enum = enumOf(ModePoll, ModeWait)
					singleType(p["waitMs"], "number")
				}),
				OutputSchema: outputSchema([]string{"status"}, chainingProps()),
				Annotations:  readOnly("Check a task"),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.checkTask) },
		},
		{
			tool: &mcp.Tool{
				Name:        "get_task",
				Title:       "Get a task",
				Description: readOnlyPrefix + "Read one task without waiting: status, summary and, per detail preset, updates, artifacts, diagnostics or the original prompt.",
				InputSchema: inputSchema[GetTaskInput](func(p map[string]*jsonschema.Schema) {
					p["detail"].Enum = enumOf(detailPresets...)
				}),
				OutputSchema: outputSchema([]string{"taskId"}, func() map[string]*jsonschema.Schema {
					p := chainingProps()
					p["prompt"] = prop("object")
					return p
				}()),
				Annotations: readOnly("Get a task"),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.getTask) },
		},
		{
			tool: &mcp.Tool{
				Name:        "list_tasks",
				Title:       "List tasks",
				Description: readOnlyPrefix + "List the latest task of every known session, newest activity first, with a short summary preview.",
				InputSchema: inputSchema[ListTasksInput](func(p map[string]*jsonschema.Schema) {
					p["view"].Enum = enumOf(string(taskapi.ViewActive), string(taskapi.ViewAll))
				}),
				OutputSchema: outputSchema([]string{"tasks"}, map[string]*jsonschema.Schema{"tasks": prop("array")}),
				Annotations:  readOnly("List tasks"),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.listTasks) },
		},
		{
			tool: &mcp.Tool{
				Name:        "get_session",
				Title:       "Inspect a session",
				Description: readOnlyPrefix + "Inspect a thread by its sessionKey: its latest task, raw log events page by page, or every task it ran.",
				InputSchema: inputSchema[GetSessionInput](func(p map[string]*jsonschema.Schema) {
					agentEnum(p)
					p["mode"].Enum = enumOf(string(taskapi.ModeSnapshot), string(taskapi.ModeEvents), string(taskapi.ModeTail), string(taskapi.ModeTasks))
					singleType(p["limit"], "integer")
					singleType(p["after"], "integer")
				}),
				OutputSchema: outputSchema([]string{"found"}, map[string]*jsonschema.Schema{
					"found": prop("boolean"), "sessionKey": prop("string"), "agent": prop("string"), "jobId": prop("string"),
					"status": prop("string"), "events": prop("array"), "nextAfter": prop("integer"), "tasks": prop("array"),
				}),
				Annotations: readOnly("Inspect a session"),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.getSession) },
		},
		{
			tool: &mcp.Tool{
				Name:        "list_sessions",
				Title:       "List sessions",
				Description: readOnlyPrefix + "List known threads with their last result; pass a sessionKey to run_task to continue one.",
				InputSchema: inputSchema[EmptyInput](nil),
				OutputSchema: outputSchema([]string{"sessions"}, map[string]*jsonschema.Schema{
					"sessions": prop("array"), "configuredAgents": prop("array"),
				}),
				Annotations: readOnly("List sessions"),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.listSessions) },
		},
		{
			tool: &mcp.Tool{
				Name:        "cancel_task",
				Title:       "Cancel a task",
				Description: "Ask the agent to stop a running task. Safe to repeat. The task then ends as cancelled; confirm with get_task.",
				InputSchema: inputSchema[CancelTaskInput](nil),
				OutputSchema: outputSchema([]string{"found"}, map[string]*jsonschema.Schema{
					"found": prop("boolean"), "requested": prop("boolean"), "alreadyTerminal": prop("boolean"),
					"status": prop("string"), "jobId": prop("string"),
				}),
				Annotations: &mcp.ToolAnnotations{Title: "Cancel a task", DestructiveHint: boolPtr(false), IdempotentHint: true, OpenWorldHint: boolPtr(false)},
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.cancelTask) },
		},
		{
			tool: &mcp.Tool{
				Name:        "list_agents",
				Title:       "List agents",
				Description: readOnlyPrefix + "List the agents this connection may use, with what each is for and which one is the default.",
				InputSchema: inputSchema[EmptyInput](nil),
				OutputSchema: outputSchema([]string{"default", "agents"}, map[string]*jsonschema.Schema{
					"default": prop("string"), "agents": prop("array"),
				}),
				Annotations: readOnly("List agents"),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.listAgents) },
		},
		{
			tool: &mcp.Tool{
				Name:        "get_connection_info",
				Title:       "Connection info",
				Description: readOnlyPrefix + "Describe this connection: protocol, server build, toolset version, identity and the agents in scope.",
				InputSchema: inputSchema[EmptyInput](nil),
				OutputSchema: outputSchema([]string{"serverName", "toolsetVersion", "tools"}, map[string]*jsonschema.Schema{
					"protocolEra": prop("string"), "protocolVersion": prop("string"), "serverName": prop("string"),
					"serverVersion": prop("string"), "build": prop("string"), "toolsetVersion": prop("string"),
					"toolCount": prop("integer"), "tools": prop("array"), "identity": prop("object"), "agents": prop("object"),
				}),
				Annotations: readOnly("Connection info"),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.connectionInfo) },
		},
	}
	return append(defs, c.terminalTools()...)
}

// toolsetVersion is the first 12 hex digits of the SHA-256 of the JSON of
// the declarations {name, description, inputSchema, outputSchema}, sorted by
// name.
func toolsetVersion(defs []toolDef) string {
	type decl struct {
		Name         string `json:"name"`
		Description  string `json:"description"`
		InputSchema  any    `json:"inputSchema"`
		OutputSchema any    `json:"outputSchema"`
	}
	decls := make([]decl, len(defs))
	for i, d := range defs {
		decls[i] = decl{d.tool.Name, d.tool.Description, d.tool.InputSchema, d.tool.OutputSchema}
	}
	slices.SortFunc(decls, func(a, b decl) int { return strings.Compare(a.Name, b.Name) })
	data, err := json.Marshal(decls)
	if err != nil {
		panic(fmt.Sprintf("server: marshal declarations: %v", err))
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:12]
}

// result builds a tool result with a model-facing text and structured
// content (left to the SDK to marshal from the returned output value).
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

func errorResult(text string) *mcp.CallToolResult {
	r := textResult(text)
	r.IsError = true
	return r
}

func jsonText(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(data)
}

// refuseAgent returns the scope refusal, or "" when agent is usable.
func (c *conn) refuseAgent(agent string) string {
	if agent == "" || c.scope.Contains(agent) {
		return ""
	}
	return fmt.Sprintf("Agent %q is not available on this connection. Allowed: %s.", agent, strings.Join(c.scope.Allowed, ", "))
}

// inScope reports whether a result owned by agent may be shown. Results with
// no recorded agent belong to the default agent.
func (c *conn) inScope(agent string) bool {
	if agent == "" {
		agent = c.s.registry.Default
	}
	return c.scope.Contains(agent)
}

// narrowed reports whether the connection sees fewer than all agents or
// only its own tasks, so a task must be resolved and checked before it is
// waited on.
func (c *conn) narrowed() bool {
	return len(c.scope.Allowed) < len(c.s.registry.Agents) || !c.seesAll()
}

// principal is what the connection's tasks and sessions record as their
// owner: "user:<name>" for a personal token, "legacy" for the shared
// PUBLIC_MCP_PASS (one identity), "" for a caller with no credential.
func (c *conn) principal() string {
	switch {
	case c.identity.User != "":
		return "user:" + c.identity.User
	case c.identity.Legacy:
		return "legacy"
	}
	return ""
}

// seesAll reports whether the connection sees every principal's tasks: a
// caller with no credential (stdio, an open loopback server) or a team view.
func (c *conn) seesAll() bool { return c.principal() == "" || c.s.shared }

// only is the principal whose sessions this connection lists, or nil when
// it sees everyone's. Filtering in the store, not after its page, keeps a
// credential's own sessions listed however many newer ones others have.
func (c *conn) only() *string {
	if c.seesAll() {
		return nil
	}
	p := c.principal()
	return &p
}

// mine reports whether a task or session of principal p may be shown to and
// controlled by this connection.
func (c *conn) mine(p string) bool { return c.seesAll() || p == c.principal() }

// tooLong returns the refusal for an oversized argument, or "".
func tooLong(field, v string) string {
	if len(v) > MaxTextBytes {
		return fmt.Sprintf("%s is too long (%d bytes; at most %d). Shorten it, or split the work across several tasks.", field, len(v), MaxTextBytes)
	}
	return ""
}

func (c *conn) runTask(ctx context.Context, _ *mcp.CallToolRequest, in RunTaskInput) (*mcp.CallToolResult, any, error) {
	if strings.TrimSpace(in.Task) == "" {
		return nil, nil, errors.New("task must not be empty: say what the agent should do")
	}
	for _, f := range []struct{ name, v string }{{"task", in.Task}, {"context", in.Context}, {"payload", in.Payload}} {
		if msg := tooLong(f.name, f.v); msg != "" {
			return errorResult(msg), nil, nil
		}
	}
	agent := strings.TrimSpace(in.Agent)
	if msg := c.refuseAgent(agent); msg != "" {
		return errorResult(msg), nil, nil
	}
	if agent == "" {
		agent = c.scope.Default
	}
	sender := strings.TrimSpace(in.SenderName)
	if c.identity.User != "" {
		sender = c.identity.User
	}
	res, err := c.s.tasks.Run(ctx, RunRequest{
		Agent: agent, Task: in.Task, Context: in.Context,
		SessionKey: strings.TrimSpace(in.SessionKey), SenderName: sender, Payload: in.Payload,
		Principal: c.principal(), AnySession: c.s.shared,
	})
	if err != nil {
		return errorResult("Failed to submit: " + err.Error()), nil, nil
	}
	text := jsonText(struct {
		taskapi.RunResult
		Message string `json:"message"`
	}{res, textSubmitted})
	if c.identity.Legacy {
		text += "\n\nNote: " + textTokenHint
	}
	return textResult(text), res, nil
}

type checkNotFound struct {
	JobID      string `json:"jobId,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	Status     string `json:"status"`
	Error      string `json:"error"`
}

func (c *conn) checkTask(ctx context.Context, req *mcp.CallToolRequest, in CheckTaskInput) (*mcp.CallToolResult, any, error) {
	jobID, sessionKey := strings.TrimSpace(in.JobID), strings.TrimSpace(in.SessionKey)
	if jobID == "" && sessionKey == "" {
		return errorResult(textCheckNeedsArg), nil, nil
	}
	if msg := c.refuseAgent(in.Agent); msg != "" {
		return errorResult(msg), nil, nil
	}
	notFound := func(msg string) (*mcp.CallToolResult, any, error) {
		return errorResult(msg), checkNotFound{JobID: jobID, SessionKey: sessionKey, Status: "error", Error: msg}, nil
	}
	missing := textJobNotFound
	if sessionKey != "" {
		missing = textSessionJobGone
	}
	if c.narrowed() {
		// Resolve the owner first, so an out-of-scope task is never waited on.
		owner, principal, err := c.ownerOf(ctx, jobID, sessionKey, in.Agent)
		switch {
		case errors.Is(err, ErrNotFound):
			return notFound(missing)
		case err != nil:
			return nil, nil, fmt.Errorf("check task: %w", err)
		case !c.inScope(owner):
			return notFound(textJobNotFoundBare)
		case !c.mine(principal):
			// Exactly what a job that does not exist answers.
			return notFound(missing)
		}
	}
	mode := in.Mode
	if mode == "" {
		mode = ModeWait
	}
	var onUpdate func(taskapi.Snapshot)
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		var n float64
		onUpdate = func(s taskapi.Snapshot) {
			n++
			msg := s.Status
			if len(s.Logs) > 0 {
				msg = s.Logs[len(s.Logs)-1].Text
			}
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: n, Message: msg})
		}
	}
	// A shutdown (Drain) ends the wait early; the client is told to ask again.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.s.draining:
			cancel()
		case <-wctx.Done():
		}
	}()
	snap, err := c.s.tasks.Check(wctx, CheckRequest{
		JobID: jobID, SessionKey: sessionKey, Agent: in.Agent, KnownLogCount: max(in.KnownLogCount, 0),
		Mode: mode, Wait: c.s.waits.clamp(in.WaitMs),
	}, onUpdate)
	switch {
	case errors.Is(err, ErrNotFound):
		return notFound(missing)
	case err != nil && ctx.Err() == nil && wctx.Err() != nil:
		return errorResult(textDraining), nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("check task: %w", err)
	case !c.inScope(snap.Agent):
		return notFound(textJobNotFoundBare)
	case !c.mine(snap.Principal):
		return notFound(missing)
	}
	res := textResult(checkText(snap))
	res.IsError = snap.Status == "error"
	return res, snap, nil
}

// ownerOf returns the agent and principal of a job, or of a session's
// latest job.
func (c *conn) ownerOf(ctx context.Context, jobID, sessionKey, agent string) (string, string, error) {
	if jobID != "" {
		d, err := c.s.tasks.GetTask(ctx, jobID, taskapi.DetailCore, 0)
		if err == nil || sessionKey == "" {
			return d.Agent, d.Principal, err
		}
	}
	s, err := c.s.tasks.GetSession(ctx, SessionRequest{SessionID: sessionKey, Agent: agent, Mode: taskapi.ModeSnapshot, Limit: 1})
	if err == nil && !s.Found {
		err = ErrNotFound
	}
	return s.Agent, s.Principal, err
}

// checkText is check_task's model-facing text.
func checkText(s taskapi.Snapshot) string {
	var text string
	switch {
	case s.IsTerminal && s.Status == "error":
		text = s.Error
	case s.IsTerminal:
		text = s.Summary
		if text == "" {
			text = "Task finished with status " + s.Status + "."
		}
	case s.Recovery != nil:
		text = fmt.Sprintf("Recovering late transcript final text. Poll again with knownLogCount=%d.", s.LogCursor)
	default:
		text = fmt.Sprintf("Still running. Poll again with knownLogCount=%d.", s.LogCursor)
	}
	if s.BlockedDelegation != nil && s.BlockedDelegation.Notice != "" {
		text = s.BlockedDelegation.Notice + "\n\n" + text
	}
	return text
}

type taskNotFound struct {
	TaskID string `json:"taskId"`
	Status string `json:"status"`
	Error  string `json:"error"`
}

func (c *conn) getTask(ctx context.Context, _ *mcp.CallToolRequest, in GetTaskInput) (*mcp.CallToolResult, any, error) {
	id := strings.TrimSpace(in.TaskID)
	if id == "" {
		return nil, nil, errors.New("taskId must not be empty: pass the taskId (jobId) that run_task returned")
	}
	notFound := func() (*mcp.CallToolResult, any, error) {
		return errorResult(textTaskNotFound), taskNotFound{TaskID: id, Status: "error", Error: textTaskNotFoundSC}, nil
	}
	detail := taskapi.Detail(in.Detail)
	if detail == "" {
		detail = taskapi.DetailSummary
	}
	lookup := detail
	if detail == taskapi.DetailPrompt {
		lookup = taskapi.DetailCore
	}
	d, err := c.s.tasks.GetTask(ctx, id, lookup, max(in.KnownLogCount, 0))
	switch {
	case errors.Is(err, ErrNotFound):
		return notFound()
	case err != nil:
		return nil, nil, fmt.Errorf("get task: %w", err)
	case !c.inScope(d.Agent) || !c.mine(d.Principal):
		return notFound()
	}
	if detail != taskapi.DetailPrompt {
		return textResult(jsonText(d)), d, nil
	}
	p, err := c.s.tasks.GetPrompt(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return notFound()
	case err != nil:
		return nil, nil, fmt.Errorf("get task prompt: %w", err)
	}
	return textResult(jsonText(p)), p, nil
}

type taskList struct {
	Tasks []taskapi.TaskSummary `json:"tasks"`
}

func (c *conn) listTasks(ctx context.Context, _ *mcp.CallToolRequest, in ListTasksInput) (*mcp.CallToolResult, any, error) {
	view := taskapi.ListView(in.View)
	if view == "" {
		view = taskapi.ViewAll
	}
	rows, err := c.s.tasks.ListTasks(ctx, view, c.only())
	if err != nil {
		return nil, nil, fmt.Errorf("list tasks: %w", err)
	}
	out := taskList{Tasks: make([]taskapi.TaskSummary, 0, len(rows))}
	for _, r := range rows {
		if c.inScope(r.Agent) && c.mine(r.Principal) {
			out.Tasks = append(out.Tasks, r)
		}
	}
	return textResult(jsonText(out)), out, nil
}

type sessionNotFound struct {
	SessionID string `json:"sessionId"`
	Found     bool   `json:"found"`
}

func (c *conn) getSession(ctx context.Context, _ *mcp.CallToolRequest, in GetSessionInput) (*mcp.CallToolResult, any, error) {
	id := strings.TrimSpace(in.SessionID)
	if id == "" {
		return nil, nil, errors.New("sessionId must not be empty: pass a sessionKey from run_task or list_sessions")
	}
	if msg := c.refuseAgent(in.Agent); msg != "" {
		return errorResult(msg), nil, nil
	}
	notFound := func() (*mcp.CallToolResult, any, error) {
		return errorResult(textSessionMissing), sessionNotFound{SessionID: id}, nil
	}
	mode := taskapi.SessionMode(in.Mode)
	if mode == "" {
		mode = taskapi.ModeSnapshot
	}
	limit, after := 50, 0
	if in.Limit != nil {
		limit = int(min(max(*in.Limit, 1), 200))
	}
	if in.After != nil {
		after = int(min(max(*in.After, 0), 1<<31-1))
	}
	r, err := c.s.tasks.GetSession(ctx, SessionRequest{SessionID: id, Agent: in.Agent, Mode: mode, Limit: limit, After: after})
	switch {
	case errors.Is(err, ErrNotFound) || (err == nil && !r.Found):
		return notFound()
	case err != nil:
		return nil, nil, fmt.Errorf("get session: %w", err)
	case !c.inScope(r.Agent) || !c.mine(r.Principal):
		return notFound()
	}
	return textResult(jsonText(r)), r, nil
}

func (c *conn) listSessions(ctx context.Context, _ *mcp.CallToolRequest, _ EmptyInput) (*mcp.CallToolResult, any, error) {
	all, err := c.s.tasks.ListSessions(ctx, c.only())
	if err != nil {
		return nil, nil, fmt.Errorf("list sessions: %w", err)
	}
	out := taskapi.SessionList{Sessions: make([]taskapi.ContinuationState, 0, len(all)), ConfiguredAgents: slices.Clone(c.scope.Allowed)}
	for _, s := range all {
		if c.inScope(s.Agent) && c.mine(s.Principal) {
			out.Sessions = append(out.Sessions, s)
		}
	}
	return textResult(jsonText(out)), out, nil
}

func (c *conn) cancelTask(ctx context.Context, _ *mcp.CallToolRequest, in CancelTaskInput) (*mcp.CallToolResult, any, error) {
	id, sessionKey := strings.TrimSpace(in.TaskID), strings.TrimSpace(in.SessionKey)
	if id == "" && sessionKey == "" {
		return errorResult(textCancelNeedsArg), nil, nil
	}
	notFound := func() (*mcp.CallToolResult, any, error) {
		return errorResult(textCancelMissing), taskapi.CancelResult{}, nil
	}
	var owner, principal string
	if id != "" {
		d, err := c.s.tasks.GetTask(ctx, id, taskapi.DetailCore, 0)
		switch {
		case errors.Is(err, ErrNotFound):
			return notFound()
		case err != nil:
			return nil, nil, fmt.Errorf("cancel task: %w", err)
		}
		owner, principal = d.Agent, d.Principal
	} else {
		s, err := c.s.tasks.GetSession(ctx, SessionRequest{SessionID: sessionKey, Mode: taskapi.ModeSnapshot, Limit: 1})
		switch {
		case errors.Is(err, ErrNotFound) || (err == nil && (!s.Found || s.JobID == "")):
			return notFound()
		case err != nil:
			return nil, nil, fmt.Errorf("cancel task: %w", err)
		}
		id, owner, principal = s.JobID, s.Agent, s.Principal
	}
	if !c.inScope(owner) || !c.mine(principal) {
		return notFound()
	}
	r, err := c.s.tasks.Cancel(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return notFound()
	case err != nil:
		return nil, nil, fmt.Errorf("cancel task: %w", err)
	}
	if !r.Found {
		return notFound()
	}
	if r.AlreadyTerminal {
		if r.Note == "" {
			r.Note = fmt.Sprintf("Task already finished with status %q — nothing to stop.", r.Status)
		}
		return textResult(r.Note), r, nil
	}
	return textResult(textStopRequested), r, nil
}

type agentList struct {
	Default string      `json:"default"`
	Agents  []AgentInfo `json:"agents"`
}

func (c *conn) listAgents(_ context.Context, _ *mcp.CallToolRequest, _ EmptyInput) (*mcp.CallToolResult, any, error) {
	out := agentList{Default: c.scope.Default, Agents: make([]AgentInfo, 0, len(c.scope.Allowed))}
	for _, id := range c.scope.Allowed {
		a, ok := c.s.registry.Lookup(id)
		if !ok {
			continue
		}
		cols := a.Collections
		if cols == nil {
			cols = []string{}
		}
		out.Agents = append(out.Agents, AgentInfo{
			ID: a.ID, Emoji: a.Emoji, Role: a.Role, Description: a.Description, WhenToUse: a.WhenToUse,
			MemorySearchable: a.QMDToken != "", Collections: cols,
		})
	}
	return textResult(jsonText(out)), out, nil
}

func (c *conn) connectionInfo(_ context.Context, req *mcp.CallToolRequest, _ EmptyInput) (*mcp.CallToolResult, any, error) {
	defs := c.tools()
	var out ConnectionInfo
	out.ProtocolVersion = req.ProtocolVersion()
	out.ProtocolEra = "legacy"
	if out.ProtocolVersion >= "2026-07-28" {
		out.ProtocolEra = "modern"
	}
	out.ServerName = c.serverName()
	out.ServerVersion = c.s.version
	out.Build = c.s.build
	out.ToolsetVersion = toolsetVersion(defs)
	for _, d := range defs {
		out.Tools = append(out.Tools, d.tool.Name)
	}
	slices.Sort(out.Tools)
	out.ToolCount = len(out.Tools)
	if c.identity.User != "" {
		u := c.identity.User
		out.Identity.User = &u
	}
	out.Identity.Legacy = c.identity.Legacy
	out.Agents.Allowed = slices.Clone(c.scope.Allowed)
	out.Agents.Default = c.scope.Default
	return textResult(jsonText(out)), out, nil
}

// serverName is what initialize reports for this connection.
func (c *conn) serverName() string {
	name := c.scope.ServerName
	if name == "" {
		name = taskapi.DefaultServerName
	}
	if c.identity.User != "" {
		name += " (" + c.identity.User + ")"
	}
	return name
}
