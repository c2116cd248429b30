package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/internal/jsonscan"
)

// decoder maps `codex exec --json` lines. One decoder serves one run.
//
// Unlike the reference driver it surfaces command executions, file changes,
// MCP tool calls and web searches as tool calls with results (one call per
// item id, however many started/updated/completed lines carry it), and maps
// turn.failed to an error terminal.
type decoder struct {
	lastText string
	model    string
	called   map[string]bool // item ids whose tool-call was emitted
}

func newDecoder(model string) *decoder { return &decoder{model: model, called: map[string]bool{}} }

func str(v []byte) string {
	s, _ := jsonscan.String(v)
	return s
}

// Decode implements oneshot.Decoder.
func (d *decoder) Decode(raw []byte, emit func(executor.Payload)) string {
	var typ, threadID, itemRaw, usageRaw, errRaw, message []byte
	if jsonscan.Object(raw, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			typ = v
		case "thread_id":
			threadID = v
		case "item":
			itemRaw = v
		case "usage":
			usageRaw = v
		case "error":
			errRaw = v
		case "message":
			message = v
		}
		return true
	}) != nil {
		emit(executor.Error{Code: "bad_line", Message: "codex: unparseable stdout line: " + preview(raw), Fatal: false})
		return ""
	}
	switch t := str(typ); t {
	case "thread.started":
		emit(executor.Status{Phase: executor.PhaseInit, Model: d.model})
		return str(threadID)
	case "turn.started":
		emit(executor.Status{Phase: executor.PhaseRunning})
	case "item.started", "item.updated", "item.completed":
		var it item
		if it.parse(itemRaw) {
			d.item(&it, t == "item.completed", emit)
		}
	case "turn.completed":
		var u *executor.Usage
		if !jsonscan.IsNull(usageRaw) {
			u = &executor.Usage{}
			if jsonscan.Object(usageRaw, func(k, v []byte) bool {
				n, _ := jsonscan.Int(v)
				switch string(k) {
				case "input_tokens":
					u.InputTokens = n
				case "output_tokens":
					u.OutputTokens = n
				case "cached_input_tokens":
					u.CachedInputTokens = n
				}
				return true
			}) != nil {
				u = nil
			}
		}
		if u != nil {
			// Codex reports no USD: the figure is left to the consumer to
			// estimate from usage.
			emit(executor.Cost{Usage: *u, Model: d.model, Estimated: true})
		}
		emit(executor.Done{Reason: executor.DoneSuccess, Summary: d.lastText, Usage: u})
	case "turn.failed":
		msg := errorMessage(errRaw)
		if msg == "" {
			msg = "codex: turn failed"
		}
		emit(executor.Error{Code: "turn_failed", Message: msg, Fatal: true})
		emit(executor.Done{Reason: executor.DoneError, Summary: msg})
	case "error":
		// A stream-level problem (for example a reconnect); turn.failed or
		// the exit carries the terminal.
		if m := str(message); m != "" {
			emit(executor.Error{Code: "stream_error", Message: m, Fatal: false})
		}
	}
	return ""
}

func errorMessage(raw []byte) string {
	if s, ok := jsonscan.String(raw); ok {
		return s
	}
	var msg string
	_ = jsonscan.Object(raw, func(k, v []byte) bool {
		if string(k) == "message" {
			msg = str(v)
			return false
		}
		return true
	})
	return msg
}

// item is one thread item of an item.* line.
type item struct {
	id, typ, text, message, command, aggregatedOutput, status, server, tool, query string
	exitCode                                                                       *int64
	changes, arguments, result, errRaw                                             []byte
}

func (it *item) parse(raw []byte) bool {
	return jsonscan.Object(raw, func(k, v []byte) bool {
		switch string(k) {
		case "id":
			it.id = str(v)
		case "type":
			it.typ = str(v)
		case "text":
			it.text = str(v)
		case "message":
			it.message = str(v)
		case "command":
			it.command = str(v)
		case "aggregated_output":
			it.aggregatedOutput = str(v)
		case "status":
			it.status = str(v)
		case "server":
			it.server = str(v)
		case "tool":
			it.tool = str(v)
		case "query":
			it.query = str(v)
		case "exit_code":
			if n, ok := jsonscan.Int(v); ok {
				it.exitCode = &n
			}
		case "changes":
			it.changes = v
		case "arguments":
			it.arguments = v
		case "result":
			it.result = v
		case "error":
			it.errRaw = v
		}
		return true
	}) == nil
}

