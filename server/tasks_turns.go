package server

// Terminal Turns as MCP Tasks: with the terminal tools on, a terminal_send
// from a client that declares the extension answers with a task handle
// whose id is the turn id. An approval the agent asks for is
// input_required with an elicitation; tasks/update with its answer
// approves (accept) or refuses (decline, cancel) exactly as
// terminal_approve and terminal_cancel do. A prompt that cannot be
// answered safely from here is input_required too, but only its decline
// acts (it cancels the Turn); a person answers it in the terminal. A stalled
// Turn takes no reply (the Turn service refuses one), so its task completes
// with isError and the next steps terminal_status names.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/termapi"
)

// isTurnTask reports whether a task id names a terminal Turn (a job id is
// a UUID, a turn id starts "turn-").
func (c *conn) isTurnTask(id string) bool {
	return c.s.terminals != nil && strings.HasPrefix(id, "turn-")
}

// ownedTurn returns the caller's Turn, or the not-found error for an
// unknown id and for another caller's Turn alike.
func (c *conn) ownedTurn(ctx context.Context, id string) (termapi.TurnView, error) {
	v, err := c.s.terminals.Status(ctx, id)
	switch {
	case errors.Is(err, termapi.ErrNotFound) || errors.Is(err, termapi.ErrBadInput):
		return v, errTaskNotFound(id)
	case err != nil:
		return v, fmt.Errorf("turn status: %w", err)
	case !c.mine(v.Principal):
		return termapi.TurnView{}, errTaskNotFound(id)
	}
	return v, nil
}

// createdTurnTask is the CreateTaskResult of an accepted terminal_send.
func (c *conn) createdTurnTask(ctx context.Context, tr *mcp.CallToolResult) (*taskResult, error) {
	var sent termapi.SendResult
	data, err := json.Marshal(tr.StructuredContent)
	if err == nil {
		err = json.Unmarshal(data, &sent)
	}
	if err != nil || sent.TurnID == "" {
		return nil, fmt.Errorf("terminal send: the sent Turn has no id (%v)", err)
	}
	v, err := c.ownedTurn(ctx, sent.TurnID)
	if err != nil {
		return nil, fmt.Errorf("terminal send: read back turn %s: %w", sent.TurnID, err)
	}
	t := c.turnTask(v)
	t.ResultType = "task"
	return t, nil
}

// Input request keys: unique over a Turn's life, because each names the
// prompt it answers (an approval's fingerprint and when it appeared).
func approvalKey(a *termapi.Approval) string {
	return fmt.Sprintf("approval-%s-%d", a.Fingerprint, a.DetectedAt)
}

// turnTask maps a Turn to the extension's Task: running statuses are
// working; an approval prompt is input_required; an idle, failed, stalled
// or closed Turn is completed with what terminal_status returns (a stalled
// or failed one with isError); a cancelled one is cancelled.
func (c *conn) turnTask(v termapi.TurnView) *taskResult {
	t := &taskResult{
		ResultType: "complete", TaskID: v.TurnID, CreatedAt: isoRFC(v.CreatedAt), LastUpdatedAt: isoRFC(v.UpdatedAt),
		PollIntervalMs: TaskPollInterval.Milliseconds(),
	}
	out := turnOutput(v)
	t.StatusMessage = out.NextStep
	switch {
	case termapi.Running(v.Status):
		t.Status = taskWorking
	case v.Status == termapi.TurnWaitingForOpenClaw && v.Approval != nil:
		t.Status = "input_required"
		msg := "The agent asks for approval"
		if v.Approval.Command != "" {
			msg += " to run: " + v.Approval.Command
		}
		msg += ". Accept approves it; decline refuses it and stops the Turn."
		if !slices.Contains(v.NextSteps, "approve") {
			msg = "The agent shows a prompt that cannot be answered safely from here: a person answers it in the terminal. Decline cancels the Turn (the prompt stays in the terminal); accept leaves it waiting."
		}
		t.InputRequests = map[string]any{approvalKey(v.Approval): elicitation(msg,
			map[string]any{"type": "object", "properties": map[string]any{}})}
	case v.Status == termapi.TurnCancelled:
		t.Status = taskCancelled
	default:
		res, _, _ := turnResult(v)
		t.Status = taskCompleted
		t.Result = &completeResult{ResultType: "complete", Content: res.Content, StructuredContent: out,
			IsError: res.IsError || v.Status == termapi.TurnStalled}
	}
	return t
}

func elicitation(message string, schema map[string]any) map[string]any {
	return map[string]any{"method": "elicitation/create", "params": map[string]any{"mode": "form", "message": message, "requestedSchema": schema}}
}

// isoRFC normalises the Turn service's RFC 3339 times to the extension's
// millisecond form; an unreadable one is passed on as it is.
func isoRFC(s string) string {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return isoMillis(t.UnixMilli())
}

// turnUpdate answers tasks/update for a Turn: a response to the prompt the
// Turn shows now acts on it; any other key is ignored, as the extension
// asks (it was answered already, or never issued).
func (c *conn) turnUpdate(ctx context.Context, id string, responses map[string]json.RawMessage) error {
	v, err := c.ownedTurn(ctx, id)
	if err != nil {
		return err
	}
	key := ""
	if v.Status == termapi.TurnWaitingForOpenClaw && v.Approval != nil {
		key = approvalKey(v.Approval)
	}
	raw := responses[key]
	if raw == nil {
		return nil
	}
	var answer struct {
		Action string `json:"action"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "inputResponses: " + err.Error()}
	}
	switch {
	case answer.Action != "accept":
		_, err = c.s.terminals.Cancel(ctx, id)
	case slices.Contains(v.NextSteps, "approve"):
		_, err = c.s.terminals.Approve(ctx, id, v.Approval.Fingerprint)
	}
	if err != nil {
		// What the terminal tool would have said, for a model or a person.
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: toolText(c.terminalError(ctx, "tasks/update", err))}
	}
	return nil
}
