// Package ids makes the ids of terminal records (Sessions, bindings,
// transitions) and refuses a malformed one a caller gives (a Turn, watch,
// transition or Session id, a terminal_id, an OpenClaw session key) with an
// error that says where a good one is found.
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agentproc"
	"github.com/clawconnect/clawconnect/termapi"
)

// Hex returns n random bytes in hex.
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// UUID returns a random (version 4) UUID.
func UUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Session returns "session-YYYYMMDDHHMMSS-<8 hex>" (UTC), the form callbacks carry.
func Session(now time.Time) string {
	return "session-" + now.UTC().Format("20060102150405") + "-" + Hex(4)
}

// Turn returns "turn-YYYYMMDDTHHMMSS-<8 hex>" (UTC).
func Turn(now time.Time) string {
	return "turn-" + now.UTC().Format("20060102T150405") + "-" + Hex(4)
}

// Binding returns a new binding id.
func Binding() string { return "binding-" + UUID() }

// Message returns a new message id.
func Message() string { return "msg-" + UUID() }

// Check refuses an id that is empty, lacks prefix, or holds characters no
// generated id has, so a typo is reported as malformed rather than unknown.
func Check(kind, prefix, id string) error {
	if len(id) > 100 {
		return fmt.Errorf("%w: %s %q is malformed: it is longer than 100 characters (%s)",
			termapi.ErrBadInput, kind, shortID(id), whereFrom(prefix))
	}
	if !strings.HasPrefix(id, prefix) || len(id) == len(prefix) {
		return fmt.Errorf("%w: %s %q is malformed: it must start with %q (%s)",
			termapi.ErrBadInput, kind, id, prefix, whereFrom(prefix))
	}
	for _, c := range id[len(prefix):] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%w: %s %q is malformed: unexpected character %q", termapi.ErrBadInput, kind, id, c)
		}
	}
	return nil
}

// whereFrom says where a caller finds a valid id of the kind prefix names.
func whereFrom(prefix string) string {
	switch prefix {
	case "watch-":
		return "copy it from what `clawconnect terminal watch` printed"
	case "transition-":
		return "copy it from what new-thread, clear-thread or resume-thread printed, or from `clawconnect terminal list`"
	}
	return "copy it from `clawconnect terminal list` or a send result"
}

// maxTerminalID bounds a terminal_id: tmux session names are short, and
// an id is echoed in errors and looked up in every tmux server.
const maxTerminalID = 512

// CheckTerminal refuses a terminal_id that does not parse.
func CheckTerminal(id string) error {
	if len(id) > maxTerminalID {
		return fmt.Errorf("%w: terminal id %q is malformed: it is longer than %d characters; copy it from `clawconnect terminal list`",
			termapi.ErrBadInput, shortID(id), maxTerminalID)
	}
	if _, err := agentproc.ParseTerminalID(id); err != nil {
		return fmt.Errorf("%w: terminal id %q is malformed (%v); copy it from `clawconnect terminal list`", termapi.ErrBadInput, id, err)
	}
	return nil
}

// shortID is id cut to 40 bytes for an error message.
func shortID(id string) string {
	if len(id) <= 40 {
		return id
	}
	return strings.ToValidUTF8(id[:40], "") + "…"
}

// CheckSessionKey refuses an OpenClaw session key given as a callback
// origin that no OpenClaw session has.
func CheckSessionKey(k string) error {
	if len(k) > 512 {
		return fmt.Errorf("%w: the origin session key is longer than 512 bytes", termapi.ErrBadInput)
	}
	for _, r := range k {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%w: the origin session key %q contains a space or control character", termapi.ErrBadInput, k)
		}
	}
	if strings.HasPrefix(k, "-") {
		// OpenClaw keys never start with '-': a flag was taken as the key.
		return fmt.Errorf("%w: the origin session key %q starts with '-'; a flag was probably taken for it (give the key right after --origin-session)", termapi.ErrBadInput, k)
	}
	return nil
}
