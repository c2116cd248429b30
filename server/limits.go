package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
)

// Limits bounds what one HTTP client can hold of ListenAndServe. Every zero
// field takes its default.
type Limits struct {
	// ReadHeader bounds reading a request's headers; default 5s, short, as
	// a connection that has not sent its headers holds a slot for nothing.
	ReadHeader time.Duration
	// ReadBody bounds reading a request's body, from the end of its
	// headers; default 30s. A body dripped byte by byte is cut off here.
	ReadBody time.Duration
	// Request bounds writing one response, from the end of the request's
	// headers; default the check_task wait ceiling plus 30s, so that a
	// long-polling check_task (which ends its own wait at that ceiling)
	// always fits.
	Request time.Duration
	// Idle closes a keep-alive connection that sends no new request for
	// this long; default 60s.
	Idle time.Duration
	// MaxConns caps the connections served at once; default 512. A
	// connection over the cap is answered 503 and closed at once.
	MaxConns int
	// StreamReserve is the part of MaxConns that long-lived streams (the
	// dashboard's event streams) may not take, kept for /mcp, /health and
	// the pages; default MaxConns/8.
	StreamReserve int
	// StreamsPerIdentity caps the streams one identity (a token, the
	// shared password, or every anonymous caller together) holds open at
	// once; default 16. The one over it is answered 429.
	StreamsPerIdentity int
	// PreAuthPerAddress caps the connections one client address (an IPv6
	// /64 counting as one) holds
	// before any request on them has presented a valid credential
	// (connections still sending their first headers among them); default
	// 32. Connections over it are answered 503 and closed at once, so that
	// one address cannot hold every slot without a credential. Trusted
	// proxies are exempt.
	PreAuthPerAddress int
}

func (l Limits) withDefaults(checkMaxWait time.Duration) Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeader, 5*time.Second)
	def(&l.ReadBody, 30*time.Second)
	def(&l.Request, checkMaxWait+30*time.Second)
	def(&l.Idle, 60*time.Second)
	if l.MaxConns <= 0 {
		l.MaxConns = 512
	}
	if l.StreamReserve <= 0 {
		l.StreamReserve = max(1, l.MaxConns/8)
	}
	l.StreamReserve = min(l.StreamReserve, l.MaxConns-1)
	if l.StreamsPerIdentity <= 0 {
		l.StreamsPerIdentity = 16
	}
	if l.PreAuthPerAddress <= 0 {
		l.PreAuthPerAddress = 32
	}
	return l
}

// ErrTooManyStreams is wrapped by the error of OpenStream when the caller,
// or the server as a whole, holds as many streams as it may.
var ErrTooManyStreams = errors.New("too many open streams")

// streams counts the open long-lived streams, per identity and in all.
type streams struct {
	mu          sync.Mutex
	per         map[taskapi.Identity]int
	total       int
	perMax, max int
}

// OpenStream takes one of id's stream slots for a long-lived response (an
// event stream) and returns the function that gives it back (call it once,
// when the stream ends). The error wraps ErrTooManyStreams, written for the
// person at the browser, when id already holds Limits.StreamsPerIdentity
// streams or the streams together hold every slot outside
// Limits.StreamReserve; answer it 429.
func (s *Server) OpenStream(id taskapi.Identity) (release func(), err error) {
	st := &s.streams
	k := id
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.per[k] >= st.perMax {
		return nil, fmt.Errorf("%w: this sign-in already has %d live pages open; close some dashboard tabs and reload", ErrTooManyStreams, st.perMax)
	}
	if st.total >= st.max {
		return nil, fmt.Errorf("%w: the server holds as many live pages as it serves; reload in a while", ErrTooManyStreams)
	}
	st.per[k]++
	st.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			st.mu.Lock()
			defer st.mu.Unlock()
			st.total--
			if st.per[k]--; st.per[k] <= 0 {
				delete(st.per, k)
			}
		})
	}, nil
}

