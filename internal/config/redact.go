package config

import (
	"net/url"
	"strings"
)

// Redacted replaces a secret wherever RedactURL and RedactText hide one.
const Redacted = "REDACTED"

// RedactURL returns raw with its credentials hidden, for printing or
// storing: the user information ("user:pass@") becomes "REDACTED@" and the
// value of every query or fragment parameter whose name looks secret
// (token, pass, secret, key, auth, sig, credential, …) becomes "REDACTED".
// Text that does not parse as a URL with a host is returned through
// RedactText.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || (u.Host == "" && u.User == nil) {
		return RedactText(raw)
	}
	var b strings.Builder
	b.WriteString(u.Scheme)
	b.WriteString("://")
	if u.User != nil {
		b.WriteString(Redacted + "@")
	}
	b.WriteString(u.Host)
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteString("?")
		b.WriteString(redactParams(u.RawQuery))
	}
	if u.Fragment != "" {
		b.WriteString("#")
		b.WriteString(redactParams(u.EscapedFragment()))
	}
	return b.String()
}

// redactParams hides the values of secret-looking parameters of a raw
// "a=b&c=d" list, keeping everything else byte for byte.
func redactParams(raw string) string {
	parts := strings.Split(raw, "&")
	for i, p := range parts {
		name, _, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if secretName(name) {
			parts[i] = p[:strings.IndexByte(p, '=')+1] + Redacted
		}
	}
	return strings.Join(parts, "&")
}

// secretName reports whether a parameter name looks like it carries a
// credential.
func secretName(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"token", "pass", "pwd", "secret", "key", "auth", "sig", "credential", "session"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// RedactText returns s with every URL inside it ("scheme://…", up to the
// next space, quote or bracket) passed through RedactURL, for error texts
// and messages that may quote a configured URL.
func RedactText(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		start := i
		for start > 0 && schemeByte(s[start-1]) {
			start--
		}
		end := i + 3
		for end < len(s) && !urlEnd(s[end]) {
			end++
		}
		if start == i { // "://" without a scheme: not a URL
			b.WriteString(s[:end])
			s = s[end:]
			continue
		}
		b.WriteString(s[:start])
		b.WriteString(redactOne(s[start:end]))
		s = s[end:]
	}
}

// redactOne redacts one URL found in text; a trailing punctuation mark
// belongs to the text, not to the URL.
func redactOne(u string) string {
	trail := ""
	for len(u) > 0 && strings.IndexByte(".,;:!)", u[len(u)-1]) >= 0 {
		trail = u[len(u)-1:] + trail
		u = u[:len(u)-1]
	}
	p, err := url.Parse(u)
	if err != nil || p.Host == "" && p.User == nil {
		// Unparsable: hide anything between "://" and an "@".
		if at := strings.LastIndexByte(u, '@'); at > strings.Index(u, "://") {
			return u[:strings.Index(u, "://")+3] + Redacted + u[at:] + trail
		}
		return u + trail
	}
	return RedactURL(u) + trail
}

func schemeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

func urlEnd(c byte) bool {
	return c <= ' ' || strings.IndexByte("\"'<>`{}|\\^[]", c) >= 0
}
