package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// This file holds the allocation-light decoder for the bulk of the gateway
// traffic: agent and chat event frames. It decodes exactly what
//
//	json.Unmarshal(data, &struct{ Payload runPayload `json:"payload"` }{})
//
// would, or gives up (ok false) so that the caller takes the encoding/json
// path. It gives up on anything it does not handle exactly like
// encoding/json: duplicate or case-folded keys, keys with escapes or
// non-ASCII bytes, type mismatches, deep nesting. Syntax is validated over
// the whole frame, skipped values included, because encoding/json rejects
// the whole frame on any syntax error. FuzzScanRunEvent pins the agreement.
//
// All strings without escapes are substrings of one copy of the frame, so
// a typical frame costs two allocations (the copy and the payload).

// maxScanDepth bounds the nesting the fast path follows; deeper frames take
// the encoding/json path.
const maxScanDepth = 64

// scanRunEvent decodes the payload of an agent or chat event frame. ok is
// false when the frame is not one the fast path handles exactly (or has no
// run id); the caller then decodes it with encoding/json.
func scanRunEvent(data []byte) (p *runPayload, ok bool) {
	s := scanner{b: data}
	s.ws()
	if s.peek() != '{' {
		return nil, false
	}
	s.s = string(data)
	var seenPayload bool
	if !s.object(func(key []byte) bool {
		if string(key) != "payload" {
			return s.skipUnknown(key, "payload")
		}
		if seenPayload {
			return false
		}
		seenPayload = true
		switch s.peek() {
		case '{':
			p = &runPayload{}
			return s.payload(p)
		default:
			return false // null or a type error: no run id either way
		}
	}) {
		return nil, false
	}
	s.ws()
	if s.i != len(s.b) || p == nil || p.RunID == "" {
		return nil, false
	}
	return p, true
}

// scanner walks one JSON document. b and s hold the same bytes; strings
// are cut from s so that they share one allocation.
type scanner struct {
	b     []byte
	s     string
	i     int
	depth int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) expect(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// object scans an object at s.i (after whitespace), calling field for each
// key with s.i at the value (whitespace skipped). field must consume the
// value and report whether scanning may go on.
func (s *scanner) object(field func(key []byte) bool) bool {
	if !s.expect('{') {
		return false
	}
	s.depth++
	if s.depth > maxScanDepth {
		return false
	}
	s.ws()
	if s.expect('}') {
		s.depth--
		return true
	}
	for {
		s.ws()
		start, end, plain, ok := s.str()
		if !ok {
			return false
		}
		s.ws()
		if !s.expect(':') {
			return false
		}
		s.ws()
		key := s.b[start:end]
		if !plain {
			// An escaped or non-ASCII key may fold onto a known one; the
			// value must still be well-formed, but let encoding/json decide.
			return false
		}
		if !field(key) {
			return false
		}
		s.ws()
		if s.expect(',') {
			continue
		}
		if s.expect('}') {
			s.depth--
			return true
		}
		return false
	}
}

// skipUnknown skips the value of a key that is not a field. It fails when
// the key matches one of known case-insensitively (encoding/json would
// decode it into that field).
func (s *scanner) skipUnknown(key []byte, known ...string) bool {
	for _, k := range known {
		if bytes.EqualFold(key, []byte(k)) {
			return false
		}
	}
	_, _, ok := s.skip()
	return ok
}

// str scans a string at s.i and returns the bounds of its contents. plain
// reports that the contents have no escapes and only ASCII bytes.
func (s *scanner) str() (start, end int, plain, ok bool) {
	if !s.expect('"') {
		return 0, 0, false, false
	}
	start = s.i
	plain = true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			end = s.i
			s.i++
			return start, end, plain, true
		case c == '\\':
			plain = false
			s.i++
			if s.i >= len(s.b) {
				return 0, 0, false, false
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+5 > len(s.b) {
					return 0, 0, false, false
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return 0, 0, false, false
					}
				}
				s.i += 5
			default:
				return 0, 0, false, false
			}
		case c < 0x20:
			return 0, 0, false, false
		default:
			if c >= utf8.RuneSelf {
				plain = false
			}
			s.i++
		}
	}
	return 0, 0, false, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// strValue scans a string value and returns it decoded.
