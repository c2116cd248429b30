package claudecode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/internal/jsonscan"
)

// decoder maps `claude -p --output-format stream-json --verbose` lines. One
// decoder serves one run. It reads only the fields it needs, with
// jsonscan, so a large init line costs a scan and nothing more.
type decoder struct {
	// streamed is set when partial-message deltas carried the current
	// assistant message's text, so its full `assistant` line must not
	// repeat it.
	streamed bool
	// toolNames remembers tool_use names so tool results carry them.
	toolNames map[string]string
}

func newDecoder() *decoder { return &decoder{toolNames: map[string]string{}} }

// fields are the top-level members of a stream-json line the decoder reads.
type fields struct {
	typ, subtype, sessionID, model, status, toolName []byte
	message, event, result, usage, errors, cost      []byte
	isError                                          bool
}

func str(v []byte) string {
	s, _ := jsonscan.String(v)
	return s
}

// Decode implements oneshot.Decoder.
func (d *decoder) Decode(raw []byte, emit func(executor.Payload)) string {
	var f fields
	err := jsonscan.Object(raw, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			f.typ = v
		case "subtype":
			f.subtype = v
		case "session_id":
			f.sessionID = v
		case "model":
			f.model = v
		case "status":
			f.status = v
		case "tool_name":
			f.toolName = v
		case "message":
			f.message = v
		case "event":
			f.event = v
		case "result":
			f.result = v
		case "usage":
			f.usage = v
		case "errors":
			f.errors = v
		case "total_cost_usd":
			f.cost = v
		case "is_error":
			f.isError = jsonscan.Bool(v)
		}
		return true
	})
	if err != nil {
		emit(executor.Error{Code: "bad_line", Message: "claude: unparseable stdout line: " + preview(raw), Fatal: false})
		return ""
	}
	switch {
	case jsonscan.Is(f.typ, "system"):
		return d.system(&f, emit)
	case jsonscan.Is(f.typ, "stream_event"):
		d.streamEvent(f.event, emit)
	case jsonscan.Is(f.typ, "assistant"):
		d.assistant(f.message, emit)
	case jsonscan.Is(f.typ, "user"):
		d.user(f.message, emit)
	case jsonscan.Is(f.typ, "result"):
		d.result(&f, emit)
		return str(f.sessionID)
	}
	// Other types (rate_limit_event, keep-alives, future additions) carry
	// nothing the normalized stream needs.
	return ""
}

func (d *decoder) system(f *fields, emit func(executor.Payload)) string {
	switch str(f.subtype) {
	case "init":
		emit(executor.Status{Phase: executor.PhaseInit, Model: str(f.model)})
		return str(f.sessionID)
	case "permission_denied":
		msg := "claude: permission denied"
		if t := str(f.toolName); t != "" {
			msg += " for " + t
		}
		emit(executor.Error{Code: "permission_denied", Message: msg, Fatal: false})
	case "status":
		if st := str(f.status); st != "" {
			emit(executor.Status{Phase: executor.PhaseRunning, Detail: st})
		}
	}
	return ""
}

func (d *decoder) streamEvent(ev []byte, emit func(executor.Payload)) {
	var typ, delta []byte
	if jsonscan.Object(ev, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			typ = v
		case "delta":
			delta = v
		}
		return true
	}) != nil {
		return
	}
	switch {
	case jsonscan.Is(typ, "message_start"):
		d.streamed = false
	case jsonscan.Is(typ, "content_block_delta"):
		var dt, text, thinking []byte
		if jsonscan.Object(delta, func(k, v []byte) bool {
			switch string(k) {
			case "type":
				dt = v
			case "text":
				text = v
			case "thinking":
				thinking = v
			}
			return true
		}) != nil {
			return
		}
		switch {
		case jsonscan.Is(dt, "text_delta"):
			if t := str(text); t != "" {
				d.streamed = true
				emit(executor.TextDelta{Text: t, Channel: executor.ChannelAssistant})
			}
		case jsonscan.Is(dt, "thinking_delta"):
			if t := str(thinking); t != "" {
				d.streamed = true
				emit(executor.TextDelta{Text: t, Channel: executor.ChannelReasoning})
			}
		}
	}
}

// block is one content block of a message.
type block struct {
	typ, text, thinking, id, name, input, toolUseID, content []byte
	isError                                                  bool
}

// blocks walks a message's content: a list of blocks, or a bare string
// (one text block).
func blocks(message []byte, fn func(b *block)) {
	var content []byte
	if jsonscan.Object(message, func(k, v []byte) bool {
		if string(k) == "content" {
			content = v
			return false
		}
		return true
	}) != nil || len(content) == 0 {
		return
	}
	if content[0] == '"' {
		fn(&block{typ: []byte(`"text"`), text: content})
		return
	}
	_ = jsonscan.Array(content, func(elem []byte) bool {
		var b block
		if jsonscan.Object(elem, func(k, v []byte) bool {
			switch string(k) {
			case "type":
				b.typ = v
			case "text":
				b.text = v
			case "thinking":
				b.thinking = v
			case "id":
				b.id = v
			case "name":
				b.name = v
			case "input":
				b.input = v
			case "tool_use_id":
				b.toolUseID = v
			case "content":
				b.content = v
			case "is_error":
				b.isError = jsonscan.Bool(v)
			}
			return true
		}) == nil {
			fn(&b)
		}
		return true
	})
}

