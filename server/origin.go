package server

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// forbiddenOriginBody answers a cross-origin request from an origin that is
// not allowed.
const forbiddenOriginBody = `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Forbidden: cross-origin request refused; the operator can allow the page's origin with CLAWCONNECT_ALLOWED_ORIGINS"}}`

// originPolicy decides which browser origins may call /mcp. A request
// without an Origin header (every non-browser MCP client) is not affected.
type originPolicy struct {
	allowed map[string]bool // normalized "scheme://host[:port]"
	hosts   map[string]bool // their "host[:port]" and "host": names a loopback server answers to
	any     bool            // "*" was listed and auth is required
}

// newOriginPolicy builds the policy from Options.AllowedOrigins. "*" is
// honoured only when authRequired: an open server never lets every web page
// drive it.
func newOriginPolicy(list []string, authRequired bool) originPolicy {
	p := originPolicy{allowed: map[string]bool{}, hosts: map[string]bool{}}
	for _, o := range list {
		o = strings.TrimSpace(o)
		if o == "*" {
			p.any = authRequired
			continue
		}
		if n, ok := normalizeOrigin(o); ok {
			p.allowed[n] = true
			_, hostPort, _ := strings.Cut(n, "://")
			p.hosts[hostPort], p.hosts[hostOnly(hostPort)] = true, true
		}
	}
	return p
}

// normalizeOrigin lowercases an http(s) origin and drops a default port and
// a trailing slash; ok is false for anything that is not such an origin
// (including the opaque "null").
func normalizeOrigin(o string) (string, bool) {
	o = strings.TrimSuffix(strings.TrimSpace(o), "/")
	if strings.ContainsAny(o, "%\\ \t\r\n") {
		return "", false
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" ||
		u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", false
	}
	host := strings.ToLower(u.Host)
	if h, port, err := net.SplitHostPort(host); err == nil &&
		((u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443")) {
		host = h
		if strings.Contains(h, ":") {
			host = "[" + h + "]"
		}
	}
	return u.Scheme + "://" + host, true
}

// allow reports whether a request with the given Origin header may proceed.
// An absent Origin is allowed; a present one must be listed, or be the
// server's own origin: the same host and port as the request's Host, and a
// host the server answers to (hostAllowed), so that a page whose own name
// was rebound to a loopback server is not taken for it.
func (p originPolicy) allow(origin string, r *http.Request) bool {
	if origin == "" {
		return true
	}
	n, ok := normalizeOrigin(origin)
	if !ok {
		return false
	}
	if p.any || p.allowed[n] {
		return true
	}
	_, hostPort, _ := strings.Cut(n, "://")
	return r.Host != "" && strings.EqualFold(hostPort, r.Host) && p.hostAllowed(hostPort, localAddr(r))
}
