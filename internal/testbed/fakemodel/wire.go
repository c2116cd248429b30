package fakemodel

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// event is one SSE event; an empty name writes a data-only event (OpenAI chat
// completions), raw writes its data verbatim ("[DONE]").
type event struct {
	name string
	data any
	raw  string
}

func (e event) encode() []byte {
	var b strings.Builder
	if e.name != "" {
		b.WriteString("event: ")
		b.WriteString(e.name)
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	if e.raw != "" {
		b.WriteString(e.raw)
	} else {
		data, err := json.Marshal(e.data)
		if err != nil {
			data = []byte(`{}`)
		}
		b.Write(data)
	}
	b.WriteString("\n\n")
	return []byte(b.String())
}

// stream is a planned SSE response: head events, one event per delta (the
// server paces these), then tail events.
type stream struct {
	head, deltas, tail []event
}

// builder renders a reply in one API's wire format.
type builder interface {
	// stream plans the SSE response; pieces are the text (or tool-argument)
	// fragments, one delta each.
	stream(pieces []string) stream
	// whole is the non-streaming JSON response.
	whole() any
}

// replyInput is what every builder needs.
type replyInput struct {
	seq          int
	model        string
	text         string     // reply text; "" for a tool call
	tool         toolChoice // zero when not a tool call
	includeUsage bool
	inputTokens  int
	created      int64
}

func (in replyInput) outputTokens() int {
	if in.tool.name != "" {
		return approxTokens(len(in.tool.args))
	}
	return max(1, len(strings.Fields(in.text)))
}

// toolChoice is the shell tool a TOOLCALL asks for, as the client declared it.
type toolChoice struct {
	name string // tool name ("exec", "Bash", "exec_command", …)
	args string // JSON arguments
}

// pickTool chooses the client's shell tool from the request's tool list and
// builds its arguments for command. With escalate, the arguments ask to run
// outside the sandbox as far as the tool declares it: Codex's
// exec_command gets sandbox_permissions "require_escalated" and a
// justification, Claude Code's Bash dangerouslyDisableSandbox.
func pickTool(api API, rawTools json.RawMessage, command string, escalate bool) toolChoice {
	type schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	var tools []struct {
		Name       string `json:"name"`
		Parameters schema `json:"parameters"`
		Input      schema `json:"input_schema"`
		Function   struct {
			Name       string `json:"name"`
			Parameters schema `json:"parameters"`
		} `json:"function"`
	}
	_ = json.Unmarshal(rawTools, &tools) // no or odd tools: fall back below
	declared := map[string]map[string]json.RawMessage{}
	for _, t := range tools {
		switch {
		case t.Function.Name != "":
			declared[t.Function.Name] = t.Function.Parameters.Properties
		case t.Input.Properties != nil:
			declared[t.Name] = t.Input.Properties
		case t.Name != "":
			declared[t.Name] = t.Parameters.Properties
		}
	}
	name := ""
	for _, cand := range []string{"exec", "Bash", "exec_command", "shell", "bash"} {
		if _, ok := declared[cand]; ok {
			name = cand
			break
		}
	}
	if name == "" {
		switch api {
		case APIMessages:
			name = "Bash"
		case APIResponses:
			name = "exec_command"
		default:
			name = "exec"
		}
	}
	props := declared[name]
	argName := "command"
	if _, ok := props["command"]; !ok {
		if _, ok := props["cmd"]; ok || (props == nil && name == "exec_command") {
			argName = "cmd"
		}
	}
	args := map[string]any{argName: command}
	if _, ok := props["description"]; ok || (props == nil && name == "Bash") {
		args["description"] = "fake scripted command"
	}
	if escalate {
		if _, ok := props["sandbox_permissions"]; ok || (props == nil && name == "exec_command") {
			args["sandbox_permissions"] = "require_escalated"
			args["justification"] = EscalateJustification
		}
		if _, ok := props["dangerouslyDisableSandbox"]; ok {
			args["dangerouslyDisableSandbox"] = true
		}
	}
	b, _ := json.Marshal(args) // strings and bools always marshal
	return toolChoice{name: name, args: string(b)}
}

// QuestionHeader is the short header of a QUESTION directive's question.
const QuestionHeader = "Choice"

// QuestionID is the request_user_input id of a QUESTION directive's
// question n (from 0): "choice", then "choice2", "choice3"….
func QuestionID(n int) string {
	if n == 0 {
		return "choice"
	}
	return "choice" + strconv.Itoa(n+1)
}

// questionTool builds the call of the client's question tool for a
// QUESTION directive: Claude Code's AskUserQuestion (single-choice
// questions; the TUI adds a free-text choice), Codex's request_user_input
// (ids from QuestionID; the TUI adds "None of the above"). The
// tool is chosen from the request's declared tools, else by API.
func questionTool(api API, rawTools json.RawMessage, questions []Question) toolChoice {
	var tools []struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(rawTools, &tools)
	name := "AskUserQuestion"
	if api == APIResponses {
		name = "request_user_input"
	}
	for _, t := range tools {
		if t.Name == "AskUserQuestion" || t.Name == "request_user_input" {
			name = t.Name
			break
		}
	}
	type option struct {
		Label       string `json:"label"`
		Description string `json:"description"`
	}
	var qs []any
	for n, question := range questions {
		opts := make([]option, len(question.Options))
		for i, o := range question.Options {
			opts[i] = option{Label: o, Description: "Choose " + o}
		}
		q := map[string]any{"question": question.Text, "header": QuestionHeader, "options": opts}
		if n > 0 {
			q["header"] = QuestionHeader + " " + strconv.Itoa(n+1)
		}
		if name == "request_user_input" {
			q["id"] = QuestionID(n)
		} else {
			q["multiSelect"] = false
		}
		qs = append(qs, q)
	}
	b, _ := json.Marshal(map[string]any{"questions": qs}) // strings only: always marshals
	return toolChoice{name: name, args: string(b)}
}

// ---- OpenAI chat completions ----

type chatBuilder struct{ in replyInput }

func (c chatBuilder) id() string     { return fmt.Sprintf("chatcmpl-fake-%d", c.in.seq) }
func (c chatBuilder) callID() string { return fmt.Sprintf("call_fake_%d", c.in.seq) }

func (c chatBuilder) usage() map[string]any {
	out := c.in.outputTokens()
	return map[string]any{"prompt_tokens": c.in.inputTokens, "completion_tokens": out, "total_tokens": c.in.inputTokens + out}
}

func (c chatBuilder) chunk(delta map[string]any, finish any) event {
	return event{data: map[string]any{
		"id": c.id(), "object": "chat.completion.chunk", "created": c.in.created, "model": c.in.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	}}
}

func (c chatBuilder) stream(pieces []string) stream {
	var st stream
	finish := "stop"
	if c.in.tool.name != "" {
		finish = "tool_calls"
		st.head = append(st.head, c.chunk(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": c.callID(), "type": "function",
			"function": map[string]any{"name": c.in.tool.name, "arguments": ""},
		}}}, nil))
		for _, p := range pieces {
			st.deltas = append(st.deltas, c.chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": 0, "function": map[string]any{"arguments": p},
			}}}, nil))
		}
	} else {
		st.head = append(st.head, c.chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		for _, p := range pieces {
			st.deltas = append(st.deltas, c.chunk(map[string]any{"content": p}, nil))
		}
	}
	st.tail = append(st.tail, c.chunk(map[string]any{}, finish))
	if c.in.includeUsage {
		st.tail = append(st.tail, event{data: map[string]any{
			"id": c.id(), "object": "chat.completion.chunk", "created": c.in.created, "model": c.in.model,
			"choices": []any{}, "usage": c.usage(),
		}})
	}
	st.tail = append(st.tail, event{raw: "[DONE]"})
	return st
}

