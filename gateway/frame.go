package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/clawconnect/clawconnect/internal/jsonscan"
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

// appendReq appends the request frame of id, method and params (valid
// JSON) to dst: what json.Marshal of its reqFrame gives, but for the
// params, which are written as they are rather than checked and compacted
// once more.
func appendReq(dst []byte, id, method string, params json.RawMessage) []byte {
	dst = append(dst, `{"type":"`+frameReq+`","id":`...)
	dst = appendJSONString(dst, id)
	dst = append(dst, `,"method":`...)
	dst = appendJSONString(dst, method)
	if len(params) > 0 {
		dst = append(dst, `,"params":`...)
		dst = append(dst, params...)
	}
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string.
func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

// payloadStatus is the "status" member of a response's payload, as
//
//	json.Unmarshal(payload, &struct{ Status string `json:"status"` }{})
//
// would decode it; it scans the payload without decoding the rest and
// leaves anything but a plain key and string to encoding/json.
func payloadStatus(payload json.RawMessage) string {
	var status string
	plainOnly := true
	err := jsonscan.Object(payload, func(key, val []byte) bool {
		switch {
		case !plain(key):
			plainOnly = false
		case string(key) == "status":
			if len(val) < 2 || val[0] != '"' || !plain(val[1:len(val)-1]) {
				plainOnly = false
				break
			}
			status = string(val[1 : len(val)-1])
		case bytes.EqualFold(key, []byte("status")):
			plainOnly = false
		}
		return plainOnly
	})
	if err != nil || !plainOnly {
		var s struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(payload, &s)
		return s.Status
	}
	return status
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
// in one pass per frame (agent data and chat message included).
type runPayload struct {
	RunID        string    `json:"runId"`
	SessionKey   string    `json:"sessionKey"`
	Seq          int64     `json:"seq"`
	State        string    `json:"state"`  // chat
	Phase        string    `json:"phase"`  // chat status
	Stream       string    `json:"stream"` // agent
	Data         agentData `json:"data"`   // agent
	Message      *message  `json:"message"`
	ErrorMessage string    `json:"errorMessage"`
	StopReason   string    `json:"stopReason"`
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

// message is a chat message: content is a string or an array of blocks.
type message struct {
	Content content `json:"content"`
	Text    string  `json:"text"`
}

// text returns the visible text of m ("" for nil).
func (m *message) text() string {
	if m == nil {
		return ""
	}
	if m.Content.text != "" {
		return m.Content.text
	}
	return m.Text
}

// content decodes a message content: a string, or the text blocks of an
// array joined with newlines. Other shapes decode to "".
type content struct{ text string }

// UnmarshalJSON implements json.Unmarshaler.
func (c *content) UnmarshalJSON(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	switch b[0] {
	case '"':
		return json.Unmarshal(b, &c.text)
	case '[':
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(b, &blocks) != nil {
			return nil
		}
		if len(blocks) == 1 && blocks[0].Type == "text" {
			c.text = blocks[0].Text
			return nil
		}
		var out []byte
		for _, bl := range blocks {
			if bl.Type == "text" && bl.Text != "" {
				if len(out) > 0 {
					out = append(out, '\n')
				}
				out = append(out, bl.Text...)
			}
		}
		c.text = string(out)
	}
	return nil
}

// contentText returns the visible text of a transcript or chat message:
// the text blocks of an array content joined, a string content, or a
// top-level text field.
func contentText(msg json.RawMessage) string {
	if len(msg) == 0 || msg[0] != '{' {
		return ""
	}
	var m message
	if json.Unmarshal(msg, &m) != nil {
		return ""
	}
	return m.text()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
