package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
)

// misdirectedBody answers a request whose Host the server does not answer
// to.
const misdirectedBody = "Forbidden: this server does not answer to that Host name; open it by its loopback address (http://127.0.0.1:PORT/) or list the name's origin in CLAWCONNECT_ALLOWED_ORIGINS\n"

// hostAllowed reports whether a request that arrived on local (the
// listener's address) with this Host header may be served. On a loopback
// listener only loopback names are, and the hosts of the listed origins:
// a web page that rebinds its own name to 127.0.0.1 keeps that name in
// Host, and would otherwise read every page as the server's own origin.
// Beyond loopback the server cannot know the names it is reached by, and a
// page there has no credential of the user's.
func (p originPolicy) hostAllowed(host string, local net.Addr) bool {
	if local == nil || !isLoopbackAddr(local.String()) {
		return true
	}
	if isLoopbackAddr(host) {
		return true
	}
	h := strings.ToLower(host)
	return p.hosts[h] || p.hosts[hostOnly(h)]
}

// hostOnly strips a port from host.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.Trim(host, "[]")
}

// isLoopbackAddr reports whether host (with or without a port) is
// "localhost" or a loopback IP.
func isLoopbackAddr(host string) bool {
	h := hostOnly(host)
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

// localAddr is the listener address a request arrived on, nil when the
// handler was called without a server (a test's recorder).
func localAddr(r *http.Request) net.Addr {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return a
}

// withHost refuses, on every route, a request whose Host is not one the
// server answers to (see hostAllowed).
func (s *Server) withHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.origins.hostAllowed(r.Host, localAddr(r)) {
			s.logger.Warn("refused a request for a foreign Host", "host", clipHeader(r.Host))
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(misdirectedBody))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// LoopbackRequest reports whether r arrived on a loopback listener (true
// too when there is no listener to tell, as in a handler test).
func LoopbackRequest(r *http.Request) bool {
	a := localAddr(r)
	return a == nil || isLoopbackAddr(a.String())
}

// trustedProxy reports whether addr is one of Options.TrustedProxies.
func (s *Server) trustedProxy(addr netip.Addr) bool {
	for _, p := range s.proxies {
		if p.Contains(addr.Unmap()) {
			return true
		}
	}
	return false
}

// remoteIP is the peer address of r's connection.
func remoteIP(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		a, err := netip.ParseAddr(r.RemoteAddr)
		return a.Unmap(), err == nil
	}
	return ap.Addr().Unmap(), true
}

// ClientAddr is the address r came from: the connection's peer, or, when
// the peer is a trusted proxy, the last address in X-Forwarded-For that is
// not one.
func (s *Server) ClientAddr(r *http.Request) netip.Addr {
	ip, ok := remoteIP(r)
	if !ok || !s.trustedProxy(ip) {
		return ip
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return ip // a garbled chain: the proxy is all we know
		}
		if h = h.Unmap(); !s.trustedProxy(h) {
			return h
		}
	}
	return ip
}

