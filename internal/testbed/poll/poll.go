// Package poll is the tests' one bounded wait for state they cannot be
// notified of (another process's life, a file another goroutine writes, a
// fake peer's counters): cond is checked every few milliseconds until it
// holds or the wait runs out. A state that is announced only sometimes (a
// Service's change channel that misses another host's writes) is waited
// for with WithinOn, which also checks at each announcement. A test that
// can wait on a channel or event alone does that instead; tests of timers
// use testing/synctest.
package poll

import (
	"testing"
	"time"
)

// Tick is how often cond is checked.
const Tick = 5 * time.Millisecond

// Within reports whether cond holds within timeout, checking it every
// Tick and once more at the end.
func Within(timeout time.Duration, cond func() bool) bool {
	return within(timeout, Tick, nil, cond)
}

// WithinEvery is Within checking cond every interval: for a cond that
// costs a process or a round trip (a CLI run, a real peer's read), which
// Tick would repeat back to back.
func WithinEvery(timeout, interval time.Duration, cond func() bool) bool {
	return within(timeout, interval, nil, cond)
}

// WithinOn is Within that also checks cond as soon as next's channel is
// ready. next is called before each check and returns the channel closed
// (or sent on) at the next change, so a change between a check and the
// wait that follows is not missed; a channel closed once must not be
// returned again, or the wait spins. The Tick checks remain for changes
// nothing announces.
func WithinOn(timeout time.Duration, next func() <-chan struct{}, cond func() bool) bool {
	return within(timeout, Tick, next, cond)
}

// WithinEveryOn is WithinOn checking every interval between changes: for
// a cond that reads a store or a peer, where the changes are announced
// and the interval only covers a missed one.
func WithinEveryOn(timeout, interval time.Duration, next func() <-chan struct{}, cond func() bool) bool {
	return within(timeout, interval, next, cond)
}

// within checks cond every interval, at each change next announces (nil:
// none) and once more at the end of timeout.
func within(timeout, interval time.Duration, next func() <-chan struct{}, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		var changed <-chan struct{}
		if next != nil {
			changed = next()
		}
		if cond() {
			return true
		}
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		case <-changed:
		}
	}
}

// Until fails t, naming what it waited for, unless cond holds within
// timeout. It must be called from the test's own goroutine.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}
