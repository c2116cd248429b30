package executor

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStreamStampsEnvelope(t *testing.T) {
	clock := time.UnixMilli(1000)
	s := NewStream(StreamOptions{Now: func() time.Time { return clock }})
	s.Emit("r", "s", TextDelta{Text: "a"})
	s.Emit("r", "s", Done{Reason: DoneSuccess})
	s.Finish()
	if s.Emit("r", "s", TextDelta{Text: "late"}) {
		t.Error("Emit after Finish = true, want false")
	}
	var got []Event
	for ev, err := range s.All(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	want := []Event{
		{RunID: "r", SessionID: "s", TS: clock, Seq: 1, Payload: TextDelta{Text: "a"}},
		{RunID: "r", SessionID: "s", TS: clock, Seq: 2, Payload: Done{Reason: DoneSuccess}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestStreamSeqStrictlyIncreasesUnderConcurrentEmit(t *testing.T) {
	s := NewStream(StreamOptions{Max: 10_000})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				s.Emit("r", "s", TextDelta{Text: "x"})
			}
		}()
	}
	wg.Wait()
	s.Finish()
	var last uint64
	n := 0
	for ev, err := range s.All(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Seq <= last {
			t.Fatalf("seq %d after %d", ev.Seq, last)
		}
		last = ev.Seq
		n++
	}
	if n != 2000 {
		t.Errorf("got %d events, want 2000", n)
	}
}

func TestStreamCloseReleasesOnce(t *testing.T) {
	var released atomic.Int32
	s := NewStream(StreamOptions{Release: func() { released.Add(1) }})
	s.Emit("r", "", TextDelta{Text: "buffered"})
	s.Close()
	s.Close()
	if got := released.Load(); got != 1 {
		t.Errorf("release called %d times, want 1", got)
	}
	if ev, err := s.Next(t.Context()); err != nil || ev.Seq != 1 {
		t.Errorf("Next after Close = %v, %v; want the buffered event", ev, err)
	}
	if _, err := s.Next(t.Context()); !errors.Is(err, io.EOF) {
		t.Errorf("Next = %v, want io.EOF", err)
	}
}

func TestCollectUntilDone(t *testing.T) {
	s := NewStream(StreamOptions{})
	s.Emit("r", "", TextDelta{Text: "a"})
	s.Emit("r", "", Done{Reason: DoneSuccess})
	s.Emit("r", "", TextDelta{Text: "next run"})
	got, err := CollectUntilDone(t.Context(), s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Kind() != KindDone {
		t.Errorf("collected %v, want two events ending in done", got)
	}
}
