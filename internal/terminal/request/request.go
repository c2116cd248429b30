// Package request turns the text a caller wants to send to a terminal agent
// into the exact payload that is typed into the pane, and its hash, which the
// native readers match against the agent's session files to prove the agent
// accepted that request and no other.
//
// The payload reaches the pane as keystrokes (tmux send-keys -l, or a
// bracketed paste), and neither tmux nor the agents filter them: a control
// character is a key press (Ctrl-C, Backspace, Enter), ESC starts a sequence
// (even the paste-end marker), and a leading '/' or '!' switches the
// composer into a native command or a shell. Prepare therefore admits text
// only: printable characters, line breaks and tabs.
package request

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrSlashCommand is returned by Prepare when the first non-blank line of the
// request starts with a slash command ("/exit", "/model …", "/prompts:fix",
// "/plugin:deploy prod", or a '/' alone): an ordinary send may never invoke
// an agent's native commands.
var ErrSlashCommand = errors.New("request starts with a slash command")

// ErrEmpty is returned by Prepare when the request holds nothing but
// whitespace.
var ErrEmpty = errors.New("request is empty")

// ErrShellCommand is returned by Prepare when the request starts with '!':
// a leading '!' switches the composer of Claude Code 2.1.332 and of Codex
// 0.171 into shell mode, where Enter runs the rest as a shell command with
// no model call and no permission prompt.
var ErrShellCommand = errors.New("request starts with '!'")

// ErrControl is returned by Prepare when the request holds a character a
// terminal takes as a key or a control sequence instead of text: a C0
// control other than line feed and tab (so carriage return too), DEL, or a
// C1 control (U+0080–U+009F). The error names the character and its offset.
var ErrControl = errors.New("request holds a control character")

// ErrInvalidUTF8 is returned by Prepare when the request is not valid
// UTF-8: its stray bytes would reach the pane as they are, and a byte in
// 0x80–0x9f is a C1 control to an 8-bit terminal.
var ErrInvalidUTF8 = errors.New("request is not valid UTF-8")

// slashCommand returns the first word of line when an agent's composer
// reads line as a native command: a word that starts with '/' and holds no
// other '/' (a word ends at white space). Codex runs such a word as a
// built-in command or a custom prompt ("/prompts:name") and refuses any
// other as unrecognized instead of sending it; Claude Code's commands,
// skills and plugin commands ("/plugin:name") are named with more than
// letters; a '/' alone opens both agents' command menus, where Enter picks
// an entry. A word with a second '/' ("/usr/bin/foo", "//x") is a path to
// both agents, sent as text.
func slashCommand(line string) (string, bool) {
	if !strings.HasPrefix(line, "/") {
		return "", false
	}
	word := line
	if i := strings.IndexFunc(line, unicode.IsSpace); i >= 0 {
		word = line[:i]
	}
	return word, !strings.Contains(word[1:], "/")
}

// Payload is a prepared request.
type Payload struct {
	// Text is the exact text to type: the request with leading and
	// trailing white space removed. Codex 0.171 records a submitted
	// request trimmed at both ends (Claude Code records it as typed), so
	// only a trimmed payload is found again, byte for byte, in both
	// agents' session files.
	Text string
	// Hash is the lowercase hex SHA-256 of Text's UTF-8 bytes.
	Hash string
}

// Prepare checks text and returns its payload. It refuses text that is not
// valid UTF-8 (ErrInvalidUTF8) or holds a control character anywhere, even
// in the white space it would trim (ErrControl), an empty request
// (ErrEmpty), one whose first non-blank line starts with a slash command
// (ErrSlashCommand), and one that starts with '!' (ErrShellCommand). What it
// accepts holds no byte below 0x20 but line feed and tab, no DEL, no C1
// control and no invalid UTF-8.
func Prepare(text string) (Payload, error) {
	if err := checkText(text); err != nil {
		return Payload{}, fmt.Errorf("prepare request: %w", err)
	}
	payload := strings.TrimFunc(text, isSpace)
	if strings.TrimSpace(payload) == "" {
		return Payload{}, fmt.Errorf("prepare request: %w: send some text", ErrEmpty)
	}
	for line := range strings.Lines(payload) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if word, ok := slashCommand(line); ok {
			return Payload{}, fmt.Errorf("prepare request: %w (%q): the agent would read it as a native command (a first word that starts with '/' and holds no other '/'), not as a request; rephrase it or put text before it", ErrSlashCommand, word)
		}
		break
	}
	// The payload is trimmed, so its first character is the first of its
	// first non-blank line.
	if strings.HasPrefix(payload, "!") {
		return Payload{}, fmt.Errorf("prepare request: %w: the agent's composer runs what follows a leading '!' as a shell command, not as a request; rephrase it or put text before it", ErrShellCommand)
	}
	return Payload{Text: payload, Hash: Hash(payload)}, nil
}

// checkText refuses invalid UTF-8 and control characters, naming the first
// one and where it is.
func checkText(text string) error {
	chars := 0
	for i, r := range text {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(text[i:]); size == 1 {
				return fmt.Errorf("%w: byte 0x%02x at byte offset %d (character offset %d, both counted from 0) starts no UTF-8 character; send the text as UTF-8", ErrInvalidUTF8, text[i], i, chars)
			}
		}
		if control(r) {
			return fmt.Errorf("%w: %s at byte offset %d (character offset %d, both counted from 0): a terminal takes it as a key press or a control sequence, not as text; remove it (a line break is \\n, a tab \\t)", ErrControl, describe(r), i, chars)
		}
		chars++
	}
	return nil
}

// control reports a character a terminal does not take as text: C0
// controls but line feed and tab, DEL, and C1 controls.
func control(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f)
}

// c0Names are the names of the C0 controls and DEL, with the key that
// types them where a caller may know it better by that.
var c0Names = [...]string{
	"NUL", "SOH, Ctrl-A", "STX, Ctrl-B", "ETX, Ctrl-C", "EOT, Ctrl-D", "ENQ, Ctrl-E", "ACK, Ctrl-F", "BEL, Ctrl-G",
	"BS, Ctrl-H", "TAB", "LF", "VT, Ctrl-K", "FF, Ctrl-L", "CR, carriage return, Enter", "SO, Ctrl-N", "SI, Ctrl-O",
	"DLE, Ctrl-P", "DC1, Ctrl-Q", "DC2, Ctrl-R", "DC3, Ctrl-S", "DC4, Ctrl-T", "NAK, Ctrl-U", "SYN, Ctrl-V", "ETB, Ctrl-W",
	"CAN, Ctrl-X", "EM, Ctrl-Y", "SUB, Ctrl-Z", "ESC, escape", "FS", "GS", "RS", "US",
}

// describe names a control character: "U+0003 (ETX, Ctrl-C)".
func describe(r rune) string {
	switch {
	case r < 0x20:
		return fmt.Sprintf("U+%04X (%s)", r, c0Names[r])
	case r == 0x7f:
		return "U+007F (DEL, Backspace)"
	}
	return fmt.Sprintf("U+%04X (a C1 control)", r)
}

// Hash returns the lowercase hex SHA-256 of s.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// isSpace is JavaScript's trim set: Unicode white space and the BOM.
func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\v', '\f', '\r', 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}