func (s *scanner) strValue() (string, bool) {
	start, end, plain, ok := s.str()
	if !ok {
		return "", false
	}
	if plain || (bytes.IndexByte(s.b[start:end], '\\') < 0 && utf8.Valid(s.b[start:end])) {
		return s.s[start:end], true
	}
	// Escapes or invalid UTF-8: let encoding/json apply its exact rules.
	var v string
	if json.Unmarshal(s.b[start-1:end+1], &v) != nil {
		return "", false
	}
	return v, true
}

// literal scans true, false or null.
func (s *scanner) literal(lit string) bool {
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// number scans a JSON number.
func (s *scanner) number() bool {
	s.expect('-')
	switch {
	case s.expect('0'):
	case s.i < len(s.b) && '1' <= s.b[s.i] && s.b[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.expect('.') {
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if !s.expect('+') {
			s.expect('-')
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// skip scans any value and returns its bounds.
func (s *scanner) skip() (start, end int, ok bool) {
	start = s.i
	switch s.peek() {
	case '{':
		ok = s.object(func([]byte) bool { _, _, ok := s.skip(); return ok })
	case '[':
		ok = s.array(func() bool { _, _, ok := s.skip(); return ok })
	case '"':
		_, _, _, ok = s.str()
	case 't':
		ok = s.literal("true")
	case 'f':
		ok = s.literal("false")
	case 'n':
		ok = s.literal("null")
	default:
		ok = s.number()
	}
	return start, s.i, ok
}

// array scans an array, calling elem with s.i at each element.
func (s *scanner) array(elem func() bool) bool {
	if !s.expect('[') {
		return false
	}
	s.depth++
	if s.depth > maxScanDepth {
		return false
	}
	s.ws()
	if s.expect(']') {
		s.depth--
		return true
	}
	for {
		s.ws()
		if !elem() {
			return false
		}
		s.ws()
		if s.expect(',') {
			continue
		}
		if s.expect(']') {
			s.depth--
			return true
		}
		return false
	}
}

// stringField decodes a string field: a string, or null (no change).
func (s *scanner) stringField(dst *string) bool {
	if s.peek() == 'n' {
		return s.literal("null")
	}
	if s.peek() != '"' {
		return false
	}
	v, ok := s.strValue()
	*dst = v
	return ok
}

// intField decodes an int64 field: an integer literal, or null.
func (s *scanner) intField(dst *int64) bool {
	if s.peek() == 'n' {
		return s.literal("null")
	}
	start := s.i
	if !s.number() {
		return false
	}
	v, err := strconv.ParseInt(s.s[start:s.i], 10, 64)
	*dst = v
	return err == nil
}

// boolField decodes a bool field: true, false or null.
func (s *scanner) boolField(dst *bool) bool {
	switch s.peek() {
	case 't':
		*dst = true
		return s.literal("true")
	case 'f':
		*dst = false
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return false
}

// rawField decodes a json.RawMessage field: the value's bytes, copied.
func (s *scanner) rawField(dst *json.RawMessage) bool {
	start, end, ok := s.skip()
	*dst = bytes.Clone(s.b[start:end])
	return ok
}

// fieldSet tracks the keys seen in one object: duplicates fail the fast
// path (encoding/json merges or overwrites them).
type fieldSet uint32

func (f *fieldSet) first(bit int) bool {
	if *f&(1<<bit) != 0 {
		return false
	}
	*f |= 1 << bit
	return true
}

var payloadKeys = []string{"runId", "sessionKey", "seq", "state", "phase", "stream", "data", "message", "errorMessage", "stopReason"}

func (s *scanner) payload(p *runPayload) bool {
	var seen fieldSet
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "runId":
			return seen.first(0) && s.stringField(&p.RunID)
		case "sessionKey":
			return seen.first(1) && s.stringField(&p.SessionKey)
		case "seq":
			return seen.first(2) && s.intField(&p.Seq)
		case "state":
			return seen.first(3) && s.stringField(&p.State)
		case "phase":
			return seen.first(4) && s.stringField(&p.Phase)
		case "stream":
			return seen.first(5) && s.stringField(&p.Stream)
		case "data":
			if !seen.first(6) {
				return false
			}
			switch s.peek() {
			case '{':
				return s.agentData(&p.Data)
			case 'n':
				return s.literal("null")
			}
			return false
		case "message":
			if !seen.first(7) {
				return false
			}
			switch s.peek() {
			case '{':
				p.Message = &message{}
				return s.message(p.Message)
			case 'n':
				return s.literal("null")
			}
			return false
		case "errorMessage":
			return seen.first(8) && s.stringField(&p.ErrorMessage)
		case "stopReason":
			return seen.first(9) && s.stringField(&p.StopReason)
		}
		return s.skipUnknown(key, payloadKeys...)
	})
}

var dataKeys = []string{"text", "phase", "name", "toolCallId", "args", "isError", "aborted", "stopReason", "error", "terminalReply"}

func (s *scanner) agentData(d *agentData) bool {
	var seen fieldSet
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "text":
			return seen.first(0) && s.stringField(&d.Text)
		case "phase":
			return seen.first(1) && s.stringField(&d.Phase)
		case "name":
			return seen.first(2) && s.stringField(&d.Name)
		case "toolCallId":
			return seen.first(3) && s.stringField(&d.ToolCallID)
		case "args":
			return seen.first(4) && s.rawField(&d.Args)
		case "isError":
			return seen.first(5) && s.boolField(&d.IsError)
		case "aborted":
			return seen.first(6) && s.boolField(&d.Aborted)
		case "stopReason":
			return seen.first(7) && s.stringField(&d.StopReason)
		case "error":
			return seen.first(8) && s.rawField(&d.Error)
		case "terminalReply":
			if !seen.first(9) {
				return false
			}
			switch s.peek() {
			case '{':
				d.TerminalReply = &struct {
					Text string `json:"text"`
				}{}
				return s.textOnly(&d.TerminalReply.Text)
			case 'n':
				return s.literal("null")
			}
			return false
		}
		return s.skipUnknown(key, dataKeys...)
	})
}

// textOnly decodes an object whose only field is text.
func (s *scanner) textOnly(dst *string) bool {
	var seen fieldSet
	return s.object(func(key []byte) bool {
		if string(key) == "text" {
			return seen.first(0) && s.stringField(dst)
		}
		return s.skipUnknown(key, "text")
	})
}

func (s *scanner) message(m *message) bool {
	var seen fieldSet
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			return seen.first(0) && s.content(&m.Content)
		case "text":
			return seen.first(1) && s.stringField(&m.Text)
		}
		return s.skipUnknown(key, "content", "text")
	})
}

