package openclaw

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/internal/jsonscan"
)

// frame is the union of the chat and agent event payload fields the mapper
// reads.
type frame struct {
	RunID, SessionKey, State, Phase, StopReason, ErrorMessage, ErrorKind, Stream string
	Message, Data                                                                []byte
}

// parseFrame reads a chat or agent event payload without reflection.
func parseFrame(payload []byte) (frame, bool) {
	var f frame
	err := jsonscan.Object(payload, func(k, v []byte) bool {
		switch string(k) {
		case "runId":
			f.RunID = str(v)
		case "sessionKey":
			f.SessionKey = str(v)
		case "state":
			f.State = str(v)
		case "phase":
			f.Phase = str(v)
		case "stopReason":
			f.StopReason = str(v)
		case "errorMessage":
			f.ErrorMessage = str(v)
		case "errorKind":
			f.ErrorKind = str(v)
		case "stream":
			f.Stream = str(v)
		case "message":
			f.Message = v
		case "data":
			f.Data = v
		}
		return true
	})
	return f, err == nil
}

func str(v []byte) string {
	s, _ := jsonscan.String(v)
	return s
}

// agentData is the data of an agent event.
type agentData struct {
	Phase, Name, ToolCallID, Message, Reason, Detail, Model, Code string
	Text, Delta                                                   *string
	Replace, IsError                                              bool
	Args, Result, Output, Meta, Error                             []byte
}

func parseAgentData(raw []byte) (agentData, bool) {
	var d agentData
	if jsonscan.IsNull(raw) {
		return d, true
	}
	sp := func(v []byte) *string {
		if s, ok := jsonscan.String(v); ok {
			return &s
		}
		return nil
	}
	err := jsonscan.Object(raw, func(k, v []byte) bool {
		switch string(k) {
		case "phase":
			d.Phase = str(v)
		case "name":
			d.Name = str(v)
		case "toolCallId":
			d.ToolCallID = str(v)
		case "message":
			d.Message = str(v)
		case "reason":
			d.Reason = str(v)
		case "detail":
			d.Detail = str(v)
		case "model":
			d.Model = str(v)
		case "code":
			d.Code = str(v)
		case "text":
			d.Text = sp(v)
		case "delta":
			d.Delta = sp(v)
		case "replace":
			d.Replace = jsonscan.Bool(v)
		case "isError":
			d.IsError = jsonscan.Bool(v)
		case "args":
			d.Args = v
		case "result":
			d.Result = v
		case "output":
			d.Output = v
		case "meta":
			d.Meta = v
		case "error":
			d.Error = v
		}
		return true
	})
	return d, err == nil
}

// toolCallBlock is a {"type":"toolCall"} content block.
type toolCallBlock struct {
	ID, Name  string
	Arguments []byte
}

// message is a chat message snapshot, read in one pass.
type message struct {
	Role, ToolCallID, ToolName string
	IsError                    bool
	text                       string // visible text (before stripping)
	thinking                   string
	toolCalls                  []toolCallBlock
}

func parseMessage(raw []byte) (*message, bool) {
	m := &message{}
	var content, textField []byte
	if jsonscan.Object(raw, func(k, v []byte) bool {
		switch string(k) {
		case "role":
			m.Role = str(v)
		case "content":
			content = v
		case "text":
			textField = v
		case "toolCallId":
			m.ToolCallID = str(v)
		case "toolName":
			m.ToolName = str(v)
		case "isError":
			m.IsError = jsonscan.Bool(v)
		case "thinking":
			m.thinking = str(v)
		}
		return true
	}) != nil {
		return nil, false
	}
	switch {
	case len(content) > 0 && content[0] == '"':
		m.text = str(content)
	case len(content) > 0 && content[0] == '[':
		var texts, thinks []string
		_ = jsonscan.Array(content, func(elem []byte) bool {
			var typ, text, thinking, analysis, reasoning, id, name, args []byte
			_ = jsonscan.Object(elem, func(k, v []byte) bool {
				switch string(k) {
				case "type":
					typ = v
				case "text":
					text = v
				case "thinking":
					thinking = v
				case "analysis":
					analysis = v
				case "reasoning":
					reasoning = v
				case "id":
					id = v
				case "name":
					name = v
				case "arguments":
					args = v
				}
				return true
			})
			switch {
			case jsonscan.Is(typ, "text"):
				if t, ok := jsonscan.String(text); ok {
					texts = append(texts, t)
				}
			case jsonscan.Is(typ, "thinking"), jsonscan.Is(typ, "analysis"), jsonscan.Is(typ, "reasoning"):
				for _, v := range [][]byte{thinking, analysis, reasoning, text} {
					if t := str(v); t != "" {
						thinks = append(thinks, t)
						break
					}
				}
			case jsonscan.Is(typ, "toolCall"):
				m.toolCalls = append(m.toolCalls, toolCallBlock{ID: str(id), Name: str(name), Arguments: args})
			}
			return true
		})
		if len(texts) == 1 {
			m.text = texts[0]
		} else {
			m.text = strings.Join(texts, "\n")
		}
		if len(thinks) > 0 {
			m.thinking = strings.Join(thinks, "\n")
		}
	default:
		m.text = str(textField)
	}
	return m, true
}

