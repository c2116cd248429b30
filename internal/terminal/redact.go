package terminal

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxResultChars is the most reply text a Turn result keeps.
const MaxResultChars = 4000

var redactPatterns = sync.OnceValue(func() []*regexp.Regexp {
	return []*regexp.Regexp{
		regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`),
		regexp.MustCompile(`(?i)\bBearer\s+[A-Za-z0-9._~+/=-]{8,}`),
		regexp.MustCompile(`(?i)(--token[= ])\S+`),
		regexp.MustCompile(`(?i)\b([A-Z0-9_]*(?:API_KEY|TOKEN|SECRET|PASSWORD|PASSWD|PRIVATE_KEY|ACCESS_KEY)[A-Z0-9_]*\s*[=:]\s*)("[^"]*"|'[^']*'|\S+)`),
		regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{12,}`),
		regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`),
		regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,}`),
		regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`),
		regexp.MustCompile(`([a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@`),
	}
})

// Redact masks secrets in s (bearer tokens, --token values, *_API_KEY= and
// similar assignments, sk-/gh*_/github_pat_/AKIA keys, PEM private keys,
// URL userinfo).
func Redact(s string) string {
	for i, re := range redactPatterns() {
		switch i {
		case 2, 3:
			s = re.ReplaceAllString(s, "${1}[REDACTED]")
		case 8:
			s = re.ReplaceAllString(s, "${1}[REDACTED]@")
		default:
			s = re.ReplaceAllString(s, "[REDACTED]")
		}
	}
	return s
}

// resultText redacts s and keeps at most MaxResultChars characters.
func resultText(s string) string {
	s = Redact(strings.TrimSpace(s))
	if utf8.RuneCountInString(s) <= MaxResultChars {
		return s
	}
	r := []rune(s)
	return string(r[:MaxResultChars])
}
