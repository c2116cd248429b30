// Package backoff computes retry delays: exponential growth from a
// minimum, capped at a maximum, jittered over the upper half of each delay
// so that clients, replicas and processes that failed together do not
// retry in step. It is the one backoff of the gateway client's reconnects,
// the task manager's outcome writes and the runtime modules' restarts.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is an exponential backoff: attempt n waits min(Min·2^(n-1), Max).
// The zero Policy never waits.
type Policy struct {
	Min time.Duration
	Max time.Duration
}

// Delay returns the delay before attempt n (n ≥ 1; less counts as 1),
// without jitter: min(Min·2^(n-1), Max).
func (p Policy) Delay(n int) time.Duration {
	d := p.Min
	for i := 1; i < n; i++ {
		d *= 2
		if d >= p.Max || d <= 0 {
			return p.Max
		}
	}
	return min(d, p.Max)
}

// Jittered returns Jitter(p.Delay(n)): the delay to wait before attempt n.
func (p Policy) Jittered(n int) time.Duration { return Jitter(p.Delay(n)) }

// Jitter spreads d uniformly over [d/2, d]. It is safe for concurrent use.
func Jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}
