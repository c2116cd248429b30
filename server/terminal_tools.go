package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/termapi"
)

// Terminals is what the terminal tools need from a Turn service (the
// clawconnect commands pass their in-process one, or a client of the
// monitor host that owns the store). It speaks termapi's types only, so a
// host may bring its own. Implementations must be safe for concurrent use.
type Terminals interface {
	List(ctx context.Context) (termapi.ListResult, error)
	Send(ctx context.Context, r termapi.SendRequest) (termapi.SendResult, error)
	// Wait blocks until the Turn leaves the running statuses or ctx ends.
	Wait(ctx context.Context, turnID string) (termapi.TurnView, error)
	Status(ctx context.Context, turnID string) (termapi.TurnView, error)
	Respond(ctx context.Context, turnID, text string) (termapi.SendResult, error)
	Approve(ctx context.Context, turnID, fingerprint string) (termapi.TurnView, error)
	Cancel(ctx context.Context, turnID string) (termapi.TurnView, error)
}

// terminalProgressEvery is how often a waiting terminal_status reports
// progress while the Turn's status does not change.
const terminalProgressEvery = 5 * time.Second

// TerminalSendInput is the input of terminal_send.
type TerminalSendInput struct {
	TerminalID string `json:"terminal_id,omitempty" jsonschema:"Send to the agent now running in this pane (scope terminal_follow_current); an id from terminal_list."`
	SessionID  string `json:"session_id,omitempty" jsonschema:"Send to this managed Session only if its pane, process and thread are unchanged (scope session_exact); from terminal_list or an earlier send."`
	Request    string `json:"request" jsonschema:"The text typed into the agent's composer, as a human would write it. Must not start with a slash command."`
}

// TerminalTurnInput names a Turn.
type TerminalTurnInput struct {
	TurnID string `json:"turn_id" jsonschema:"The turn_id returned by terminal_send or terminal_respond."`
}

// TerminalStatusInput is the input of terminal_status.
type TerminalStatusInput struct {
	TurnID string   `json:"turn_id" jsonschema:"The turn_id returned by terminal_send or terminal_respond."`
	WaitMs *float64 `json:"wait_ms,omitempty" jsonschema:"While the agent works, wait up to this many milliseconds for the Turn to end; default 45000, at most 120000; 0 returns at once."`
}

// TerminalRespondInput is the input of terminal_respond.
type TerminalRespondInput struct {
	TurnID  string `json:"turn_id" jsonschema:"The Turn that is idle, waiting or stalled, whose Session gets the follow-up."`
	Request string `json:"request" jsonschema:"The follow-up text typed into the same Session."`
}

// TerminalApproveInput is the input of terminal_approve.
type TerminalApproveInput struct {
	TurnID      string `json:"turn_id" jsonschema:"The Turn whose status is waiting_for_openclaw."`
	Fingerprint string `json:"fingerprint" jsonschema:"approval.fingerprint from terminal_status: approves exactly the prompt you saw."`
}

// TerminalListOutput is terminal_list's result.
type TerminalListOutput struct {
	Terminals []termapi.TerminalRow `json:"terminals" jsonschema:"One row per live Codex or Claude Code pane; available_actions are the sends allowed now."`
}

// TerminalSendOutput is the result of terminal_send and terminal_respond.
type TerminalSendOutput struct {
	termapi.SendResult
	NextStep string `json:"next_step" jsonschema:"What to do next."`
}

// TerminalTurnOutput is the result of terminal_status, terminal_approve and
// terminal_cancel.
type TerminalTurnOutput struct {
	Turn termapi.TurnView `json:"turn"`
	// Running is true while the agent still works on the Turn.
	Running  bool   `json:"running" jsonschema:"True while the agent still works on the Turn; call terminal_status again."`
	NextStep string `json:"next_step" jsonschema:"What to do next."`
}

// outputSchemaOf infers T's schema, as AddTool would for a typed output.
func outputSchemaOf[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("server: output schema %T: %v", *new(T), err))
	}
	return s
}