// mapper turns one session's gateway frames into normalized payloads for
// one stream. It is not safe for concurrent use; the adapter serializes
// calls.
//
// Chat deltas carry the cumulative text so far; the mapper emits only what
// is new (a snapshot that does not extend the previous one, a rewrite, is
// emitted whole). The agent stream's assistant text repeats the chat text
// and is ignored; reasoning streams become reasoning deltas. Tool calls are
// emitted once per tool call id, from the agent tool stream or the
// message's toolCall blocks, whichever comes first.
type mapper struct {
	runID       string
	text        string // cumulative assistant text of the current run
	reasoning   map[string]string
	accumulated strings.Builder // assistant text across the stream, for abort summaries
	calls       map[string]bool
	results     map[string]bool
}

func newMapper() *mapper {
	return &mapper{reasoning: map[string]string{}, calls: map[string]bool{}, results: map[string]bool{}}
}

// resetRun starts a new run's state when the run id changes (a long-lived
// session hosts successive runs).
func (m *mapper) resetRun(runID string) {
	if runID == m.runID {
		return
	}
	m.runID = runID
	m.text = ""
	clear(m.reasoning)
	clear(m.calls)
	clear(m.results)
}

// mapEvent maps one event frame (name is "chat" or "agent").
func (m *mapper) mapEvent(name string, f *frame, emit func(executor.Payload)) {
	m.resetRun(f.RunID)
	switch name {
	case "chat":
		m.chat(f, emit)
	case "agent":
		m.agent(f, emit)
	}
}

func (m *mapper) chat(f *frame, emit func(executor.Payload)) {
	var msg *message
	if !jsonscan.IsNull(f.Message) {
		msg, _ = parseMessage(f.Message)
	}
	switch f.State {
	case "status":
		if f.Phase != "" {
			emit(executor.Status{Phase: executor.PhaseInit, Detail: f.Phase})
		}
	case "delta":
		if msg != nil {
			m.assistantText(extractText(msg), emit)
			if th := msg.thinking; th != "" {
				m.reasoningText("chat", th, false, emit)
			}
		}
	}
	if msg != nil {
		m.messageTools(msg, emit)
	}
	switch f.State {
	case "final":
		summary := ""
		if msg != nil {
			summary = extractText(msg)
			m.assistantText(summary, emit) // a tail the deltas did not carry
		}
		if summary == "" {
			summary = m.text
		}
		emit(executor.Done{Reason: executor.DoneSuccess, Summary: summary})
	case "aborted":
		summary := ""
		if msg != nil {
			summary = extractText(msg)
		}
		if summary == "" {
			summary = m.accumulated.String()
		}
		emit(executor.Done{Reason: executor.DoneAborted, Summary: summary})
	case "error":
		text := f.ErrorMessage
		if text == "" {
			text = "error"
		}
		code := f.ErrorKind
		if code == "" {
			code = f.StopReason
		}
		emit(executor.Error{Code: code, Message: text, Fatal: true})
		emit(executor.Done{Reason: executor.DoneError, Summary: text})
	}
}

// assistantText emits the part of the cumulative text not emitted yet.
func (m *mapper) assistantText(cum string, emit func(executor.Payload)) {
	if cum == "" || cum == m.text {
		return
	}
	delta := cum
	if strings.HasPrefix(cum, m.text) {
		delta = cum[len(m.text):]
	} else if strings.HasPrefix(m.text, cum) {
		return // an older, shorter snapshot
	}
	m.text = cum
	if m.accumulated.Len() < 64<<10 {
		m.accumulated.WriteString(delta)
	}
	emit(executor.TextDelta{Text: delta, Channel: executor.ChannelAssistant})
}

func (m *mapper) reasoningText(stream, text string, increment bool, emit func(executor.Payload)) {
	if text == "" {
		return
	}
	prev := m.reasoning[stream]
	delta := text
	switch {
	case increment:
		m.reasoning[stream] = prev + text
	case text == prev || strings.HasPrefix(prev, text):
		return
	case strings.HasPrefix(text, prev):
		delta = text[len(prev):]
		m.reasoning[stream] = text
	default:
		m.reasoning[stream] = text
	}
	emit(executor.TextDelta{Text: delta, Channel: executor.ChannelReasoning})
}