func (d *decoder) assistant(message []byte, emit func(executor.Payload)) {
	blocks(message, func(b *block) {
		switch {
		case jsonscan.Is(b.typ, "text"):
			if t := str(b.text); t != "" && !d.streamed {
				emit(executor.TextDelta{Text: t, Channel: executor.ChannelAssistant})
			}
		case jsonscan.Is(b.typ, "thinking"):
			if t := str(b.thinking); t != "" && !d.streamed {
				emit(executor.TextDelta{Text: t, Channel: executor.ChannelReasoning})
			}
		case jsonscan.Is(b.typ, "tool_use"):
			id, name := str(b.id), str(b.name)
			d.toolNames[id] = name
			input := json.RawMessage("{}")
			if !jsonscan.IsNull(b.input) && json.Valid(b.input) {
				input = bytes.Clone(b.input)
			}
			emit(executor.ToolCall{ToolCallID: id, Name: name, Input: input})
		}
	})
	d.streamed = false
}

func (d *decoder) user(message []byte, emit func(executor.Payload)) {
	blocks(message, func(b *block) {
		if !jsonscan.Is(b.typ, "tool_result") {
			return
		}
		id := str(b.toolUseID)
		emit(executor.ToolResult{ToolCallID: id, Name: d.toolNames[id], Output: stringify(b.content), IsError: b.isError})
	})
}

func (d *decoder) result(f *fields, emit func(executor.Payload)) {
	var u *executor.Usage
	if !jsonscan.IsNull(f.usage) {
		u = &executor.Usage{}
		if jsonscan.Object(f.usage, func(k, v []byte) bool {
			n, _ := jsonscan.Int(v)
			switch string(k) {
			case "input_tokens":
				u.InputTokens = n
			case "output_tokens":
				u.OutputTokens = n
			case "cache_read_input_tokens":
				u.CachedInputTokens = n
			}
			return true
		}) != nil {
			u = nil
		}
	}
	cost := jsonscan.Float(f.cost)
	if u != nil || cost != nil {
		c := executor.Cost{CostUSD: cost}
		if u != nil {
			c.Usage = *u
		}
		emit(c) // Claude's USD figure is real: never estimated
	}
	summary := str(f.result)
	subtype := str(f.subtype)
	switch {
	case subtype == "error_max_turns":
		emit(executor.Done{Reason: executor.DoneMaxTurns, Summary: summary, Usage: u, CostUSD: cost})
	case subtype == "success" && !f.isError:
		emit(executor.Done{Reason: executor.DoneSuccess, Summary: summary, Usage: u, CostUSD: cost})
	default:
		msg := errorsText(f.errors)
		if msg == "" {
			msg = summary
		}
		if msg == "" {
			msg = "claude: run failed (" + cmpOr(subtype, "no subtype") + ")"
		}
		emit(executor.Error{Code: cmpOr(subtype, "error"), Message: msg, Fatal: true})
		emit(executor.Done{Reason: executor.DoneError, Summary: cmpOr(summary, msg), Usage: u, CostUSD: cost})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// errorsText joins a result's errors (strings or objects with a message).
func errorsText(raw []byte) string {
	var parts []string
	_ = jsonscan.Array(raw, func(it []byte) bool {
		if s, ok := jsonscan.String(it); ok {
			parts = append(parts, s)
			return true
		}
		_ = jsonscan.Object(it, func(k, v []byte) bool {
			if string(k) == "message" {
				if s := str(v); s != "" {
					parts = append(parts, s)
				}
				return false
			}
			return true
		})
		return true
	})
	return strings.Join(parts, "; ")
}

// stringify renders tool_result content: a string as is, text blocks
// concatenated, anything else as its JSON.
func stringify(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	if s, ok := jsonscan.String(raw); ok {
		return s
	}
	if raw[0] == '[' {
		var b strings.Builder
		if jsonscan.Array(raw, func(elem []byte) bool {
			_ = jsonscan.Object(elem, func(k, v []byte) bool {
				if string(k) == "text" {
					b.WriteString(str(v))
				}
				return true
			})
			return true
		}) == nil {
			return b.String()
		}
	}
	return strings.ToValidUTF8(string(raw), "\ufffd")
}

func preview(b []byte) string {
	const max = 120
	if len(b) > max {
		return fmt.Sprintf("%q…", b[:max])
	}
	return fmt.Sprintf("%q", b)
}
