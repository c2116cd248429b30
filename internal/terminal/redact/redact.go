// Package redact removes secrets from text that leaves a terminal agent's
// screen or session files (excerpts, approval commands, completion text)
// before it is stored or delivered.
package redact

import (
	"regexp"
	"strings"
	"sync"
)

// Mask replaces every secret Redact finds.
const Mask = "[REDACTED]"

// rule is one secret pattern. When keep > 0, the first keep submatches are
// kept and only the rest of the match is masked.
type rule struct {
	re     *regexp.Regexp
	keep   int
	suffix string // written after the mask
}

// rules are applied in order; earlier rules see the original text. They
// are compiled at the first Redact, not when a process starts.
var rules = sync.OnceValue(func() []rule {
	return []rule{
		// PEM private keys, whole block (RSA, EC, OPENSSH, ENCRYPTED, plain).
		{re: regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)},
		// Authorization: Bearer <token>.
		{re: regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]+`), keep: 1},
		// --token <value> and --token=<value> (also --api-token, --auth-token).
		{re: regexp.MustCompile(`(?i)(--[a-z0-9-]*token(?:=|\s+))("[^"]*"|'[^']*'|\S+)`), keep: 1},
		// NAME=value where NAME contains API_KEY, TOKEN, SECRET, PASSWORD,
		// PASSWD, PRIVATE_KEY or ACCESS_KEY (also quoted values and NAME: value
		// in JSON-ish text).
		{re: regexp.MustCompile(`(?i)(\b[A-Z0-9_]*(?:API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|PRIVATE_?KEY|ACCESS_?KEY)[A-Z0-9_]*["']?\s*[=:]\s*)("[^"\n]*"|'[^'\n]*'|[^\s"',;&|]+)`), keep: 1},
		// OpenAI/Anthropic style keys: sk-… with at least 12 characters after sk-.
		{re: regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{12,}`)},
		// GitHub tokens.
		{re: regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{16,}`)},
		{re: regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,}`)},
		// AWS access key ids.
		{re: regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`)},
		// URL userinfo: scheme://user:password@host keeps scheme and host.
		{re: regexp.MustCompile(`(\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s:@]+(?::[^/\s@]*)?@`), keep: 1, suffix: "@"},
	}
})

// Redact returns s with every secret it recognises replaced by Mask: PEM
// private keys, bearer tokens, --token values, NAME=value assignments whose
// NAME looks like a key, token, secret or password, sk-… keys, GitHub
// tokens, AWS access key ids and URL userinfo. It is safe for concurrent
// use and leaves text without secrets unchanged.
func Redact(s string) string {
	for _, r := range rules() {
		if !r.re.MatchString(s) {
			continue
		}
		if r.keep == 0 && r.suffix == "" {
			s = r.re.ReplaceAllLiteralString(s, Mask)
			continue
		}
		s = r.re.ReplaceAllStringFunc(s, func(m string) string {
			sub := r.re.FindStringSubmatch(m)
			var b strings.Builder
			for i := 1; i <= r.keep && i < len(sub); i++ {
				b.WriteString(sub[i])
			}
			b.WriteString(Mask)
			b.WriteString(r.suffix)
			return b.String()
		})
	}
	return s
}
