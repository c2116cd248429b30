package agents

import (
	"regexp"
	"strings"
	"sync"

	"github.com/clawconnect/clawconnect/internal/terminal/redact"
)

// StatusCard is what an agent's own /status card shows, parsed into
// fields. Values are redacted; fields that name credentials or endpoints
// are left out.
type StatusCard struct {
	Version   string            `json:"version"`
	Model     string            `json:"model"`
	SessionID string            `json:"native_thread_id"`
	Workspace string            `json:"workspace"`
	Fields    map[string]string `json:"fields"`
}

var cardRow = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([A-Za-z][A-Za-z0-9 ._()/-]{0,40}):\s+(\S.*)$`)
})

// AddRow adds the field of a card row, a trimmed "Name: value" line, and
// reports whether line is one. The first row of a name wins; a row that
// names credentials or where they go is left out; the value is redacted
// and stripped of terminal controls.
func (c *StatusCard) AddRow(line string) bool {
	m := cardRow().FindStringSubmatch(line)
	if m == nil {
		return false
	}
	name := strings.TrimSpace(m[1])
	if hiddenField(name) {
		return true
	}
	if c.Fields == nil {
		c.Fields = map[string]string{}
	}
	if _, dup := c.Fields[name]; dup {
		return true
	}
	v := strings.Join(strings.Fields(m[2]), " ")
	c.Fields[name] = redact.Redact(termSafe(v))
	return true
}

// Complete reports whether the card names a version and a native thread
// id of the right shape.
func (c StatusCard) Complete() bool { return c.Version != "" && ValidThreadID(c.SessionID) }

// FirstWord is the first word of s ("" for none): a card's Model row may
// carry settings after the model's name.
func FirstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return ""
}

// hiddenField reports a card row that names credentials or where they go.
func hiddenField(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "api key", "token", "base url", "peer address", "key", "password", "passwd", "secret", "credential", "cookie"} {
		if strings.Contains(n, w) && n != "token usage" {
			return true
		}
	}
	return false
}

// termSafe drops control characters a card value could carry.
func termSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
}
