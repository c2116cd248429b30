// Package jsonscan walks JSON objects and arrays without reflection, handing
// out the raw bytes of each value, so that the hot decoders of outside input
// (the runtime adapters' line decoders and the gateway client's run-event
// frames) read the few fields they need at memory speed. Values are checked
// structurally as they are skipped; a malformed document is an error. It is
// the module's one hand-written JSON scanner.
package jsonscan

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// ErrSyntax reports malformed JSON.
var ErrSyntax = errors.New("jsonscan: malformed JSON")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// Object calls fn with each member of the JSON object b: the key (raw, as
// it appears between the quotes) and the value's raw bytes. fn returning
// false stops the walk early. Only objects are accepted.
func Object(b []byte, fn func(key, val []byte) bool) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ErrSyntax
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return trailing(b, i+1)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return ErrSyntax
		}
		end, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return ErrSyntax
		}
		i = skipSpace(b, i+1)
		vend, err := skipValue(b, i, 0)
		if err != nil {
			return err
		}
		if !fn(key, b[i:vend]) {
			return nil
		}
		i = skipSpace(b, vend)
		if i >= len(b) {
			return ErrSyntax
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return trailing(b, i+1)
		default:
			return ErrSyntax
		}
	}
}

// Array calls fn with the raw bytes of each element of the JSON array b.
// fn returning false stops the walk early.
func Array(b []byte, fn func(elem []byte) bool) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return ErrSyntax
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return trailing(b, i+1)
	}
	for {
		end, err := skipValue(b, i, 0)
		if err != nil {
			return err
		}
		if !fn(b[i:end]) {
			return nil
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return ErrSyntax
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return trailing(b, i+1)
		default:
			return ErrSyntax
		}
	}
}

func trailing(b []byte, i int) error {
	if skipSpace(b, i) != len(b) {
		return ErrSyntax
	}
	return nil
}

const maxDepth = 512

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i, depth int) (int, error) {
	if depth > maxDepth {
		return 0, ErrSyntax
	}
	if i >= len(b) {
		return 0, ErrSyntax
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{':
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return 0, ErrSyntax
			}
			end, err := skipString(b, i)
			if err != nil {
				return 0, err
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return 0, ErrSyntax
			}
			if i, err = skipValue(b, skipSpace(b, i+1), depth+1); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, ErrSyntax
			}
			if b[i] == '}' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, ErrSyntax
			}
			i = skipSpace(b, i+1)
		}
	case c == '[':
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValue(b, i, depth+1); err != nil {
				return 0, err
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, ErrSyntax
			}
			if b[i] == ']' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return 0, ErrSyntax
			}
			i = skipSpace(b, i+1)
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	default:
		return 0, ErrSyntax
	}
}

func literal(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return 0, ErrSyntax
	}
	return i + len(lit), nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// skipNumber returns the index just past the number at b[i], following the
// JSON grammar exactly.
func skipNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return 0, ErrSyntax
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, ErrSyntax
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, ErrSyntax
		}
		i = j
	}
	return i, nil
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// plainInString marks the bytes a string holds as they are: not its end,
// not an escape and not a control character.
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipString returns the index just past the string starting at b[i].
func skipString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		for j < len(b) && plainInString[b[j]] {
			j++
		}
		if j >= len(b) {
			return 0, ErrSyntax
		}
		switch b[j] {
		case '"':
			return j + 1, nil
		case '\\':
			j++
			if j >= len(b) {
				return 0, ErrSyntax
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-j < 5 || !isHex(b[j+1]) || !isHex(b[j+2]) || !isHex(b[j+3]) || !isHex(b[j+4]) {
					return 0, ErrSyntax
				}
				j += 4
			default:
				return 0, ErrSyntax
			}
			j++
		default: // a control character
			return 0, ErrSyntax
		}
	}
}

// String decodes a raw JSON string value; ok is false for anything else
// (null included).
func String(val []byte) (s string, ok bool) {
	if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
		return "", false
	}
	inner := val[1 : len(val)-1]
	plain := true
	for _, c := range inner {
		if c == '\\' || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(inner), true
	}
	if err := json.Unmarshal(val, &s); err != nil {
		return "", false
	}
	return s, true
}

// Bool decodes a raw JSON boolean; anything else is false.
func Bool(val []byte) bool { return string(val) == "true" }

// Int decodes a raw JSON integer; ok is false for anything else.
func Int(val []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(val), 10, 64)
	return n, err == nil
}

// Float decodes a raw JSON number; nil for anything else (null included).
func Float(val []byte) *float64 {
	if len(val) == 0 || !(val[0] == '-' || val[0] >= '0' && val[0] <= '9') {
		return nil
	}
	f, err := strconv.ParseFloat(string(val), 64)
	if err != nil {
		return nil
	}
	return &f
}

// IsNull reports whether val is absent or the JSON null.
func IsNull(val []byte) bool { return len(val) == 0 || string(val) == "null" }

// Is reports whether the raw JSON value val is the string s, for an s
// without characters JSON escapes. It does not allocate.
func Is(val []byte, s string) bool {
	return len(val) == len(s)+2 && val[0] == '"' && val[len(val)-1] == '"' && string(val[1:len(val)-1]) == s
}