// content decodes a message content like content.UnmarshalJSON: a string,
// or the non-empty text blocks of an array joined with newlines; any other
// shape, or an array that does not decode as blocks, is "".
func (s *scanner) content(c *content) bool {
	switch s.peek() {
	case '"':
		v, ok := s.strValue()
		c.text = v
		return ok
	case '[':
	default:
		_, _, ok := s.skip()
		return ok
	}
	var text string
	bad := false // an element that does not decode as a block
	ok := s.array(func() bool {
		switch s.peek() {
		case 'n':
			return s.literal("null")
		case '{':
		default:
			bad = true
			_, _, ok := s.skip()
			return ok
		}
		var typ, txt string
		var seen fieldSet
		if !s.object(func(key []byte) bool {
			switch string(key) {
			case "type", "text":
				bit, dst := 0, &typ
				if key[1] == 'e' {
					bit, dst = 1, &txt
				}
				if !seen.first(bit) {
					return false
				}
				switch s.peek() {
				case '"', 'n':
					return s.stringField(dst)
				}
				bad = true
				_, _, ok := s.skip()
				return ok
			}
			return s.skipUnknown(key, "type", "text")
		}) {
			return false
		}
		if typ == "text" && txt != "" {
			if text == "" {
				text = txt
			} else {
				text += "\n" + txt
			}
		}
		return true
	})
	if !bad {
		c.text = text
	}
	return ok
}
