package gateway

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/clawconnect/clawconnect/internal/jsonscan"
)

// This file holds the allocation-light decoder for the bulk of the gateway
// traffic: agent and chat event frames. It decodes exactly what
//
//	json.Unmarshal(data, &struct{ Payload runPayload `json:"payload"` }{})
//
// would, or gives up (ok false) so that the caller takes the encoding/json
// path. It walks the frame with jsonscan (the scanner the runtime line
// decoders use), which checks the syntax of the whole frame, skipped values
// included, as encoding/json rejects the whole frame on any syntax error.
// On top of that it gives up on anything it does not decode exactly like
// encoding/json: duplicate or case-folded keys, keys with escapes or
// non-ASCII bytes, type mismatches. FuzzScanRunEvent pins the agreement.
//
// All strings without escapes are substrings of one copy of the frame, so
// a typical frame costs two allocations (the copy and the payload).

// scanRunEvent decodes the payload of an agent or chat event frame. ok is
// false when the frame is not one the fast path handles exactly (or has no
// run id); the caller then decodes it with encoding/json.
func scanRunEvent(data []byte) (p *runPayload, ok bool) {
	d := frameDecoder{b: data, s: string(data)}
	var seenPayload bool
	if !d.object(data, func(key, val []byte) bool {
		if string(key) != "payload" {
			return unknown(key, "payload")
		}
		if seenPayload || val[0] != '{' {
			return false // a duplicate, or null or a type error: no run id either way
		}
		seenPayload = true
		p = &runPayload{}
		return d.payload(val, p)
	}) {
		return nil, false
	}
	if p == nil || p.RunID == "" {
		return nil, false
	}
	return p, true
}

// frameDecoder decodes values of one frame. b and s hold the same bytes;
// the values jsonscan hands out are subslices of b, and strings are cut
// from s at the same offsets so that they share one allocation.
type frameDecoder struct {
	b []byte
	s string
}

// sub returns the bytes of val, a subslice of d.b, as a substring of d.s.
// A subslice reaches to the end of its backing array, so the difference of
// the capacities is its offset.
func (d *frameDecoder) sub(val []byte) string {
	off := cap(d.b) - cap(val)
	return d.s[off : off+len(val)]
}

// object walks the object val, calling field for each member whose key is
// plain (no escapes, ASCII only: anything else may fold onto a known key,
// so encoding/json decides). It reports whether the object was well-formed
// and every field call succeeded.
func (d *frameDecoder) object(val []byte, field func(key, val []byte) bool) bool {
	ok := true
	err := jsonscan.Object(val, func(key, v []byte) bool {
		ok = plain(key) && field(key, v)
		return ok
	})
	return ok && err == nil
}