func (m *mapper) messageTools(msg *message, emit func(executor.Payload)) {
	if msg.Role == "toolResult" || msg.Role == "tool" {
		if !m.results[msg.ToolCallID] {
			m.results[msg.ToolCallID] = true
			emit(executor.ToolResult{ToolCallID: msg.ToolCallID, Name: cmpOr(msg.ToolName, "tool"), Output: extractText(msg), IsError: msg.IsError})
		}
		return
	}
	for _, b := range msg.toolCalls {
		name := cmpOr(b.Name, "tool")
		id := cmpOr(b.ID, m.runID+":"+name)
		if m.calls[id] {
			continue
		}
		m.calls[id] = true
		emit(executor.ToolCall{ToolCallID: id, Name: name, Input: objectOr(b.Arguments)})
	}
}

func (m *mapper) agent(f *frame, emit func(executor.Payload)) {
	switch f.Stream {
	case "assistant", "usage", "run_status", "":
		// assistant repeats the chat text; usage and run_status carry
		// nothing the normalized stream needs.
		return
	}
	d, ok := parseAgentData(f.Data)
	if !ok {
		return
	}
	switch f.Stream {
	case "lifecycle":
		switch d.Phase {
		case "start":
			emit(executor.Status{Phase: executor.PhaseRunning})
		case "model":
			if d.Model != "" {
				emit(executor.Status{Phase: executor.PhaseRunning, Model: d.Model})
			}
		case "end":
			emit(executor.Status{Phase: executor.PhaseTurnComplete})
		case "error":
			msg := firstNonBlank(errorText(d.Error), d.Message, d.Reason, d.Detail, derefStr(d.Text))
			if msg == "" {
				msg = "agent error"
			}
			emit(executor.Error{Code: d.Code, Message: msg, Fatal: true})
		}
	case "tool":
		id := cmpOr(d.ToolCallID, m.runID+":"+cmpOr(d.Name, "tool"))
		name := cmpOr(d.Name, "tool")
		switch d.Phase {
		case "start":
			if !m.calls[id] {
				m.calls[id] = true
				emit(executor.ToolCall{ToolCallID: id, Name: name, Input: objectOr(d.Args)})
			}
		case "result", "end":
			if !m.results[id] {
				m.results[id] = true
				out := firstRaw(d.Result, d.Output, d.Meta)
				emit(executor.ToolResult{ToolCallID: id, Name: name, Output: out, IsError: d.IsError})
			}
		}
	default:
		if isReasoningStream(f.Stream) {
			if d.Delta != nil && *d.Delta != "" && !d.Replace {
				m.reasoningText(f.Stream, *d.Delta, true, emit)
			} else if d.Text != nil {
				m.reasoningText(f.Stream, *d.Text, false, emit)
			}
		}
	}
}

func isReasoningStream(s string) bool {
	s = strings.ToLower(s)
	if strings.Contains(s, "assistant") || strings.Contains(s, "tool") || strings.Contains(s, "lifecycle") {
		return false
	}
	return strings.Contains(s, "reason") || strings.Contains(s, "think") || strings.Contains(s, "analysis") || strings.Contains(s, "trace")
}

// stripThinking removes <think>, <thinking> and <analysis> blocks, and an
// unclosed trailing one (still streaming).
func stripThinking(text string) string {
	if !strings.Contains(text, "<") {
		return text
	}
	for _, tag := range []string{"think", "thinking", "analysis"} {
		open, closing := "<"+tag+">", "</"+tag+">"
		for {
			i := strings.Index(text, open)
			if i < 0 {
				break
			}
			j := strings.Index(text[i:], closing)
			if j < 0 {
				text = text[:i]
				break
			}
			text = text[:i] + text[i+j+len(closing):]
		}
	}
	return text
}

// stripReplyTo removes a leading [[reply_to_current]] or [reply_to_current].
func stripReplyTo(text string) string {
	t := strings.TrimLeft(text, " \t\n")
	for _, p := range []string{"[[reply_to_current]]", "[reply_to_current]"} {
		if rest, ok := strings.CutPrefix(t, p); ok {
			return strings.TrimLeft(rest, " \t\n")
		}
	}
	return text
}

// extractText is a message's visible text: a string content, or its text
// blocks joined with newlines, or its text field; thinking blocks and the
// reply-to prefix are stripped from assistant text.
func extractText(msg *message) string {
	if msg.Role == "assistant" || msg.Role == "" {
		return stripReplyTo(stripThinking(msg.text))
	}
	return msg.text
}

func errorText(raw []byte) string {
	if jsonscan.IsNull(raw) {
		return ""
	}
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

func objectOr(raw []byte) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return json.RawMessage("{}")
	}
	return bytes.Clone(raw)
}

func firstRaw(vals ...[]byte) string {
	for _, v := range vals {
		if jsonscan.IsNull(v) {
			continue
		}
		if s, ok := jsonscan.String(v); ok {
			return s
		}
		return strings.ToValidUTF8(string(v), "\uFFFD")
	}
	return ""
}

func firstNonBlank(vals ...string) string {
	for _, v := range vals {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func derefStr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