func (c chatBuilder) whole() any {
	msg := map[string]any{"role": "assistant", "content": c.in.text}
	finish := "stop"
	if c.in.tool.name != "" {
		finish = "tool_calls"
		msg["content"] = nil
		msg["tool_calls"] = []any{map[string]any{
			"id": c.callID(), "type": "function",
			"function": map[string]any{"name": c.in.tool.name, "arguments": c.in.tool.args},
		}}
	}
	return map[string]any{
		"id": c.id(), "object": "chat.completion", "created": c.in.created, "model": c.in.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   c.usage(),
	}
}

// ---- OpenAI Responses ----

type responsesBuilder struct{ in replyInput }

func (r responsesBuilder) respID() string { return fmt.Sprintf("resp_fake_%d", r.in.seq) }

func (r responsesBuilder) itemID() string {
	if r.in.tool.name != "" {
		return fmt.Sprintf("fc_fake_%d", r.in.seq)
	}
	return fmt.Sprintf("msg_fake_%d", r.in.seq)
}

func (r responsesBuilder) usage() map[string]any {
	out := r.in.outputTokens()
	return map[string]any{
		"input_tokens": r.in.inputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": r.in.inputTokens + out,
	}
}

// item is the finished output item.
func (r responsesBuilder) item() map[string]any {
	if r.in.tool.name != "" {
		return map[string]any{
			"type": "function_call", "id": r.itemID(), "call_id": fmt.Sprintf("call_fake_%d", r.in.seq),
			"name": r.in.tool.name, "arguments": r.in.tool.args, "status": "completed",
		}
	}
	return map[string]any{
		"type": "message", "id": r.itemID(), "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": r.in.text, "annotations": []any{}}},
	}
}

func (r responsesBuilder) response(status string, output []any) map[string]any {
	resp := map[string]any{
		"id": r.respID(), "object": "response", "created_at": r.in.created, "model": r.in.model,
		"status": status, "output": output,
	}
	if status == "completed" {
		resp["usage"] = r.usage()
	}
	return resp
}

