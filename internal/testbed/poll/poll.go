// Package poll is the tests' one bounded wait for state they cannot be
// notified of (another process's life, a file another goroutine writes, a
// fake peer's counters): cond is checked every few milliseconds until it
// holds or the wait runs out. A test that can wait on a channel or event
// does that instead; tests of timers use testing/synctest.
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
	return WithinEvery(timeout, Tick, cond)
}

// WithinEvery is Within checking cond every interval: for a cond that
// costs a process or a round trip (a CLI run, a real peer's read), which
// Tick would repeat back to back.
func WithinEvery(timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			return cond()
		case <-tick.C:
		}
	}
	return true
}

// Until fails t, naming what it waited for, unless cond holds within
// timeout. It must be called from the test's own goroutine.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}
