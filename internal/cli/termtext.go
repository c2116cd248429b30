package cli

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// termSafe returns s with every character that could drive a terminal
// written out visibly instead: C0 controls other than newline and tab
// (ESC starts the sequences that retitle a window or clear the screen),
// DEL, C1 controls, bidirectional overrides and invalid UTF-8 become
// \xNN or \uNNNN. Agent replies, log entries and errors pass through it
// before they are printed as text (JSON output escapes them already).
func termSafe(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// unsafeRune reports whether r can change a terminal's state.
func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
