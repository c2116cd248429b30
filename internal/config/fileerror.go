package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// FileError is a problem in agents.json that stops it from loading: where
// it is, what is wrong and what the field should be.
type FileError struct {
	// Path is the file; empty when the bytes came from elsewhere
	// (ParseRegistry), in which case the text says "agents.json".
	Path string
	// Line and Column locate the problem, both from 1 (Column counts
	// bytes); 0 when unknown.
	Line, Column int
	// Msg is the reference's message, e.g. `agents.json: entry "a" missing
	// "password"`; callers that match texts compare it.
	Msg string
	// Detail says what was found and what the field should be, e.g.
	// `found "pasword" (did you mean "password"?); "password" is the
	// gateway's password or token, a non-empty string`. May be empty.
	Detail string
}

// Error is "<path>:<line>:<column>: <message>: <detail>".
func (e *FileError) Error() string {
	loc := e.Path
	if loc == "" {
		loc = "agents.json"
	}
	if e.Line > 0 {
		loc += fmt.Sprintf(":%d:%d", e.Line, e.Column)
	}
	s := loc + ": " + strings.TrimPrefix(e.Msg, "agents.json: ")
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// fieldWant says what each agents.json field should be.
var fieldWant = map[string]string{
	"agents":          `"agents" is a non-empty array of agents, each {"id": "...", "url": "ws://...", "password": "..."}`,
	"id":              `"id" names the agent, a non-empty string such as "assistant"`,
	"url":             `"url" is the gateway's WebSocket URL, a string such as "ws://127.0.0.1:18789"`,
	"password":        `"password" is the gateway's password or token, a non-empty string`,
	"openclawAgentId": `"openclawAgentId" is the agent id on the gateway, a string (default "main")`,
	"default":         `"default" is the id of one of the agents, a string`,
	"groups":          `"groups" is an object mapping a group name to an array of agent ids`,
	"groupLabels":     `"groupLabels" is an object mapping a group name to a label string`,
	"entry":           `each agent is an object such as {"id": "assistant", "url": "ws://127.0.0.1:18789", "password": "..."}`,
	"file":            `agents.json is one JSON object such as {"agents": [{"id": "assistant", "url": "ws://127.0.0.1:18789", "password": "..."}]}`,
}

// agentFields are the keys an agent entry may have.
var agentFields = []string{"id", "url", "password", "openclawAgentId", "emoji", "role", "description", "whenToUse", "qmdUrl", "qmdToken", "collections"}

// lineCol turns a byte offset of data into a 1-based line and column.
func lineCol(data []byte, off int64) (int, int) {
	if off < 0 || off > int64(len(data)) {
		return 0, 0
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// fileErr builds a FileError at byte offset off of data (-1: unknown).
func fileErr(data []byte, off int64, msg, detail string) *FileError {
	e := &FileError{Msg: msg, Detail: detail}
	if off >= 0 {
		e.Line, e.Column = lineCol(data, off)
	}
	return e
}

// skipSpace returns the offset of the first byte at or after off that is
// neither JSON whitespace nor a separator.
func skipSpace(data []byte, off int64) int64 {
	for off < int64(len(data)) && strings.IndexByte(" \t\r\n,:", data[off]) >= 0 {
		off++
	}
	return off
}

// agentOffsets returns the byte offset of each element of the top-level
// "agents" array, or nil when data is not shaped that way.
func agentOffsets(data []byte) []int64 {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		if key != "agents" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return nil
		}
		var offs []int64
		for dec.More() {
			offs = append(offs, skipSpace(data, dec.InputOffset()))
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
		}
		return offs
	}
	return nil
}

// keyOffset returns the offset of the key "name" inside the object that
// starts at off, or off when it is not found.
func keyOffset(data []byte, off int64, obj json.RawMessage, name string) int64 {
	q, _ := json.Marshal(name)
	if i := bytes.Index(obj, q); i >= 0 {
		return off + int64(i)
	}
	return off
}

// jsonKind names the JSON type of a raw value, for messages.
func jsonKind(raw json.RawMessage) string {
	v := bytes.TrimSpace(raw)
	if len(v) == 0 {
		return "empty"
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) == nil && strings.TrimSpace(s) == "" {
			return "an empty string"
		}
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// closest returns the candidate within edit distance 2 of name, or "".
func closest(name string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
