// Package request turns the text a caller wants to send to a terminal agent
// into the exact payload that is typed into the pane, and its hash, which the
// native readers match against the agent's session files to prove the agent
// accepted that request and no other.
package request

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrSlashCommand is returned by Prepare when the first non-blank line of the
// request starts with a slash command ("/exit", "/model …"): an ordinary send
// may never invoke an agent's native commands.
var ErrSlashCommand = errors.New("request starts with a slash command")

// ErrEmpty is returned by Prepare when the request holds nothing but
// whitespace.
var ErrEmpty = errors.New("request is empty")

// slashCommand matches a native command at the start of a line, compared
// case-insensitively: a slash, a letter, then letters, digits, '_' or '-',
// then whitespace or the end of the line.
var slashCommand = regexp.MustCompile(`(?i)^/[a-z][a-z0-9_-]*(\s|$)`)

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

// Prepare checks text and returns its payload. It refuses an empty request
// (ErrEmpty) and one whose first non-blank line starts with a slash command
// (ErrSlashCommand).
func Prepare(text string) (Payload, error) {
	payload := strings.TrimFunc(text, isSpace)
	if strings.TrimSpace(payload) == "" {
		return Payload{}, fmt.Errorf("prepare request: %w: send some text", ErrEmpty)
	}
	for line := range strings.Lines(payload) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if m := slashCommand.FindString(line); m != "" {
			return Payload{}, fmt.Errorf("prepare request: %w (%q): native commands cannot be sent as a request; rephrase it or put text before it", ErrSlashCommand, strings.TrimSpace(m))
		}
		break
	}
	return Payload{Text: payload, Hash: Hash(payload)}, nil
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
