package server

// The declarations of the task tools: their typed inputs and outputs, the
// schemas inferred from them (with the few hand tweaks the reference
// needs), annotations and descriptions. The handlers are in tools.go.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

// toolDef is one tool declaration plus its typed handler.
type toolDef struct {
	tool    *mcp.Tool
	handler toolHandler
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

// endedAtProp is the endedAt output property of a task row.
func endedAtProp() *jsonschema.Schema {
	return &jsonschema.Schema{Type: "integer",
		Description: "When the task reached its final status (Unix ms); absent while it runs. Its duration is endedAt - startedAt."}
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
			handler: typed[RunTaskInput](c.runTask),
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
			handler: typed[CheckTaskInput](c.checkTask),
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
					p["endedAt"] = endedAtProp()
					return p
				}()),
				Annotations: readOnly("Get a task"),
			},
			handler: typed[GetTaskInput](c.getTask),
		},
		{
			tool: &mcp.Tool{
				Name:        "list_tasks",
				Title:       "List tasks",
				Description: readOnlyPrefix + "List the latest task of every known session, newest activity first, with a short summary preview.",
				InputSchema: inputSchema[ListTasksInput](func(p map[string]*jsonschema.Schema) {
					p["view"].Enum = enumOf(string(taskapi.ViewActive), string(taskapi.ViewAll))
				}),
				OutputSchema: outputSchema([]string{"tasks"}, map[string]*jsonschema.Schema{"tasks": {Type: "array",
					Items: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{"endedAt": endedAtProp()},
						AdditionalProperties: &jsonschema.Schema{}}}}),
				Annotations: readOnly("List tasks"),
			},
			handler: typed[ListTasksInput](c.listTasks),
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
			handler: typed[GetSessionInput](c.getSession),
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
			handler: typed[EmptyInput](c.listSessions),
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
			handler: typed[CancelTaskInput](c.cancelTask),
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
			handler: typed[EmptyInput](c.listAgents),
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
			handler: typed[EmptyInput](c.connectionInfo),
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
