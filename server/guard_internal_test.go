package server

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestFailureTableBounded: refusals from more addresses than the table
// holds never grow it past failTable, and a blocked address stays blocked
// while others come and go.
func TestFailureTableBounded(t *testing.T) {
	t.Parallel()
	var f failures
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	blocked := netip.MustParseAddr("192.0.2.1")
	for range failBudget + 1 {
		f.fail(blocked, now)
	}
	for i := range 3 * failTable {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		f.fail(a, now.Add(time.Duration(i)*time.Microsecond))
	}
	if n := len(f.m); n > failTable {
		t.Errorf("table holds %d addresses, want at most %d", n, failTable)
	}
	if f.blocked(blocked, now.Add(time.Millisecond)) == 0 {
		t.Error("the blocked address was evicted by others' refusals")
	}
	// The addresses of one IPv6 /64 count as one.
	v6 := netip.MustParseAddr("2001:db8::1")
	for i := range failBudget + 1 {
		a := v6.As16()
		a[15] = byte(i + 2)
		f.fail(netip.AddrFrom16(a), now)
	}
	if f.blocked(netip.MustParseAddr("2001:db8::ffff"), now) == 0 {
		t.Error("walking the addresses of one /64 escaped the budget")
	}
}

// FuzzRequestOrigin feeds the headers a client controls (Host,
// X-Forwarded-For, X-Forwarded-Proto) and its address to the Host check,
// ClientAddr and SecureRequest: none panics, a Host other than a loopback
// name is refused on a loopback listener, and only a trusted proxy's word
// is taken.
func FuzzRequestOrigin(f *testing.F) {
	f.Add("127.0.0.1:7331", "127.0.0.1:5000", "203.0.113.9", "https")
	f.Add("rebind.attacker.example:7331", "10.0.0.2:5000", "203.0.113.9, 10.0.0.3", "https")
	f.Add("[::1]:7331", "[::1]:5000", "garbage, 1.2.3.4", "HTTPS,http")
	f.Add("localhost", "198.51.100.7:1", "", "")
	s := &Server{proxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8")}}
	s.origins = newOriginPolicy(nil, false)
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7331}
	f.Fuzz(func(t *testing.T, host, remote, xff, proto string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host, r.RemoteAddr = host, remote
		r.Header.Set("X-Forwarded-For", xff)
		r.Header.Set("X-Forwarded-Proto", proto)
		if s.origins.hostAllowed(host, local) != isLoopbackAddr(host) {
			t.Fatalf("host %q allowed = %v on a loopback listener", host, !isLoopbackAddr(host))
		}
		peer, ok := remoteIP(r)
		got := s.ClientAddr(r)
		if !ok || !s.trustedProxy(peer) {
			if got != peer {
				t.Fatalf("untrusted peer %q: client %v", remote, got)
			}
			if s.SecureRequest(r) {
				t.Fatalf("untrusted peer %q made the request secure", remote)
			}
			return
		}
		if got == peer {
			return
		}
		for _, h := range strings.Split(xff, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(h)); err == nil && a.Unmap() == got {
				if s.trustedProxy(got) {
					t.Fatalf("client %v is a trusted proxy", got)
				}
				return
			}
		}
		t.Fatalf("client %v is neither the peer nor in X-Forwarded-For %q", got, xff)
	})
}
