package poll_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/poll"
)

func TestWithin(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int32
		if !poll.Within(time.Second, func() bool { return n.Add(1) == 3 }) {
			t.Fatal("a condition that holds on the third check timed out")
		}
		start := time.Now()
		if poll.Within(time.Second, func() bool { return false }) {
			t.Fatal("a condition that never holds was reported true")
		}
		if waited := time.Since(start); waited != time.Second {
			t.Fatalf("waited %s for a condition that never holds, want the timeout", waited)
		}
		var late atomic.Bool
		time.AfterFunc(time.Second-time.Millisecond, func() { late.Store(true) })
		if !poll.Within(time.Second, late.Load) {
			t.Fatal("a condition that holds between the last tick and the deadline was not seen")
		}
	})
}

// changes is a change channel in the style of a Service's: closed at the
// next change and then replaced.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

func newChanges() *changes { return &changes{ch: make(chan struct{})} }

func (c *changes) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

func (c *changes) announce() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.ch)
	c.ch = make(chan struct{})
}

func TestWithinOn(t *testing.T) {
	t.Parallel()
	t.Run("an announced change is checked at once", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c := newChanges()
			var done atomic.Bool
			time.AfterFunc(2*time.Millisecond, func() { done.Store(true); c.announce() })
			start := time.Now()
			if !poll.WithinOn(time.Second, c.next, done.Load) {
				t.Fatal("an announced condition timed out")
			}
			if waited := time.Since(start); waited != 2*time.Millisecond {
				t.Fatalf("saw a change announced at 2ms after %s, want at once", waited)
			}
		})
	})
	t.Run("a change during a check is not missed", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c := newChanges()
			var done atomic.Bool
			checks := 0
			start := time.Now()
			held := poll.WithinOn(time.Second, c.next, func() bool {
				checks++
				if checks == 1 {
					// The change lands after this check read its state.
					defer func() { done.Store(true); c.announce() }()
				}
				return done.Load()
			})
			if !held {
				t.Fatal("a condition that held after the first check timed out")
			}
			if waited := time.Since(start); waited != 0 || checks != 2 {
				t.Fatalf("after a change during the first check: %d checks in %s, want 2 at once", checks, waited)
			}
		})
	})
	t.Run("an unannounced change is seen at the next tick", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c := newChanges()
			var done atomic.Bool
			time.AfterFunc(poll.Tick+time.Millisecond, func() { done.Store(true) })
			start := time.Now()
			if !poll.WithinOn(time.Second, c.next, done.Load) {
				t.Fatal("a condition nothing announced timed out")
			}
			if waited := time.Since(start); waited != 2*poll.Tick {
				t.Fatalf("saw an unannounced change after %s, want the second tick (%s)", waited, 2*poll.Tick)
			}
		})
	})
	t.Run("a condition that never holds times out", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c := newChanges()
			stop := make(chan struct{})
			go func() { // announcements that change nothing
				for {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
						c.announce()
					}
				}
			}()
			defer close(stop)
			start := time.Now()
			if poll.WithinOn(time.Second, c.next, func() bool { return false }) {
				t.Fatal("a condition that never holds was reported true")
			}
			if waited := time.Since(start); waited != time.Second {
				t.Fatalf("waited %s for a condition that never holds, want the timeout", waited)
			}
		})
	})
}

func TestWithinEveryOn(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := newChanges()
		var announced, unannounced atomic.Bool
		time.AfterFunc(time.Millisecond, func() { announced.Store(true); c.announce() })
		start := time.Now()
		if !poll.WithinEveryOn(time.Second, 100*time.Millisecond, c.next, announced.Load) {
			t.Fatal("an announced condition timed out")
		}
		if waited := time.Since(start); waited != time.Millisecond {
			t.Fatalf("saw a change announced at 1ms after %s, want at once", waited)
		}
		time.AfterFunc(time.Millisecond, func() { unannounced.Store(true) })
		start = time.Now()
		if !poll.WithinEveryOn(time.Second, 100*time.Millisecond, c.next, unannounced.Load) {
			t.Fatal("a condition nothing announced timed out")
		}
		if waited := time.Since(start); waited != 100*time.Millisecond {
			t.Fatalf("saw an unannounced change after %s, want the interval", waited)
		}
	})
}
