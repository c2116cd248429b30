package server

// The handlers of the terminal tools, over a Terminals service. The
// declarations are in terminal_tools_schema.go.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
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
	// WaitFor blocks until done reports true for the Turn or ctx ends; a
	// listen follows a Turn task through every change with it.
	WaitFor(ctx context.Context, turnID string, done func(termapi.TurnView) bool) (termapi.TurnView, error)
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

// A Turn belongs to the MCP caller that sent it (termapi.SendRequest's
// Principal); a respond continues the same Turn, so it stays theirs. With
// personal tokens a caller that does not see all reads and steers only its
// own Turns: another's Turn answers exactly as one that does not exist, and
// no other caller's turn id appears in what the tools return. Panes and
// Sessions have no owner: every allowed caller lists them and may send to
// one that is free.

// turnIDPattern finds turn ids in the service's messages. Compiled at first
// use, not at every start of the binary.
var turnIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\bturn-[A-Za-z0-9][A-Za-z0-9-]*`) })

// otherTurn is what a Turn of another caller reads as.
const otherTurn = "another caller's turn"

// turnNotFound is the answer to a Turn the caller may not see, worded as
// the answer to one that does not exist.
func turnNotFound(op, turnID string) *mcp.CallToolResult {
	return terminalError(op, fmt.Errorf("%w: no turn %s; use a turn_id that your own terminal_send or terminal_respond returned", termapi.ErrNotFound, turnID))
}

// ownTurn reports whether the connection may read and steer the Turn v.
func (c *conn) ownTurn(v termapi.TurnView) bool { return c.mine(v.Principal) }

// checkTurn returns the answer to a call on turnID the connection may not
// make (another caller's Turn, or one that does not exist), or nil. A
// caller that sees all is not checked here: the service answers it.
func (c *conn) checkTurn(ctx context.Context, op, turnID string) *mcp.CallToolResult {
	if c.seesAll() {
		return nil
	}
	v, err := c.s.terminals.Status(ctx, turnID)
	switch {
	case errors.Is(err, termapi.ErrNotFound) || (err == nil && !c.ownTurn(v)):
		return turnNotFound(op, turnID)
	case err != nil:
		return c.terminalError(ctx, op, err)
	}
	return nil
}

// hideTurns removes from s the turn ids the connection may not see
// (checked once each through seen), so a refusal or a busy pane's reason
// never hands one caller another's turn id.
func (c *conn) hideTurns(ctx context.Context, s string, seen map[string]bool) string {
	if c.seesAll() || !strings.Contains(s, "turn-") {
		return s
	}
	const mark = "\x00"
	s = turnIDPattern().ReplaceAllStringFunc(s, func(id string) string {
		if !c.foreignTurn(ctx, id, seen) {
			return id
		}
		return mark
	})
	// "turn <id> is running" reads "another caller's turn is running".
	s = strings.ReplaceAll(s, "turn "+mark, otherTurn)
	return strings.ReplaceAll(s, mark, otherTurn)
}

// foreignTurn reports whether turnID is not the connection's, remembering
// the answer in seen. A Turn that cannot be read counts as another's.
func (c *conn) foreignTurn(ctx context.Context, turnID string, seen map[string]bool) bool {
	if c.seesAll() {
		return false
	}
	foreign, ok := seen[turnID]
	if !ok {
		v, err := c.s.terminals.Status(ctx, turnID)
		foreign = err != nil || !c.ownTurn(v)
		seen[turnID] = foreign
	}
	return foreign
}

// terminalError is terminalError with other callers' turn ids hidden.
func (c *conn) terminalError(ctx context.Context, op string, err error) *mcp.CallToolResult {
	r := terminalError(op, err)
	if c.seesAll() {
		return r
	}
	for _, content := range r.Content {
		if t, ok := content.(*mcp.TextContent); ok {
			t.Text = c.hideTurns(ctx, t.Text, map[string]bool{})
		}
	}
	return r
}

func (c *conn) terminalList(ctx context.Context, _ *mcp.CallToolRequest, _ EmptyInput) (*mcp.CallToolResult, any, error) {
	res, err := c.s.terminals.List(ctx)
	if err != nil {
		return c.terminalError(ctx, "terminal_list", err), nil, nil
	}
	out := TerminalListOutput{Terminals: res.Terminals}
	if out.Terminals == nil {
		out.Terminals = []termapi.TerminalRow{}
	}
	seen := map[string]bool{}
	for i := range out.Terminals {
		r := &out.Terminals[i]
		if r.AvailableActions == nil {
			r.AvailableActions = []termapi.Action{}
		}
		// Another caller's Turn shows only that the pane is busy.
		if r.CurrentTurn != nil && c.foreignTurn(ctx, r.CurrentTurn.TurnID, seen) {
			r.CurrentTurn = &termapi.TurnRef{Status: r.CurrentTurn.Status, Shown: r.CurrentTurn.Shown}
		}
		r.Reason = c.hideTurns(ctx, r.Reason, seen)
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
		switch {
		case r.CurrentTurn == nil:
		case r.CurrentTurn.TurnID == "":
			fmt.Fprintf(&b, ", %s %s", otherTurn, r.CurrentTurn.Status)
		default:
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
	if in.TerminalID != "" && in.SessionID != "" {
		return errorResult("Pass at most one of terminal_id and session_id, as terminal_list's available_actions show (neither: the one idle pane)."), nil, nil
	}
	if in.Agent != "" && (in.TerminalID != "" || in.SessionID != "") {
		return errorResult("agent picks among the idle panes: leave it out when you pass terminal_id or session_id, or leave those out to hand the request to the one idle " + in.Agent + " pane."), nil, nil
	}
	req := termapi.SendRequest{TerminalID: in.TerminalID, SessionID: in.SessionID, Request: in.Request, Principal: c.principal()}
	var (
		res termapi.SendResult
		err error
	)
	if in.TerminalID == "" && in.SessionID == "" {
		// A delegate: the one idle pane, or a refusal listing them.
		var row termapi.TerminalRow
		res, row, err = termapi.Delegate(ctx, c.s.terminals, in.Agent, req)
		req.TerminalID = row.ID
	} else {
		res, err = c.s.terminals.Send(ctx, req)
	}
	if err != nil && res.TurnID == "" {
		return c.terminalError(ctx, "terminal_send", err), nil, nil
	}
	out := sendOutput(res)
	if in.TerminalID == "" && in.SessionID == "" {
		out.TerminalID = req.TerminalID
	}
	r := textResult(jsonText(out))
	r.IsError = err != nil
	return r, out, nil
}

func (c *conn) terminalRespond(ctx context.Context, _ *mcp.CallToolRequest, in TerminalRespondInput) (*mcp.CallToolResult, any, error) {
	if r := c.checkTurn(ctx, "terminal_respond", in.TurnID); r != nil {
		return r, nil, nil
	}
	res, err := c.s.terminals.Respond(ctx, in.TurnID, in.Request)
	if err != nil && res.TurnID == "" {
		return c.terminalError(ctx, "terminal_respond", err), nil, nil
	}
	out := sendOutput(res)
	r := textResult(jsonText(out))
	r.IsError = err != nil
	return r, out, nil
}

// turnOutput says what a model can do with the Turn v: a word on its
// state, then only the operations the Turn accepts (v.NextSteps, the
// service's one table).
func turnOutput(v termapi.TurnView) TerminalTurnOutput {
	out := TerminalTurnOutput{Turn: v, Running: termapi.Running(v.Status)}
	switch v.Status {
	case termapi.TurnIdle:
		out.NextStep = "The agent finished; its reply is turn.result.text."
	case termapi.TurnWaitingForOpenClaw:
		cmd := ""
		if v.Approval != nil && v.Approval.Command != "" {
			cmd = " to run " + v.Approval.Command
		}
		// OpenClaw is named only when the Turn reports to an OpenClaw
		// session; an MCP caller's Turn waits for that caller.
		out.NextStep = "The agent waits for your answer" + cmd + "."
		if v.OriginSession != "" {
			out.NextStep = "The agent waits for OpenClaw session " + v.OriginSession + cmd + "."
		}
		if v.Approval != nil {
			out.NextStep = "The agent asks for approval" + cmd + "."
		}
	case termapi.TurnStalled:
		out.NextStep = "The Turn stalled (" + v.StalledReason + "); look at the pane."
	case termapi.TurnFailed:
		out.NextStep = "The Turn failed; see turn.result and turn.detector_diagnostic."
	case termapi.TurnCancelled, termapi.TurnClosed:
		out.NextStep = "The Turn is over."
	default:
		out.NextStep = "The agent is working. Call terminal_status again with the same turn_id."
	}
	var steps []string
	for _, s := range v.NextSteps {
		if t, ok := stepText[s]; ok {
			steps = append(steps, t)
		}
	}
	if len(steps) > 0 {
		out.NextStep += " Next: " + strings.Join(steps, "; ") + "."
	}
	return out
}

// stepText words each operation of TurnView.NextSteps for a model using
// the MCP tools; renew and close are CLI commands only.
var stepText = map[string]string{
	"approve":            "terminal_approve with turn_id and approval.fingerprint",
	"respond":            "terminal_respond with turn_id and the answer",
	"answer_in_terminal": "a human answers the prompt in the terminal (it cannot be answered safely from here)",
	"send":               "terminal_send with session_id for a follow-up in the same context",
	"renew":              "`clawconnect terminal renew TURN_ID` resumes following it",
	"cancel":             "terminal_cancel",
	"close":              "`clawconnect terminal close TURN_ID`",
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
	switch {
	case !c.seesAll() && (errors.Is(err, termapi.ErrNotFound) || (err == nil && !c.ownTurn(v))):
		return turnNotFound("terminal_status", in.TurnID), nil, nil
	case err != nil:
		return c.terminalError(ctx, "terminal_status", err), nil, nil
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
				Message: "turn " + v.TurnID + " is " + string(v.Status)})
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
	if r := c.checkTurn(ctx, "terminal_approve", in.TurnID); r != nil {
		return r, nil, nil
	}
	v, err := c.s.terminals.Approve(ctx, in.TurnID, in.Fingerprint)
	if err != nil {
		return c.terminalError(ctx, "terminal_approve", err), nil, nil
	}
	return turnResult(v)
}

func (c *conn) terminalCancel(ctx context.Context, _ *mcp.CallToolRequest, in TerminalTurnInput) (*mcp.CallToolResult, any, error) {
	if r := c.checkTurn(ctx, "terminal_cancel", in.TurnID); r != nil {
		return r, nil, nil
	}
	v, err := c.s.terminals.Cancel(ctx, in.TurnID)
	if err != nil {
		return c.terminalError(ctx, "terminal_cancel", err), nil, nil
	}
	return turnResult(v)
}
