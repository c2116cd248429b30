package executor

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func drain[T any](t *testing.T, q *Queue[T]) []T {
	t.Helper()
	var out []T
	for {
		v, err := q.Pop(t.Context())
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
}

func TestQueueDropsOldestAtLimit(t *testing.T) {
	tests := []struct {
		name        string
		max, pushes int
		want        []int
		wantDropped uint64
	}{
		{"under limit", 3, 2, []int{0, 1}, 0},
		{"at limit", 3, 3, []int{0, 1, 2}, 0},
		{"over limit", 3, 7, []int{4, 5, 6}, 4},
		{"limit one", 1, 5, []int{4}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQueue[int](tt.max)
			for i := range tt.pushes {
				if !q.Push(i) {
					t.Fatalf("Push(%d) = false on an open queue", i)
				}
			}
			q.Close()
			if diff := cmp.Diff(tt.want, drain(t, q)); diff != "" {
				t.Errorf("drained (-want +got):\n%s", diff)
			}
			if got := q.Dropped(); got != tt.wantDropped {
				t.Errorf("Dropped() = %d, want %d", got, tt.wantDropped)
			}
		})
	}
}

func TestQueueDefaultLimit(t *testing.T) {
	q := NewQueue[int](0)
	for i := range DefaultQueueMax + 5 {
		q.Push(i)
	}
	if got := q.Len(); got != DefaultQueueMax {
		t.Errorf("Len() = %d, want %d", got, DefaultQueueMax)
	}
	if got, _ := q.TryPop(); got != 5 {
		t.Errorf("oldest = %d, want 5", got)
	}
}

func TestQueueCloseDrainsThenEOF(t *testing.T) {
	q := NewQueue[string](10)
	q.Push("a")
	q.Push("b")
	q.Close()
	q.Close() // idempotent
	if q.Push("c") {
		t.Error("Push after Close = true, want false")
	}
	if diff := cmp.Diff([]string{"a", "b"}, drain(t, q)); diff != "" {
		t.Errorf("drained (-want +got):\n%s", diff)
	}
	if _, err := q.Pop(t.Context()); !errors.Is(err, io.EOF) {
		t.Errorf("Pop after drain = %v, want io.EOF", err)
	}
}

func TestQueuePopHonoursContext(t *testing.T) {
	q := NewQueue[int](1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := q.Pop(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Pop = %v, want context.Canceled", err)
	}
}

func TestQueueParkedConsumerWakes(t *testing.T) {
	q := NewQueue[int](4)
	const n = 500
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			q.Push(i)
		}
		q.Close()
	}()
	got := drain(t, q)
	wg.Wait()
	// With a limit of 4 some items may be shed, but order is kept and the
	// last item always arrives.
	if len(got) == 0 || got[len(got)-1] != n-1 {
		t.Fatalf("last item = %v, want %d", got, n-1)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("out of order at %d: %v", i, got)
		}
	}
	if uint64(len(got))+q.Dropped() != n {
		t.Errorf("received %d + dropped %d != pushed %d", len(got), q.Dropped(), n)
	}
}
