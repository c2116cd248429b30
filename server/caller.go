package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/taskapi"
)

// ErrRefused is wrapped by the errors a Caller returns when the tool
// refused the call (a not-found, a bad argument, a scope refusal); the
// error's text is the tool's own message, written for a person.
var ErrRefused = errors.New("refused")

// Caller is one identity's use of the task tools from inside the process
// (the dashboard): the same handlers, validation, scope and owner isolation
// as an MCP connection of that identity over the full agent scope. It is
// safe for concurrent use.
type Caller struct{ c *conn }

// Caller returns the tools as id would call them over /mcp.
func (s *Server) Caller(id taskapi.Identity) *Caller {
	return &Caller{c: &conn{s: s, scope: s.registry.FullScope(), identity: id}}
}

// Authenticate checks a credential as /mcp does (a bearer token); ok is
// false when it is refused, or, in OAuth mode, cannot be checked now. With
// no credential configured every call is accepted anonymously.
func (s *Server) Authenticate(token string) (taskapi.Identity, bool) {
	id, err := s.AuthenticateToken(context.Background(), token)
	return id, err == nil
}

// AuthenticateToken is Authenticate with the reason of a refusal: in OAuth
// mode a *TokenError for a refused token, or an error wrapping
// ErrVerifierUnavailable when the token could not be checked now (a caller
// holding a session may keep it through such an outage). It counts no
// failure against an address, unlike AuthenticateRequest: the token was
// accepted once already.
func (s *Server) AuthenticateToken(ctx context.Context, token string) (taskapi.Identity, error) {
	return s.check(ctx, "", token)
}

// AuthRequired reports whether HTTP callers must present a credential.
func (s *Server) AuthRequired() bool { return s.authRequired() }

// QueryPass is r's ?pass= credential, or "" when the server takes none
// from addresses (Options.NoPassParam).
func (s *Server) QueryPass(r *http.Request) string {
	if s.noPass {
		return ""
	}
	return r.URL.Query().Get("pass")
}

// OAuthMode reports whether access tokens of an authorization server are
// accepted (Options.OAuth).
func (s *Server) OAuthMode() bool { return s.oauth != nil }

// AllowOrigin reports whether a browser request with this Origin header may
// act: absent, the server's own origin, or listed in AllowedOrigins.
func (s *Server) AllowOrigin(r *http.Request) bool {
	return s.origins.allow(r.Header.Get("Origin"), r)
}

// SetPages mounts h at / (every path not served otherwise), in place of
// the plain "OK". Call it before Handler or ListenAndServe.
func (s *Server) SetPages(h http.Handler) { s.pages = h }

// refusal turns a tool's error result into an error wrapping ErrRefused.
func refusal(r *mcp.CallToolResult) error {
	return fmt.Errorf("%w: %s", ErrRefused, toolText(r))
}

// ListTasks is list_tasks: the latest job of each session the caller may
// see, in view ("active" or "all").
func (c *Caller) ListTasks(ctx context.Context, view taskapi.ListView) ([]taskapi.TaskSummary, error) {
	r, out, err := c.c.listTasks(ctx, nil, ListTasksInput{View: string(view)})
	if err != nil {
		return nil, err
	}
	if r.IsError {
		return nil, refusal(r)
	}
	return out.(taskList).Tasks, nil
}

// GetTask is get_task at the given detail (never "prompt"); with updates,
// the log entries after knownLogCount (0: the latest window). A task the
// caller may not see is refused exactly as a missing one.
func (c *Caller) GetTask(ctx context.Context, taskID string, detail taskapi.Detail, knownLogCount int64) (taskapi.TaskDetail, error) {
	if detail == taskapi.DetailPrompt {
		return taskapi.TaskDetail{}, fmt.Errorf("%w: the prompt preset has its own call", ErrRefused)
	}
	r, out, err := c.c.getTask(ctx, nil, GetTaskInput{TaskID: taskID, Detail: string(detail), KnownLogCount: knownLogCount})
	if err != nil {
		return taskapi.TaskDetail{}, err
	}
	if r.IsError {
		return taskapi.TaskDetail{}, refusal(r)
	}
	return out.(taskapi.TaskDetail), nil
}

// GetPrompt is get_task with the "prompt" preset: what the caller asked.
func (c *Caller) GetPrompt(ctx context.Context, taskID string) (taskapi.PromptResult, error) {
	r, out, err := c.c.getTask(ctx, nil, GetTaskInput{TaskID: taskID, Detail: string(taskapi.DetailPrompt)})
	if err != nil {
		return taskapi.PromptResult{}, err
	}
	if r.IsError {
		return taskapi.PromptResult{}, refusal(r)
	}
	return out.(taskapi.PromptResult), nil
}

// ListSessions is list_sessions: the sessions the caller may see.
func (c *Caller) ListSessions(ctx context.Context) ([]taskapi.ContinuationState, error) {
	r, out, err := c.c.listSessions(ctx, nil, EmptyInput{})
	if err != nil {
		return nil, err
	}
	if r.IsError {
		return nil, refusal(r)
	}
	return out.(taskapi.SessionList).Sessions, nil
}

// CancelTask is cancel_task by task id; note is the tool's own answer
// ("stop requested", or why nothing was stopped).
func (c *Caller) CancelTask(ctx context.Context, taskID string) (res taskapi.CancelResult, note string, err error) {
	r, out, err := c.c.cancelTask(ctx, nil, CancelTaskInput{TaskID: taskID})
	if err != nil {
		return taskapi.CancelResult{}, "", err
	}
	if r.IsError {
		return taskapi.CancelResult{}, "", refusal(r)
	}
	return out.(taskapi.CancelResult), toolText(r), nil
}

// GatewayStates returns agent id → connection state when the task service
// reports it ("connected", "reconnecting", "unavailable", or
// "not_connected_yet" for a gateway not dialled yet), else nil.
func (s *Server) GatewayStates() map[string]string {
	if g, ok := s.tasks.(GatewayStater); ok {
		return g.GatewayStates()
	}
	return nil
}

// Registry returns the agent configuration the tools serve.
func (s *Server) Registry() *taskapi.Registry { return s.registry }

// SeesAll reports whether the caller sees every principal's work: a caller
// with no credential (an open loopback server) or any caller under the
// team view (SharedTaskView). Work that records no owner, such as terminal
// panes, is shown only to such a caller.
func (c *Caller) SeesAll() bool { return c.c.seesAll() }

// Mine reports whether work recorded for principal (a task, a terminal
// Turn) may be shown to and controlled by the caller: its own, or any when
// it sees all.
func (c *Caller) Mine(principal string) bool { return c.c.mine(principal) }
