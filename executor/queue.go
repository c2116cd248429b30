package executor

import (
	"context"
	"io"
	"sync"
)

// DefaultQueueMax is the queue limit used when none is given.
const DefaultQueueMax = 1000

// Queue is a bounded single-consumer FIFO that bridges a callback source (a
// WebSocket handler, a subprocess reader) to a pulling consumer.
//
// At its limit, Push drops the oldest buffered item rather than blocking or
// growing: orchestration cares about tool calls and done, not every text
// delta, so shedding the stalest item is safer than unbounded memory.
// Dropped counts what was shed. Close ends the queue, but items pushed before
// Close still drain. Push and Close are safe from any goroutine; Pop is for
// one consumer at a time.
type Queue[T any] struct {
	mu      sync.Mutex
	buf     []T // ring; len(buf) is the current capacity (grows up to max)
	head    int
	n       int
	max     int
	closed  bool
	dropped uint64
	signal  chan struct{} // capacity 1: "something changed"
}

// NewQueue returns an empty queue holding at most max items; max <= 0 means
// DefaultQueueMax.
func NewQueue[T any](max int) *Queue[T] {
	if max <= 0 {
		max = DefaultQueueMax
	}
	return &Queue[T]{max: max, signal: make(chan struct{}, 1)}
}

func (q *Queue[T]) wake() {
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// Push appends v, dropping the oldest item when the queue is full. It never
// blocks and reports false (doing nothing) once the queue is closed.
func (q *Queue[T]) Push(v T) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.pushLocked(v)
	q.mu.Unlock()
	q.wake()
	return true
}

func (q *Queue[T]) pushLocked(v T) {
	if q.n == q.max {
		var zero T
		q.buf[q.head] = zero
		q.head = (q.head + 1) % len(q.buf)
		q.n--
		q.dropped++
	}
	if q.n == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.n)%len(q.buf)] = v
	q.n++
}

func (q *Queue[T]) grow() {
	c := max(len(q.buf)*2, 16)
	c = min(c, q.max)
	nb := make([]T, c)
	for i := range q.n {
		nb[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = nb, 0
}

// TryPop returns the oldest item without blocking. ok is false when the
// queue is empty.
func (q *Queue[T]) TryPop() (v T, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.popLocked()
}

func (q *Queue[T]) popLocked() (v T, ok bool) {
	if q.n == 0 {
		return v, false
	}
	var zero T
	v = q.buf[q.head]
	q.buf[q.head] = zero
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return v, true
}

// Pop blocks until an item is available and returns it. After Close it
// keeps returning buffered items, then io.EOF. It returns ctx.Err() when ctx
// ends first.
func (q *Queue[T]) Pop(ctx context.Context) (T, error) {
	for {
		q.mu.Lock()
		v, ok := q.popLocked()
		closed := q.closed
		q.mu.Unlock()
		if ok {
			return v, nil
		}
		if closed {
			return v, io.EOF
		}
		select {
		case <-q.signal:
		case <-ctx.Done():
			return v, ctx.Err()
		}
	}
}

// Close ends the queue: later pushes are ignored and Pop returns io.EOF once
// the buffer is drained. It is idempotent.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

// Closed reports whether Close has been called.
func (q *Queue[T]) Closed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// Len returns the number of buffered items.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Dropped returns how many items were shed at the limit so far.
func (q *Queue[T]) Dropped() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.dropped
}