// withDeadlines gives each request a body-read deadline (lifted once the
// body has been read to its end, so a waiting check_task is not cancelled
// by it) and a response-write deadline.
func withDeadlines(l Limits, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		// Errors mean the writer has no deadlines (a test recorder): nothing
		// to bound then.
		_ = rc.SetWriteDeadline(now.Add(l.Request))
		if r.Body != nil && r.Body != http.NoBody {
			if rc.SetReadDeadline(now.Add(l.ReadBody)) == nil {
				r.Body = &bodyDeadline{ReadCloser: r.Body, rc: rc}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// bodyDeadline lifts the read deadline once the body has been read through.
type bodyDeadline struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *bodyDeadline) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// tooManyConns is written to a connection over Limits.MaxConns.
const tooManyConns = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n" +
	"Connection: close\r\nRetry-After: 1\r\nContent-Length: 38\r\n\r\ntoo many connections; try again later\n"

// capListener serves at most max connections at once, and at most perAddr
// from one address that have not yet signed in; it answers the rest 503
// and closes them, so a flood of stalled connections costs neither memory
// nor descriptors beyond the cap, and one address cannot take every slot
// without a credential.
type capListener struct {
	net.Listener
	max     int64
	perAddr int
	exempt  func(netip.Addr) bool // trusted proxies
	active  atomic.Int64

	mu      sync.Mutex
	preAuth map[netip.Prefix]int // by failKey; entries removed at zero: bounded by the open connections
}

// Accept returns the next connection under the caps.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.active.Add(1) > l.max {
			l.active.Add(-1)
			refuseConn(c)
			continue
		}
		cc := &cappedConn{Conn: c, l: l}
		if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil && !l.exempt(ap.Addr().Unmap()) {
			cc.addr = failKey(ap.Addr().Unmap())
			l.mu.Lock()
			over := l.preAuth[cc.addr] >= l.perAddr
			if !over {
				l.preAuth[cc.addr]++
				cc.counted = true
			}
			l.mu.Unlock()
			if over {
				l.active.Add(-1)
				refuseConn(c)
				continue
			}
		}
		return cc, nil
	}
}

// refuseConn answers a connection over a cap and closes it.
func refuseConn(c net.Conn) {
	// A fresh socket's send buffer takes this at once; the deadline only
	// guards against a pathological peer.
	_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = io.WriteString(c, tooManyConns)
	_ = c.Close()
}

// signedIn moves addr's connection out of its not-signed-in count.
func (l *capListener) signedIn(addr netip.Prefix) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.preAuth[addr]--; l.preAuth[addr] <= 0 {
		delete(l.preAuth, addr)
	}
}

// cappedConn gives its slots back once, on the first Close.
type cappedConn struct {
	net.Conn
	l       *capListener
	addr    netip.Prefix
	mu      sync.Mutex
	counted bool // in l.preAuth
	closed  bool
}

// admit counts the connection as signed in; idempotent.
func (c *cappedConn) admit() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counted {
		c.counted = false
		c.l.signedIn(c.addr)
	}
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.admit()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.l.active.Add(-1)
	}
	return err
}

type connCtxKey struct{}

// withConn is the http.Server's ConnContext: it lets a handler find the
// connection its request came on (see Admit).
func withConn(ctx context.Context, c net.Conn) context.Context {
	if cc, ok := c.(*cappedConn); ok {
		return context.WithValue(ctx, connCtxKey{}, cc)
	}
	return ctx
}

// Admit marks the connection of r as signed in: it no longer counts
// against its address's Limits.PreAuthPerAddress. The credential checks of
// /mcp and AuthenticateRequest call it; a host's pages call it once a
// request proves a login (a session cookie). A no-op outside
// ListenAndServe.
func (s *Server) Admit(r *http.Request) {
	if cc, ok := r.Context().Value(connCtxKey{}).(*cappedConn); ok {
		cc.admit()
	}
}