func (r responsesBuilder) stream(pieces []string) stream {
	var st stream
	n := 0
	ev := func(typ string, fields map[string]any) event {
		fields["type"] = typ
		fields["sequence_number"] = n
		n++
		return event{name: typ, data: fields}
	}
	st.head = append(st.head,
		ev("response.created", map[string]any{"response": r.response("in_progress", []any{})}),
		ev("response.in_progress", map[string]any{"response": r.response("in_progress", []any{})}))
	item := r.item()
	if r.in.tool.name != "" {
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		added["arguments"], added["status"] = "", "in_progress"
		st.head = append(st.head, ev("response.output_item.added", map[string]any{"output_index": 0, "item": added}))
		for _, p := range pieces {
			st.deltas = append(st.deltas, ev("response.function_call_arguments.delta",
				map[string]any{"item_id": r.itemID(), "output_index": 0, "delta": p}))
		}
		st.tail = append(st.tail, ev("response.function_call_arguments.done",
			map[string]any{"item_id": r.itemID(), "output_index": 0, "arguments": r.in.tool.args}))
	} else {
		st.head = append(st.head,
			ev("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
				"type": "message", "id": r.itemID(), "status": "in_progress", "role": "assistant", "content": []any{},
			}}),
			ev("response.content_part.added", map[string]any{"item_id": r.itemID(), "output_index": 0, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}))
		for _, p := range pieces {
			st.deltas = append(st.deltas, ev("response.output_text.delta",
				map[string]any{"item_id": r.itemID(), "output_index": 0, "content_index": 0, "delta": p}))
		}
		st.tail = append(st.tail,
			ev("response.output_text.done", map[string]any{"item_id": r.itemID(), "output_index": 0, "content_index": 0,
				"text": r.in.text}),
			ev("response.content_part.done", map[string]any{"item_id": r.itemID(), "output_index": 0, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": r.in.text, "annotations": []any{}}}))
	}
	st.tail = append(st.tail,
		ev("response.output_item.done", map[string]any{"output_index": 0, "item": item}),
		ev("response.completed", map[string]any{"response": r.response("completed", []any{item})}))
	return st
}

func (r responsesBuilder) whole() any { return r.response("completed", []any{r.item()}) }

// ---- Anthropic Messages ----

type messagesBuilder struct{ in replyInput }

// toolPreamble is the text block Claude Code saw before a tool_use block in
// the verified tool-call stream.
const toolPreamble = "Running the scripted command."

func (m messagesBuilder) text() string {
	if m.in.tool.name != "" {
		return toolPreamble
	}
	return m.in.text
}

func (m messagesBuilder) stopReason() string {
	if m.in.tool.name != "" {
		return "tool_use"
	}
	return "end_turn"
}

func (m messagesBuilder) toolUseID() string { return fmt.Sprintf("toolu_fake_%d", m.in.seq) }

func (m messagesBuilder) stream(pieces []string) stream {
	var st stream
	ev := func(typ string, fields map[string]any) event {
		fields["type"] = typ
		return event{name: typ, data: fields}
	}
	st.head = append(st.head,
		ev("message_start", map[string]any{"message": map[string]any{
			"id": fmt.Sprintf("msg_fake_%d", m.in.seq), "type": "message", "role": "assistant", "model": m.in.model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": m.in.inputTokens, "output_tokens": 1,
				"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
		}}),
		ev("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
		ev("ping", map[string]any{}))
	if m.in.tool.name != "" {
		st.head = append(st.head,
			ev("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": m.text()}}),
			ev("content_block_stop", map[string]any{"index": 0}),
			ev("content_block_start", map[string]any{"index": 1, "content_block": map[string]any{
				"type": "tool_use", "id": m.toolUseID(), "name": m.in.tool.name, "input": map[string]any{}}}))
		for _, p := range pieces {
			st.deltas = append(st.deltas, ev("content_block_delta", map[string]any{"index": 1,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": p}}))
		}
		st.tail = append(st.tail, ev("content_block_stop", map[string]any{"index": 1}))
	} else {
		for _, p := range pieces {
			st.deltas = append(st.deltas, ev("content_block_delta", map[string]any{"index": 0,
				"delta": map[string]any{"type": "text_delta", "text": p}}))
		}
		st.tail = append(st.tail, ev("content_block_stop", map[string]any{"index": 0}))
	}
	st.tail = append(st.tail,
		ev("message_delta", map[string]any{"delta": map[string]any{"stop_reason": m.stopReason(), "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": m.in.outputTokens()}}),
		ev("message_stop", map[string]any{}))
	return st
}

func (m messagesBuilder) whole() any {
	content := []any{map[string]any{"type": "text", "text": m.text()}}
	if m.in.tool.name != "" {
		var input map[string]any
		_ = json.Unmarshal([]byte(m.in.tool.args), &input) // built by pickTool: valid
		content = append(content, map[string]any{"type": "tool_use", "id": m.toolUseID(), "name": m.in.tool.name, "input": input})
	}
	return map[string]any{
		"id": fmt.Sprintf("msg_fake_%d", m.in.seq), "type": "message", "role": "assistant", "model": m.in.model,
		"content": content, "stop_reason": m.stopReason(), "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": m.in.inputTokens, "output_tokens": m.in.outputTokens()},
	}
}
