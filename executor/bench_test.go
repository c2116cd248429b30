package executor

import (
	"sync"
	"testing"
)

// BenchmarkQueueSlowConsumer pushes from one goroutine while a consumer that
// does some work per item pops; the queue sheds the oldest when it falls
// behind. Reports the fraction dropped.
func BenchmarkQueueSlowConsumer(b *testing.B) {
	q := NewQueue[Event](DefaultQueueMax)
	var wg sync.WaitGroup
	wg.Add(1)
	popped := 0
	go func() {
		defer wg.Done()
		for {
			ev, err := q.Pop(b.Context())
			if err != nil {
				return
			}
			popped++
			// Simulated per-event work in the consumer.
			for i := range 200 {
				ev.Seq += uint64(i)
			}
		}
	}()
	ev := Event{RunID: "r", SessionID: "s", Payload: TextDelta{Text: "x"}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		ev.Seq = uint64(i)
		q.Push(ev)
	}
	q.Close()
	wg.Wait()
	b.ReportMetric(float64(q.Dropped())/float64(b.N), "dropped/op")
}

// BenchmarkQueuePushPop is the uncontended push-then-pop cost.
func BenchmarkQueuePushPop(b *testing.B) {
	q := NewQueue[Event](DefaultQueueMax)
	ev := Event{RunID: "r", Payload: TextDelta{Text: "x"}}
	b.ReportAllocs()
	for range b.N {
		q.Push(ev)
		q.TryPop()
	}
}

// BenchmarkStreamEmit is the cost of stamping and queueing one event.
func BenchmarkStreamEmit(b *testing.B) {
	s := NewStream(StreamOptions{})
	p := TextDelta{Text: "x"}
	b.ReportAllocs()
	for range b.N {
		s.Emit("r", "s", p)
		s.q.TryPop()
	}
}