// terminalTools declares the terminal tools; nil when they are off.
func (c *conn) terminalTools() []toolDef {
	if c.s.terminals == nil {
		return nil
	}
	act := func(title string, destructive bool) *mcp.ToolAnnotations {
		return &mcp.ToolAnnotations{Title: title, DestructiveHint: boolPtr(destructive), OpenWorldHint: boolPtr(true)}
	}
	return []toolDef{
		{
			tool: &mcp.Tool{
				Name:  "terminal_list",
				Title: "List agent terminals",
				Description: readOnlyPrefix + "List the Codex and Claude Code TUIs running in tmux panes on this machine: " +
					"what each is doing, its managed Session and latest Turn, and the sends allowed now (available_actions, with their arguments).",
				InputSchema:  inputSchema[EmptyInput](nil),
				OutputSchema: outputSchemaOf[TerminalListOutput](),
				Annotations:  readOnly("List agent terminals"),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.terminalList) },
		},
		{
			tool: &mcp.Tool{
				Name:  "terminal_send",
				Title: "Send a request to an agent terminal",
				Description: "Type a request into an idle Codex or Claude Code pane as a new Turn and return once the agent took it (a few seconds). " +
					"Pass terminal_id or session_id from terminal_list's available_actions. Then call terminal_status with the turn_id for the reply.",
				InputSchema:  inputSchema[TerminalSendInput](nil),
				OutputSchema: outputSchemaOf[TerminalSendOutput](),
				Annotations:  act("Send a request to an agent terminal", false),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.terminalSend) },
		},
		{
			tool: &mcp.Tool{
				Name:  "terminal_status",
				Title: "Check a terminal Turn",
				Description: readOnlyPrefix + "Report a Turn: its status, and the agent's reply once it is done. While the agent works it waits " +
					"(wait_ms) and returns as soon as the Turn ends or needs you; if running is still true, call it again.",
				InputSchema: inputSchema[TerminalStatusInput](func(p map[string]*jsonschema.Schema) {
					singleType(p["wait_ms"], "number")
				}),
				OutputSchema: outputSchemaOf[TerminalTurnOutput](),
				Annotations:  readOnly("Check a terminal Turn"),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.terminalStatus) },
		},
		{
			tool: &mcp.Tool{
				Name:  "terminal_respond",
				Title: "Answer in the same terminal Session",
				Description: "Send a follow-up request to the Session of a Turn that has ended (idle, waiting or stalled), as a new Turn; " +
					"refused if a human typed in the pane since. Then call terminal_status with the new turn_id.",
				InputSchema:  inputSchema[TerminalRespondInput](nil),
				OutputSchema: outputSchemaOf[TerminalSendOutput](),
				Annotations:  act("Answer in the same terminal Session", false),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.terminalRespond) },
		},
		{
			tool: &mcp.Tool{
				Name:  "terminal_approve",
				Title: "Approve an agent's prompt",
				Description: "Approve once the approval prompt a Turn waits on (status waiting_for_openclaw), only if it is still the prompt " +
					"whose fingerprint you pass. Read approval.command first; call terminal_cancel instead to refuse.",
				InputSchema:  inputSchema[TerminalApproveInput](nil),
				OutputSchema: outputSchemaOf[TerminalTurnOutput](),
				Annotations:  act("Approve an agent's prompt", true),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.terminalApprove) },
		},
		{
			tool: &mcp.Tool{
				Name:         "terminal_cancel",
				Title:        "Interrupt a terminal Turn",
				Description:  "Interrupt the agent working on a Turn (the key a human would press) and mark the Turn cancelled.",
				InputSchema:  inputSchema[TerminalTurnInput](nil),
				OutputSchema: outputSchemaOf[TerminalTurnOutput](),
				Annotations:  act("Interrupt a terminal Turn", true),
			},
			add: func(s *mcp.Server, t *mcp.Tool) { mcp.AddTool(s, t, c.terminalCancel) },
		},
	}
}

