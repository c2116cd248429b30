package terminal

import (
	"encoding/json"
	"strings"

	"github.com/clawconnect/clawconnect/executor"
)

// decoder turns one complete line of a session file into normalized
// payloads. It keeps what later lines refer to (tool names by call id) and
// the usage summed over the Turn.
type decoder interface {
	line(b []byte) []executor.Payload
	usage() *executor.Usage
}

func newDecoder(agent string) decoder {
	if agent == "claude" {
		return &claudeDecoder{names: map[string]string{}, counted: map[string]bool{}}
	}
	return &codexDecoder{names: map[string]string{}}
}

// codexDecoder reads a Codex rollout: response_item messages, function
// calls and their outputs, and token_count events.
type codexDecoder struct {
	names map[string]string
	u     executor.Usage
	seenU bool
}

type codexLine struct {
	Type    string `json:"type"`
	Payload struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Input     json.RawMessage `json:"input"`
		CallID    string          `json:"call_id"`
		Output    json.RawMessage `json:"output"`
		Info      *struct {
			Last *struct {
				Input  int64 `json:"input_tokens"`
				Cached int64 `json:"cached_input_tokens"`
				Output int64 `json:"output_tokens"`
			} `json:"last_token_usage"`
		} `json:"info"`
	} `json:"payload"`
}

func (d *codexDecoder) line(b []byte) []executor.Payload {
	var l codexLine
	if json.Unmarshal(b, &l) != nil {
		return nil
	}
	p := l.Payload
	switch {
	case l.Type == "response_item" && p.Type == "message" && p.Role == "assistant":
		var sb strings.Builder
		for _, c := range p.Content {
			if c.Type == "output_text" {
				sb.WriteString(c.Text)
			}
		}
		if sb.Len() == 0 {
			return nil
		}
		return []executor.Payload{executor.TextDelta{Text: sb.String()}}
	case l.Type == "response_item" && (p.Type == "function_call" || p.Type == "custom_tool_call"):
		in := json.RawMessage(p.Arguments)
		if p.Type == "custom_tool_call" || !json.Valid(in) {
			in, _ = json.Marshal(map[string]any{"input": p.Arguments + string(p.Input)})
		}
		d.names[p.CallID] = p.Name
		return []executor.Payload{executor.ToolCall{ToolCallID: p.CallID, Name: p.Name, Input: in}}
	case l.Type == "response_item" && (p.Type == "function_call_output" || p.Type == "custom_tool_call_output"):
		out := ""
		if json.Unmarshal(p.Output, &out) != nil {
			var o struct {
				Content string `json:"content"`
			}
			if json.Unmarshal(p.Output, &o) == nil {
				out = o.Content
			} else {
				out = string(p.Output)
			}
		}
		return []executor.Payload{executor.ToolResult{ToolCallID: p.CallID, Name: d.names[p.CallID], Output: out}}
	case l.Type == "event_msg" && p.Type == "token_count" && p.Info != nil && p.Info.Last != nil:
		d.seenU = true
		d.u.InputTokens += p.Info.Last.Input
		d.u.CachedInputTokens += p.Info.Last.Cached
		d.u.OutputTokens += p.Info.Last.Output
	}
	return nil
}

func (d *codexDecoder) usage() *executor.Usage {
	if !d.seenU {
		return nil
	}
	u := d.u
	return &u
}

// claudeDecoder reads a Claude Code transcript: assistant messages (text
// and tool_use blocks, with usage) and the tool_result blocks of user
// records. Sidechain records (subagents) are skipped.
type claudeDecoder struct {
	names map[string]string
	// counted holds the message ids whose usage was added: Claude Code
	// writes one record per content block, each with the message's usage.
	counted map[string]bool
	u       executor.Usage
	seenU   bool
}

type claudeLine struct {
	Type      string `json:"type"`
	Sidechain bool   `json:"isSidechain"`
	Message   struct {
		ID      string          `json:"id"`
		Content json.RawMessage `json:"content"`
		Usage   *struct {
			Input       int64 `json:"input_tokens"`
			CacheRead   int64 `json:"cache_read_input_tokens"`
			CacheCreate int64 `json:"cache_creation_input_tokens"`
			Output      int64 `json:"output_tokens"`
		} `json:"usage"`
	} `json:"message"`
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (d *claudeDecoder) line(b []byte) []executor.Payload {
	var l claudeLine
	if json.Unmarshal(b, &l) != nil || l.Sidechain || (l.Type != "assistant" && l.Type != "user") {
		return nil
	}
	var blocks []claudeBlock
	if json.Unmarshal(l.Message.Content, &blocks) != nil {
		return nil // a plain string: the prompt itself
	}
	var out []executor.Payload
	for _, c := range blocks {
		switch {
		case l.Type == "assistant" && c.Type == "text" && c.Text != "":
			out = append(out, executor.TextDelta{Text: c.Text})
		case l.Type == "assistant" && c.Type == "tool_use":
			d.names[c.ID] = c.Name
			in := c.Input
			if len(in) == 0 {
				in = json.RawMessage("{}")
			}
			out = append(out, executor.ToolCall{ToolCallID: c.ID, Name: c.Name, Input: in})
		case l.Type == "user" && c.Type == "tool_result":
			out = append(out, executor.ToolResult{ToolCallID: c.ToolUseID, Name: d.names[c.ToolUseID], Output: blockText(c.Content), IsError: c.IsError})
		}
	}
	if u := l.Message.Usage; l.Type == "assistant" && u != nil && (l.Message.ID == "" || !d.counted[l.Message.ID]) {
		if l.Message.ID != "" {
			d.counted[l.Message.ID] = true
		}
		d.seenU = true
		d.u.InputTokens += u.Input + u.CacheRead + u.CacheCreate
		d.u.CachedInputTokens += u.CacheRead
		d.u.OutputTokens += u.Output
	}
	return out
}

// blockText is a tool_result's content: a string, or the text of its blocks.
func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []claudeBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return string(raw)
	}
	var sb strings.Builder
	for _, b := range blocks {
		sb.WriteString(b.Text)
	}
	return sb.String()
}

func (d *claudeDecoder) usage() *executor.Usage {
	if !d.seenU {
		return nil
	}
	u := d.u
	return &u
}
