package server

// The handlers of the task tools: argument checks, scope and owner
// isolation, and the model-facing texts. The declarations are in
// tools_schema.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/taskapi"
)

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

// conn is the per-connection context of the tool handlers: who is calling
// and which agents they may use.
type conn struct {
	s        *Server
	scope    taskapi.Scope
	identity taskapi.Identity
	// app: the caller declared the MCP Apps extension at an initialize
	// whose session this request continues (withAppSession).
	app bool
	// direct answers the calls with plain arguments (direct.go); set by
	// bareMCPServer, filled by register.
	direct *directCalls
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

// toolText is a tool result's text.
func toolText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, content := range r.Content {
		if t, ok := content.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
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