// terminalError turns a Turn service error into a result a model can act
// on. Every error is the caller's to handle, so none is a protocol error.
func terminalError(op string, err error) *mcp.CallToolResult {
	msg := err.Error()
	switch {
	case errors.Is(err, termapi.ErrBadInput):
		msg += ". Fix the arguments and call " + op + " again."
	case errors.Is(err, termapi.ErrNotFound):
		msg += ". Call terminal_list for the current terminals and Sessions."
	case errors.Is(err, termapi.ErrRefused):
		msg += ". Nothing was typed; call terminal_list to see what the pane allows now."
	case errors.Is(err, termapi.ErrInputNotSent):
		msg += ". Nothing reached the pane; you may try again."
	case errors.Is(err, termapi.ErrOutcomeUncertain):
		msg += ". The text may have reached the pane: do NOT send it again; ask a human to check the pane."
	default:
		msg = op + " failed: " + msg
	}
	return errorResult(msg)
}

func (c *conn) terminalList(ctx context.Context, _ *mcp.CallToolRequest, _ EmptyInput) (*mcp.CallToolResult, any, error) {
	res, err := c.s.terminals.List(ctx)
	if err != nil {
		return terminalError("terminal_list", err), nil, nil
	}
	out := TerminalListOutput{Terminals: res.Terminals}
	if out.Terminals == nil {
		out.Terminals = []termapi.TerminalRow{}
	}
	for i := range out.Terminals {
		if out.Terminals[i].AvailableActions == nil {
			out.Terminals[i].AvailableActions = []termapi.Action{}
		}
	}
	var b strings.Builder
	if len(out.Terminals) == 0 {
		b.WriteString("No Codex or Claude Code pane found in tmux.")
	}
	for _, r := range out.Terminals {
		fmt.Fprintf(&b, "%s: %s, %s, %s", r.ID, r.Agent, r.ActivityState, r.ManagementState)
		if r.SessionID != "" {
			fmt.Fprintf(&b, ", session %s", r.SessionID)
		}
		if r.CurrentTurn != nil {
			fmt.Fprintf(&b, ", turn %s %s", r.CurrentTurn.TurnID, r.CurrentTurn.Status)
		}
		if len(r.AvailableActions) == 0 {
			fmt.Fprintf(&b, "; no send now: %s", r.Reason)
		}
		b.WriteByte('\n')
	}
	return textResult(strings.TrimSpace(b.String()) + "\n\nStructured: " + jsonText(out)), out, nil
}

func sendOutput(res termapi.SendResult) TerminalSendOutput {
	out := TerminalSendOutput{SendResult: res}
	switch res.SubmissionOutcome {
	case termapi.OutcomeAccepted, termapi.OutcomePendingAcceptance:
		out.NextStep = "Call terminal_status with turn_id " + res.TurnID + " to wait for the reply."
	default:
		out.NextStep = "Call terminal_status with turn_id " + res.TurnID + " to see why the request was not taken."
	}
	if res.DoNotRetry {
		out.NextStep += " The text may have reached the pane: do not send it again."
	}
	return out
}

func (c *conn) terminalSend(ctx context.Context, _ *mcp.CallToolRequest, in TerminalSendInput) (*mcp.CallToolResult, any, error) {
	if (in.TerminalID == "") == (in.SessionID == "") {
		return errorResult("Pass exactly one of terminal_id and session_id, as terminal_list's available_actions show."), nil, nil
	}
	res, err := c.s.terminals.Send(ctx, termapi.SendRequest{TerminalID: in.TerminalID, SessionID: in.SessionID, Request: in.Request})
	if err != nil && res.TurnID == "" {
		return terminalError("terminal_send", err), nil, nil
	}
	out := sendOutput(res)
	r := textResult(jsonText(out))
	r.IsError = err != nil
	return r, out, nil
}

func (c *conn) terminalRespond(ctx context.Context, _ *mcp.CallToolRequest, in TerminalRespondInput) (*mcp.CallToolResult, any, error) {
	res, err := c.s.terminals.Respond(ctx, in.TurnID, in.Request)
	if err != nil && res.TurnID == "" {
		return terminalError("terminal_respond", err), nil, nil
	}
	out := sendOutput(res)
	r := textResult(jsonText(out))
	r.IsError = err != nil
	return r, out, nil
}

