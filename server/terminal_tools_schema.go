package server

// The declarations of the terminal tools: typed inputs and outputs and
// their schemas. The handlers are in terminal_tools.go.

import (
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/termapi"
)

// TerminalSendInput is the input of terminal_send.
type TerminalSendInput struct {
	TerminalID string `json:"terminal_id,omitempty" jsonschema:"Send to the agent now running in this pane (scope terminal_follow_current); an id from terminal_list. Leave out with session_id to hand the request to the one idle pane."`
	SessionID  string `json:"session_id,omitempty" jsonschema:"Send to this managed Session only if its pane, process and thread are unchanged (scope session_exact); from terminal_list or an earlier send."`
	Request    string `json:"request" jsonschema:"The text typed into the agent's composer, as a human would write it: plain text, line breaks and tabs only (no control characters), and not starting with a slash command or '!'."`
	// Agent narrows a delegate (no terminal_id, no session_id), as the
	// CLI's delegate --agent does.
	Agent string `json:"agent,omitempty" jsonschema:"Without terminal_id and session_id: only idle panes of this agent (codex or claude) count. Leave out when you give either."`
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
	Request string `json:"request" jsonschema:"The follow-up text typed into the same Session, under the same rule as terminal_send's request."`
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
	TerminalID string `json:"terminal_id,omitempty" jsonschema:"The pane the request went to, when terminal_send chose it (no terminal_id or session_id given)."`
	NextStep   string `json:"next_step" jsonschema:"What to do next."`
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
			handler: typed[EmptyInput](c.terminalList),
		},
		{
			tool: &mcp.Tool{
				Name:  "terminal_send",
				Title: "Send a request to an agent terminal",
				Description: "Type a request into an idle Codex or Claude Code pane as a new Turn and return once the agent took it (a few seconds). " +
					"Pass terminal_id or session_id from terminal_list's available_actions, or neither to hand it to the one idle pane (with agent: the one idle pane of that agent; " +
					"refused, listing the panes, when there is none or several). Then call terminal_status with the turn_id for the reply.",
				InputSchema: inputSchema[TerminalSendInput](func(p map[string]*jsonschema.Schema) {
					p["agent"].Enum = enumOf(termapi.AgentCodex, termapi.AgentClaude)
				}),
				OutputSchema: outputSchemaOf[TerminalSendOutput](),
				Annotations:  act("Send a request to an agent terminal", false),
			},
			handler: typed[TerminalSendInput](c.terminalSend),
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
			handler: typed[TerminalStatusInput](c.terminalStatus),
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
			handler: typed[TerminalRespondInput](c.terminalRespond),
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
			handler: typed[TerminalApproveInput](c.terminalApprove),
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
			handler: typed[TerminalTurnInput](c.terminalCancel),
		},
	}
}