// plain reports whether the contents of a string have no escapes and only
// ASCII bytes.
func plain(b []byte) bool {
	for _, c := range b {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// unknown accepts the member of a key that is not a field, unless the key
// matches one of known case-insensitively (encoding/json would decode it
// into that field).
func unknown(key []byte, known ...string) bool {
	for _, k := range known {
		if bytes.EqualFold(key, []byte(k)) {
			return false
		}
	}
	return true
}

// str decodes the string value val.
func (d *frameDecoder) str(val []byte) (string, bool) {
	inner := val[1 : len(val)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return d.sub(inner), true
	}
	// Escapes or invalid UTF-8: let encoding/json apply its exact rules.
	var v string
	if json.Unmarshal(val, &v) != nil {
		return "", false
	}
	return v, true
}

// stringField decodes a string field: a string, or null (no change).
func (d *frameDecoder) stringField(val []byte, dst *string) bool {
	switch val[0] {
	case 'n':
		return true
	case '"':
		v, ok := d.str(val)
		*dst = v
		return ok
	}
	return false
}

// intField decodes an int64 field: an integer literal, or null.
func (d *frameDecoder) intField(val []byte, dst *int64) bool {
	if val[0] == 'n' {
		return true
	}
	if val[0] != '-' && (val[0] < '0' || val[0] > '9') {
		return false
	}
	v, err := strconv.ParseInt(d.sub(val), 10, 64)
	*dst = v
	return err == nil
}

// boolField decodes a bool field: true, false or null.
func boolField(val []byte, dst *bool) bool {
	switch string(val) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	case "null":
	default:
		return false
	}
	return true
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

func (d *frameDecoder) payload(val []byte, p *runPayload) bool {
	var seen fieldSet
	return d.object(val, func(key, v []byte) bool {
		switch string(key) {
		case "runId":
			return seen.first(0) && d.stringField(v, &p.RunID)
		case "sessionKey":
			return seen.first(1) && d.stringField(v, &p.SessionKey)
		case "seq":
			return seen.first(2) && d.intField(v, &p.Seq)
		case "state":
			return seen.first(3) && d.stringField(v, &p.State)
		case "phase":
			return seen.first(4) && d.stringField(v, &p.Phase)
		case "stream":
			return seen.first(5) && d.stringField(v, &p.Stream)
		case "data":
			if !seen.first(6) {
				return false
			}
			switch v[0] {
			case '{':
				return d.agentData(v, &p.Data)
			case 'n':
				return true
			}
			return false
		case "message":
			if !seen.first(7) {
				return false
			}
			switch v[0] {
			case '{':
				p.Message = &message{}
				return d.message(v, p.Message)
			case 'n':
				return true
			}
			return false
		case "errorMessage":
			return seen.first(8) && d.stringField(v, &p.ErrorMessage)
		case "stopReason":
			return seen.first(9) && d.stringField(v, &p.StopReason)
		}
		return unknown(key, payloadKeys...)
	})
}

var dataKeys = []string{"text", "phase", "name", "toolCallId", "args", "isError", "aborted", "stopReason", "error", "terminalReply"}

func (d *frameDecoder) agentData(val []byte, a *agentData) bool {
	var seen fieldSet
	return d.object(val, func(key, v []byte) bool {
		switch string(key) {
		case "text":
			return seen.first(0) && d.stringField(v, &a.Text)
		case "phase":
			return seen.first(1) && d.stringField(v, &a.Phase)
		case "name":
			return seen.first(2) && d.stringField(v, &a.Name)
		case "toolCallId":
			return seen.first(3) && d.stringField(v, &a.ToolCallID)
		case "args":
			// A json.RawMessage field holds the value's bytes, copied.
			a.Args = bytes.Clone(v)
			return seen.first(4)
		case "isError":
			return seen.first(5) && boolField(v, &a.IsError)
		case "aborted":
			return seen.first(6) && boolField(v, &a.Aborted)
		case "stopReason":
			return seen.first(7) && d.stringField(v, &a.StopReason)
		case "error":
			a.Error = bytes.Clone(v)
			return seen.first(8)
		case "terminalReply":
			if !seen.first(9) {
				return false
			}
			switch v[0] {
			case '{':
				a.TerminalReply = &struct {
					Text string `json:"text"`
				}{}
				return d.textOnly(v, &a.TerminalReply.Text)
			case 'n':
				return true
			}
			return false
		}
		return unknown(key, dataKeys...)
	})
}

// textOnly decodes an object whose only field is text.
func (d *frameDecoder) textOnly(val []byte, dst *string) bool {
	var seen fieldSet
	return d.object(val, func(key, v []byte) bool {
		if string(key) == "text" {
			return seen.first(0) && d.stringField(v, dst)
		}
		return unknown(key, "text")
	})
}

func (d *frameDecoder) message(val []byte, m *message) bool {
	var seen fieldSet
	return d.object(val, func(key, v []byte) bool {
		switch string(key) {
		case "content":
			return seen.first(0) && d.content(v, &m.Content)
		case "text":
			return seen.first(1) && d.stringField(v, &m.Text)
		}
		return unknown(key, "content", "text")
	})
}

// content decodes a message content like content.UnmarshalJSON: a string,
// or the non-empty text blocks of an array joined with newlines; any other
// shape, or an array that does not decode as blocks, is "".
func (d *frameDecoder) content(val []byte, c *content) bool {
	switch val[0] {
	case '"':
		v, ok := d.str(val)
		c.text = v
		return ok
	case '[':
	default:
		return true
	}
	var text string
	bad := false // an element that does not decode as a block
	ok := true
	err := jsonscan.Array(val, func(elem []byte) bool {
		switch elem[0] {
		case 'n':
			return true
		case '{':
		default:
			bad = true
			return true
		}
		var typ, txt string
		var seen fieldSet
		ok = d.object(elem, func(key, v []byte) bool {
			switch string(key) {
			case "type", "text":
				bit, dst := 0, &typ
				if key[1] == 'e' {
					bit, dst = 1, &txt
				}
				if !seen.first(bit) {
					return false
				}
				switch v[0] {
				case '"', 'n':
					return d.stringField(v, dst)
				}
				bad = true
				return true
			}
			return unknown(key, "type", "text")
		})
		if ok && typ == "text" && txt != "" {
			if text == "" {
				text = txt
			} else {
				text += "\n" + txt
			}
		}
		return ok
	})
	if !bad {
		c.text = text
	}
	return ok && err == nil
}