// SecureRequest reports whether r reached the server over TLS: its own, or
// a trusted proxy's that says so in X-Forwarded-Proto.
func (s *Server) SecureRequest(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	ip, ok := remoteIP(r)
	if !ok || !s.trustedProxy(ip) {
		return false
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// ErrThrottled is wrapped by the error of AuthenticateRequest when the
// request's address has failed too many credential checks of late.
var ErrThrottled = errors.New("too many failed sign-ins from this address")

// ErrBadCredential is returned by AuthenticateRequest for a credential
// that is refused.
var ErrBadCredential = errors.New("credential refused")

// ThrottledError is ErrThrottled with the time to wait.
type ThrottledError struct{ RetryAfter time.Duration }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("%s: try again in %d s", ErrThrottled, retrySeconds(e.RetryAfter))
}

func (e *ThrottledError) Unwrap() error { return ErrThrottled }

// retrySeconds is d as a Retry-After value: whole seconds, at least one.
func retrySeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

// SetRetryAfter writes the Retry-After header of a ThrottledError.
func SetRetryAfter(w http.ResponseWriter, e *ThrottledError) {
	w.Header().Set("Retry-After", fmt.Sprint(retrySeconds(e.RetryAfter)))
}

// AuthenticateRequest checks a credential presented by r as /mcp checks
// its own: a refusal counts against r's address, and an address over its
// budget of refusals is answered a *ThrottledError without the credential
// being looked at. On success r's connection counts as signed in (see
// Limits.PreAuthPerAddress).
//
// In OAuth mode the error is a *TokenError for a refused token (a token
// that is valid but lacks a scope does not count as a failure), or wraps
// ErrVerifierUnavailable when the token could not be checked.
func (s *Server) AuthenticateRequest(r *http.Request, pass, bearer string) (taskapi.Identity, error) {
	if !s.authRequired() {
		s.Admit(r)
		return taskapi.Identity{}, nil
	}
	addr := s.ClientAddr(r)
	if wait := s.failures.blocked(addr, time.Now()); wait > 0 {
		return taskapi.Identity{}, &ThrottledError{RetryAfter: wait}
	}
	id, err := s.check(r.Context(), pass, bearer)
	var te *TokenError
	if errors.As(err, &te) && te.Code == ErrorInsufficientScope || errors.Is(err, ErrVerifierUnavailable) {
		return taskapi.Identity{}, err
	}
	if err != nil {
		if wait := s.failures.fail(addr, time.Now()); wait > 0 {
			s.logger.Warn("failed credential checks over budget: address backed off", "client", addr.String(), "retry_after", wait)
		}
		return taskapi.Identity{}, err
	}
	s.Admit(r)
	return id, nil
}

// The failure budget of an address: failBudget refusals pass freely; each
// one after that blocks the address for failBlock, doubled with every
// further refusal up to failBlockMax. An address quiet for failForget
// starts over. failTable bounds the addresses remembered.
const (
	failBudget   = 10
	failBlock    = time.Second
	failBlockMax = 5 * time.Minute
	failForget   = 15 * time.Minute
	failTable    = 4096
)

// failures counts the refused credentials of each address. It is safe for
// concurrent use; its memory is bounded by failTable entries.
type failures struct {
	mu sync.Mutex
	m  map[netip.Prefix]*failEntry
}

type failEntry struct {
	n           int
	last, until time.Time
}

// failKey groups an IPv6 address by its /64, the block one host is
// usually given, so that walking its addresses does not escape a per-address
// count (refused credentials, connections before sign-in).
func failKey(a netip.Addr) netip.Prefix {
	bits := a.BitLen()
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// blocked returns how long addr must still wait; zero when it may try.
func (f *failures) blocked(addr netip.Addr, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.m[failKey(addr)]
	if e == nil || !now.Before(e.until) {
		return 0
	}
	return e.until.Sub(now)
}

// fail counts one refusal of addr and returns the block it earned (zero
// while within the budget).
func (f *failures) fail(addr netip.Addr, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[netip.Prefix]*failEntry)
	}
	k := failKey(addr)
	e := f.m[k]
	if e != nil && now.Sub(e.last) > failForget && !now.Before(e.until) {
		e = nil
	}
	if e == nil {
		if len(f.m) >= failTable {
			f.evictLocked(now)
		}
		e = &failEntry{}
		f.m[k] = e
	}
	e.n++
	e.last = now
	if e.n <= failBudget {
		return 0
	}
	block := failBlockMax
	if shift := e.n - failBudget - 1; shift < 20 {
		block = min(failBlockMax, failBlock<<shift)
	}
	e.until = now.Add(block)
	return block
}

// evictLocked makes room for one entry. It looks at a sample of entries
// (map order is random), so that a flood of addresses costs a bounded
// amount per refusal: forgotten ones in it go, and if none did, the one
// idle longest that is not blocking now; if every one sampled blocks, any
// one of them, rather than grow.
func (f *failures) evictLocked(now time.Time) {
	const sample = 64
	var oldest, any netip.Prefix
	var oldestAt time.Time
	seen, freed := 0, false
	for k, e := range f.m {
		if seen++; seen > sample {
			break
		}
		any = k
		switch {
		case now.Before(e.until):
		case now.Sub(e.last) > failForget:
			delete(f.m, k)
			freed = true
		case oldestAt.IsZero() || e.last.Before(oldestAt):
			oldest, oldestAt = k, e.last
		}
	}
	switch {
	case freed:
	case !oldestAt.IsZero():
		delete(f.m, oldest)
	default:
		delete(f.m, any)
	}
}
