package server

import (
	"context"
	"math"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
)

// Authenticator checks the credentials of HTTP requests to /mcp (and of
// the pages a host mounts with SetPages). Implementations must be safe for
// concurrent use.
type Authenticator interface {
	// Required reports whether every request must present a valid
	// credential. When it is false, Authenticate accepts every request.
	Required() bool
	// Authenticate checks a credential presented as the ?pass= query value
	// (pass) or as "Authorization: Bearer" (bearer); either may be empty.
	// ok is false when the request is refused; otherwise id says who it
	// acts as (the zero Identity for an anonymous caller).
	Authenticate(pass, bearer string) (id taskapi.Identity, ok bool)
}

// openAuth is the Authenticator of a server with no credential: every
// request is accepted anonymously.
type openAuth struct{}

func (openAuth) Required() bool { return false }

func (openAuth) Authenticate(string, string) (taskapi.Identity, bool) {
	return taskapi.Identity{}, true
}

// The check_task wait window.
const (
	defaultCheckWait    = 45 * time.Second
	defaultCheckMaxWait = 120 * time.Second
	// minCheckWait is the fixed floor of a check_task wait.
	minCheckWait = time.Second
)

// waits is a server's check_task wait window.
type waits struct {
	def, max time.Duration
}

func newWaits(def, maxWait time.Duration) waits {
	if def <= 0 {
		def = defaultCheckWait
	}
	if maxWait <= 0 {
		maxWait = defaultCheckMaxWait
	}
	return waits{def: def, max: maxWait}
}

// clamp applies the check_task wait rule: a missing (nil) or non-finite
// waitMs gives the default, then the result is clamped to
// [minCheckWait, max].
func (w waits) clamp(waitMs *float64) time.Duration {
	d := w.def
	if waitMs != nil && !math.IsNaN(*waitMs) && !math.IsInf(*waitMs, 0) {
		switch {
		case *waitMs <= 0:
			d = 0
		case *waitMs*float64(time.Millisecond) >= float64(w.max):
			d = w.max
		default:
			d = time.Duration(*waitMs * float64(time.Millisecond))
		}
	}
	return max(minCheckWait, min(d, max(w.max, minCheckWait)))
}

// authRequired reports whether HTTP requests must present a credential:
// always in OAuth mode, else when Auth says so.
func (s *Server) authRequired() bool { return s.oauth != nil || s.auth.Required() }

// check authenticates a credential: in OAuth mode through verify, else
// through Auth alone (ErrBadCredential when refused).
func (s *Server) check(ctx context.Context, pass, bearer string) (taskapi.Identity, error) {
	if s.oauth != nil {
		return s.verify(ctx, pass, bearer)
	}
	id, ok := s.auth.Authenticate(pass, bearer)
	if !ok {
		return taskapi.Identity{}, ErrBadCredential
	}
	return id, nil
}
