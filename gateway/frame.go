package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Frame kinds on the wire.
const (
	frameReq   = "req"
	frameRes   = "res"
	frameEvent = "event"
)

// reqFrame is a request from the client to the gateway.
type reqFrame struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// inFrame is a frame from the gateway: a response or an event.
type inFrame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload"`
	Error   *wireError      `json:"error"`
	Event   string          `json:"event"`
	Seq     int64           `json:"seq"`
}

// wireError is the error object of a failed response.
type wireError struct {
	Code         string          `json:"code"`
	Message      string          `json:"message"`
	Details      json.RawMessage `json:"details,omitempty"`
	Retryable    bool            `json:"retryable,omitempty"`
	RetryAfterMs int64           `json:"retryAfterMs,omitempty"`
}

// errBadFrame marks a frame the client could not use. Such frames are
// logged, counted in [Stats.BadFrames] and otherwise ignored.
var errBadFrame = errors.New("bad frame")

// decodeFrame parses one text frame from the gateway. It never panics; any
// frame that is not a well-formed response or event yields an error wrapping
// errBadFrame.
func decodeFrame(data []byte) (inFrame, error) {
	var f inFrame
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return f, fmt.Errorf("decode frame: not a JSON object: %w", errBadFrame)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return inFrame{}, fmt.Errorf("decode frame: %v: %w", err, errBadFrame)
	}
	switch f.Type {
	case frameRes:
		if f.ID == "" {
			return inFrame{}, fmt.Errorf("decode frame: response without id: %w", errBadFrame)
		}
		if !f.OK && f.Error == nil {
			f.Error = &wireError{Code: "UNKNOWN", Message: "response with ok:false and no error"}
		}
	case frameEvent:
		if f.Event == "" {
			return inFrame{}, fmt.Errorf("decode frame: event without name: %w", errBadFrame)
		}
	default:
		return inFrame{}, fmt.Errorf("decode frame: unknown type %q: %w", truncate(f.Type, 32), errBadFrame)
	}
	return f, nil
}

// runPayload is the union of the chat and agent event payloads, decoded
// once per frame.
type runPayload struct {
	RunID        string          `json:"runId"`
	SessionKey   string          `json:"sessionKey"`
	Seq          int64           `json:"seq"`
	State        string          `json:"state"`  // chat
	Phase        string          `json:"phase"`  // chat status
	Stream       string          `json:"stream"` // agent
	Data         json.RawMessage `json:"data"`   // agent
	Message      json.RawMessage `json:"message"`
	ErrorMessage string          `json:"errorMessage"`
	StopReason   string          `json:"stopReason"`
}

// agentData is the data object of agent events (all streams).
type agentData struct {
	Text          string          `json:"text"`
	Phase         string          `json:"phase"`
	Name          string          `json:"name"`
	ToolCallID    string          `json:"toolCallId"`
	Args          json.RawMessage `json:"args"`
	IsError       bool            `json:"isError"`
	Aborted       bool            `json:"aborted"`
	StopReason    string          `json:"stopReason"`
	Error         json.RawMessage `json:"error"`
	TerminalReply *struct {
		Text string `json:"text"`
	} `json:"terminalReply"`
}

// contentText returns the visible text of a transcript or chat message:
// the text blocks of an array content joined, a string content, or a
// top-level text field.
func contentText(msg json.RawMessage) string {
	if len(msg) == 0 || msg[0] != '{' {
		return ""
	}
	var m struct {
		Content json.RawMessage `json:"content"`
		Text    string          `json:"text"`
	}
	if json.Unmarshal(msg, &m) != nil {
		return ""
	}
	if len(m.Content) > 0 {
		switch m.Content[0] {
		case '"':
			var s string
			if json.Unmarshal(m.Content, &s) == nil {
				return s
			}
		case '[':
			var blocks []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(m.Content, &blocks) == nil {
				var b []byte
				for _, bl := range blocks {
					if bl.Type == "text" && bl.Text != "" {
						if len(b) > 0 {
							b = append(b, '\n')
						}
						b = append(b, bl.Text...)
					}
				}
				return string(b)
			}
		}
	}
	return m.Text
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