// turnOutput says what a model can do with the Turn v.
func turnOutput(v termapi.TurnView) TerminalTurnOutput {
	out := TerminalTurnOutput{Turn: v, Running: termapi.Running(v.Status)}
	switch v.Status {
	case termapi.TurnIdle:
		out.NextStep = "The agent finished; its reply is turn.result.text. Call terminal_respond to continue the same Session."
	case termapi.TurnWaitingForOpenClaw:
		cmd := ""
		if v.Approval != nil && v.Approval.Command != "" {
			cmd = " to run " + v.Approval.Command
		}
		out.NextStep = "The agent asks for approval" + cmd + ": call terminal_approve with turn_id and approval.fingerprint, or terminal_cancel to refuse."
	case termapi.TurnStalled:
		out.NextStep = "The Turn stalled (" + v.StalledReason + "). Look at the pane, then terminal_respond or terminal_cancel."
	case termapi.TurnFailed:
		out.NextStep = "The Turn failed; see turn.result and turn.detector_diagnostic. Call terminal_list before sending again."
	case termapi.TurnCancelled, termapi.TurnClosed:
		out.NextStep = "The Turn is over. Call terminal_list before sending again."
	default:
		out.NextStep = "The agent is working. Call terminal_status again with the same turn_id."
	}
	return out
}

func turnResult(v termapi.TurnView) (*mcp.CallToolResult, any, error) {
	out := turnOutput(v)
	var b strings.Builder
	fmt.Fprintf(&b, "Turn %s is %s.", v.TurnID, v.Status)
	if v.Result != nil && v.Result.Text != "" {
		fmt.Fprintf(&b, " Reply:\n%s\n", v.Result.Text)
	}
	b.WriteString(" " + out.NextStep)
	r := textResult(b.String())
	r.IsError = v.Status == termapi.TurnFailed
	return r, out, nil
}

func (c *conn) terminalStatus(ctx context.Context, req *mcp.CallToolRequest, in TerminalStatusInput) (*mcp.CallToolResult, any, error) {
	t := c.s.terminals
	v, err := t.Status(ctx, in.TurnID)
	if err != nil {
		return terminalError("terminal_status", err), nil, nil
	}
	wait := time.Duration(0)
	if in.WaitMs == nil || *in.WaitMs > 0 {
		wait = c.s.waits.clamp(in.WaitMs)
	}
	if !termapi.Running(v.Status) || wait == 0 {
		return turnResult(v)
	}
	var progress func(v termapi.TurnView)
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		var n float64
		progress = func(v termapi.TurnView) {
			n++
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: n,
				Message: "turn " + v.TurnID + " is " + v.Status})
		}
		progress(v)
	}
	// A shutdown (Drain) ends the wait early, as for check_task.
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	go func() {
		select {
		case <-c.s.draining:
			cancel()
		case <-wctx.Done():
		}
	}()
	for {
		slice, cancelSlice := context.WithTimeout(wctx, terminalProgressEvery)
		w, err := t.Wait(slice, in.TurnID)
		cancelSlice()
		if err == nil {
			return turnResult(w)
		}
		if wctx.Err() != nil || slice.Err() == nil {
			// The whole wait ended, or Wait failed for a reason of its own:
			// report the Turn as it is now.
			if ctx.Err() != nil {
				return nil, nil, fmt.Errorf("terminal status: %w", ctx.Err())
			}
			if now, serr := t.Status(ctx, in.TurnID); serr == nil {
				return turnResult(now)
			}
			return turnResult(v)
		}
		if progress != nil {
			if now, serr := t.Status(ctx, in.TurnID); serr == nil {
				v = now
			}
			progress(v)
		}
	}
}

func (c *conn) terminalApprove(ctx context.Context, _ *mcp.CallToolRequest, in TerminalApproveInput) (*mcp.CallToolResult, any, error) {
	v, err := c.s.terminals.Approve(ctx, in.TurnID, in.Fingerprint)
	if err != nil {
		return terminalError("terminal_approve", err), nil, nil
	}
	return turnResult(v)
}

func (c *conn) terminalCancel(ctx context.Context, _ *mcp.CallToolRequest, in TerminalTurnInput) (*mcp.CallToolResult, any, error) {
	v, err := c.s.terminals.Cancel(ctx, in.TurnID)
	if err != nil {
		return terminalError("terminal_cancel", err), nil, nil
	}
	return turnResult(v)
}