func (d *decoder) item(it *item, completed bool, emit func(executor.Payload)) {
	switch it.typ {
	case "agent_message":
		if completed && it.text != "" {
			d.lastText = it.text
			emit(executor.TextDelta{Text: it.text, Channel: executor.ChannelAssistant})
		}
	case "reasoning":
		if completed && it.text != "" {
			emit(executor.TextDelta{Text: it.text, Channel: executor.ChannelReasoning})
		}
	case "command_execution":
		d.call(it, "command_execution", oneField("command", it.command), emit)
		if completed {
			failed := it.status == "failed" || (it.exitCode != nil && *it.exitCode != 0)
			emit(executor.ToolResult{ToolCallID: it.id, Name: "command_execution", Output: it.aggregatedOutput, IsError: failed})
		}
	case "file_change":
		d.call(it, "file_change", mustJSON(map[string]json.RawMessage{"changes": validOr(it.changes, "[]")}), emit)
		if completed {
			emit(executor.ToolResult{ToolCallID: it.id, Name: "file_change", Output: describeChanges(it.changes), IsError: it.status == "failed"})
		}
	case "mcp_tool_call":
		name := it.tool
		if it.server != "" {
			name = it.server + "." + it.tool
		}
		d.call(it, name, validOr(it.arguments, "{}"), emit)
		if completed {
			failed := it.status == "failed" || !jsonscan.IsNull(it.errRaw)
			out := string(validOr(it.result, "null"))
			if failed && !jsonscan.IsNull(it.errRaw) {
				out = errorMessage(it.errRaw)
				if out == "" {
					out = string(validOr(it.errRaw, "null"))
				}
			}
			emit(executor.ToolResult{ToolCallID: it.id, Name: name, Output: out, IsError: failed})
		}
	case "web_search":
		d.call(it, "web_search", oneField("query", it.query), emit)
		if completed {
			emit(executor.ToolResult{ToolCallID: it.id, Name: "web_search", Output: it.query})
		}
	case "error":
		// A warning Codex surfaces as an item (for example unknown model
		// metadata); not fatal.
		msg := cmpOr(it.message, it.text)
		if msg != "" {
			emit(executor.Error{Code: "codex_warning", Message: msg, Fatal: false})
		}
	case "todo_list":
		emit(executor.Status{Phase: executor.PhaseThinking, Detail: "todo list updated"})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// call emits the tool-call of an item once, on its first line.
func (d *decoder) call(it *item, name string, input json.RawMessage, emit func(executor.Payload)) {
	if d.called[it.id] {
		return
	}
	d.called[it.id] = true
	emit(executor.ToolCall{ToolCallID: it.id, Name: name, Input: input})
}

// validOr returns a copy of raw when it is a JSON value other than null,
// else empty.
func validOr(raw []byte, empty string) json.RawMessage {
	if jsonscan.IsNull(raw) || !json.Valid(raw) {
		return json.RawMessage(empty)
	}
	return bytes.Clone(raw)
}

// oneField renders {"<key>":<value as a JSON string>}; key needs no
// escaping.
func oneField(key, value string) json.RawMessage {
	v, err := json.Marshal(value)
	if err != nil {
		return json.RawMessage("{}")
	}
	out := make([]byte, 0, len(key)+len(v)+5)
	out = append(out, `{"`...)
	out = append(out, key...)
	out = append(out, `":`...)
	out = append(out, v...)
	return append(out, '}')
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

func describeChanges(raw []byte) string {
	var changes []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	}
	if json.Unmarshal(raw, &changes) != nil {
		return strings.ToValidUTF8(string(raw), "\uFFFD")
	}
	parts := make([]string, 0, len(changes))
	for _, c := range changes {
		parts = append(parts, c.Kind+" "+c.Path)
	}
	return strings.Join(parts, "\n")
}

func preview(b []byte) string {
	const max = 120
	if len(b) > max {
		return fmt.Sprintf("%q…", b[:max])
	}
	return fmt.Sprintf("%q", b)
}
