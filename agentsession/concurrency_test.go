package agentsession

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// TestConcurrentInspectsAndRedelegations interleaves many reads (each
// yielding a random number of times between taking its token and writing
// back) with re-delegations. However they interleave, the record ends at the
// newest accepted observation, and no write from a superseded delegation is
// accepted after the re-delegation.
func TestConcurrentInspectsAndRedelegations(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, Runtime{ID: "rt", Inspect: func(ctx context.Context, _ Ref) (*Observation, error) {
		for range rand.IntN(50) {
			runtime.Gosched()
		}
		return &Observation{State: "running", Alive: Bool(true)}, nil
	}})
	bb := newBookBundle(t, reg)
	ctx := t.Context()
	bb.apply(t, "k", "turn-0", markerS1)

	const readers, readsEach, redelegations = 8, 60, 20
	var (
		mu       sync.Mutex
		accepted []Guard
	)
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			for range readsEach {
				g, ref, ok, err := bb.book.Begin(ctx, "k")
				if err != nil || !ok {
					t.Errorf("Begin = %v, %v", ok, err)
					return
				}
				st := reg.Dispatch(ctx, ref, Request{Op: OpInspect}, CallOptions{})
				st.LatestResponse = strconv.FormatInt(g.Token, 10)
				ok, err = bb.book.WriteBack(ctx, "k", g, st)
				if err != nil {
					t.Errorf("reader %d: %v", r, err)
					return
				}
				if ok {
					mu.Lock()
					accepted = append(accepted, g)
					mu.Unlock()
				}
			}
		})
	}
	wg.Go(func() {
		for i := 1; i <= redelegations; i++ {
			for range rand.IntN(200) {
				runtime.Gosched()
			}
			d := ParseHandoff(block(`{"op":"continue"}`)).Directive
			if _, err := bb.book.Apply(ctx, "k", fmt.Sprintf("turn-%d", i), d); err != nil {
				t.Errorf("re-delegate: %v", err)
			}
		}
	})
	wg.Wait()

	cur, err := bb.book.Current(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if cur.DelegatedTurnID != fmt.Sprintf("turn-%d", redelegations) {
		t.Fatalf("delegated turn = %q", cur.DelegatedTurnID)
	}
	var newest Guard
	for _, g := range accepted {
		if g.Token > newest.Token {
			newest = g
		}
	}
	if len(accepted) == 0 {
		t.Fatal("no write was accepted")
	}
	// The newest accepted write may predate the last re-delegation, which
	// resets the text; otherwise the record carries exactly its token.
	if cur.ObservationToken != newest.Token {
		t.Errorf("record token %d, newest accepted %d", cur.ObservationToken, newest.Token)
	}
	if newest.DelegatedTurnID == cur.DelegatedTurnID && cur.LatestResponse != strconv.FormatInt(newest.Token, 10) {
		t.Errorf("record says %q, newest accepted token %d", cur.LatestResponse, newest.Token)
	}
	t.Logf("%d of %d writes accepted", len(accepted), readers*readsEach)
}
