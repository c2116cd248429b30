package server

// The handlers of the terminal tools, over a Terminals service. The
// declarations are in terminal_tools_schema.go.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
