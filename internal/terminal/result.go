package terminal

import (
	"strings"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/redact"
	"github.com/clawconnect/clawconnect/internal/terminal/request"
)

// MaxResultChars is the most reply text a Turn result keeps.
const MaxResultChars = native.MaxText

// Redact masks secrets in s (the reference's patterns).
func Redact(s string) string { return redact.Redact(s) }

// resultText redacts s and keeps at most MaxResultChars characters.
func resultText(s string) string {
	out, _ := native.Clip(redact.Redact(strings.TrimSpace(s)))
	return out
}

func hashOf(s string) string { return request.Hash(s) }
