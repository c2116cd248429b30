package poll_test

import (
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
