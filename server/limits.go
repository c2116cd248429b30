package server

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bounds what one HTTP client can hold of ListenAndServe. Every zero
// field takes its default.
type Limits struct {
	// ReadHeader bounds reading a request's headers; default 10s.
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
}

func (l Limits) withDefaults(checkMaxWait time.Duration) Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeader, 10*time.Second)
	def(&l.ReadBody, 30*time.Second)
	def(&l.Request, checkMaxWait+30*time.Second)
	def(&l.Idle, 60*time.Second)
	if l.MaxConns <= 0 {
		l.MaxConns = 512
	}
	return l
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

// capListener serves at most max connections at once; it answers the rest
// 503 and closes them, so a flood of stalled connections costs neither
// memory nor descriptors beyond the cap.
type capListener struct {
	net.Listener
	max    int64
	active atomic.Int64
}

// Accept returns the next connection under the cap.
func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.active.Add(1) > l.max {
			l.active.Add(-1)
			// A fresh socket's send buffer takes this at once; the deadline
			// only guards against a pathological peer.
			_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			_, _ = io.WriteString(c, tooManyConns)
			_ = c.Close()
			continue
		}
		return &cappedConn{Conn: c, release: func() { l.active.Add(-1) }}, nil
	}
}

// cappedConn gives its slot back once, on the first Close.
type cappedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
