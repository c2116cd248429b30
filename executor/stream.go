package executor

import (
	"context"
	"errors"
	"io"
	"iter"
	"sync"
	"time"
)

// StreamOptions configure a Stream. Zero values are the defaults.
type StreamOptions struct {
	// Max bounds the buffered events; 0 means DefaultQueueMax.
	Max int
	// Release is called once when the consumer closes the stream; adapters
	// unsubscribe from their source in it. nil means nothing to release.
	Release func()
	// Now stamps events; nil means time.Now.
	Now func() time.Time
}

// Stream is the normalized event stream of one Events call: an adapter
// emits into it, one consumer reads from it.
//
// Emit stamps each event's envelope with the time and a per-stream seq that
// starts at 1 and strictly increases, and queues it (drop-oldest at the
// limit). Finish marks the producer side complete. Next returns events in
// order, io.EOF once finished and drained. Close is the consumer's stop: it
// releases the adapter's subscription. Emit, Finish and Close are safe from
// any goroutine; Next is for the single consumer.
type Stream struct {
	q       *Queue[Event]
	now     func() time.Time
	mu      sync.Mutex
	seq     uint64
	release func()
	once    sync.Once
}

// NewStream returns an open stream.
func NewStream(opts StreamOptions) *Stream {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Stream{q: NewQueue[Event](opts.Max), now: now, release: opts.Release}
}

// Emit stamps and queues one event. It never blocks, and reports false once
// the stream is finished or closed.
func (s *Stream) Emit(runID, sessionID string, p Payload) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q.Closed() {
		return false
	}
	s.seq++
	return s.q.Push(Event{RunID: runID, SessionID: sessionID, TS: s.now(), Seq: s.seq, Payload: p})
}

// Finish marks the producer side done: no more events will be emitted, and
// Next returns io.EOF after the buffered events. It is idempotent.
func (s *Stream) Finish() {
	s.mu.Lock()
	s.q.Close()
	s.mu.Unlock()
}

// Next blocks until the next event, returning io.EOF when the stream is
// finished (or closed) and drained, or ctx.Err() when ctx ends first.
func (s *Stream) Next(ctx context.Context) (Event, error) {
	return s.q.Pop(ctx)
}

// Close stops observation: it releases the adapter's subscription and ends
// the stream. Events already buffered still drain. It is idempotent and
// always returns nil.
func (s *Stream) Close() error {
	s.once.Do(func() {
		s.Finish()
		if s.release != nil {
			s.release()
		}
	})
	return nil
}

// Dropped returns how many events were shed because the consumer fell
// behind by more than the stream's limit.
func (s *Stream) Dropped() uint64 { return s.q.Dropped() }

// All iterates the stream until it ends or ctx is done; a non-EOF error is
// yielded once as the last pair. Breaking out of the loop does not close the
// stream; the caller still owns Close.
func (s *Stream) All(ctx context.Context) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for {
			ev, err := s.Next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// CollectUntilDone reads events until the first done event (included), the
// end of the stream, or limit events (limit <= 0 means 200). It does not
// close the stream.
func CollectUntilDone(ctx context.Context, s *Stream, limit int) ([]Event, error) {
	if limit <= 0 {
		limit = 200
	}
	var out []Event
	for len(out) < limit {
		ev, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
		if ev.Kind() == KindDone {
			return out, nil
		}
	}
	return out, nil
}
