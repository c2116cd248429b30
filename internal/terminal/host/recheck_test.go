package host

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
)

// probedIDs records the ids each version probe asked for.
type probedIDs struct {
	store.Store
	mu  sync.Mutex
	ids []string
}

func (p *probedIDs) Versions(_ context.Context, _ string, ids []string) (map[string]int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ids = append(p.ids, ids...)
	return map[string]int64{}, nil
}

func (p *probedIDs) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.ids
	p.ids = nil
	slices.Sort(out)
	return out
}

// TestRecheckCoveredFollowersTickSeldom: a follower whose files and pane
// output are watched is woken, and its records probed, at one tick in
// coveredEvery, the covered followers spread over the ticks; a follower
// without them, or one whose output watch ended, at every tick.
func TestRecheckCoveredFollowersTickSeldom(t *testing.T) {
	var c recheckClock
	db := &probedIDs{}
	ticks := map[string]<-chan struct{}{}
	for _, id := range []string{"bare", "c0", "c1", "c2", "c3", "c4", "c5"} {
		tick, stop := c.subscribe(id)
		defer stop()
		ticks[id] = tick
		c.track(id, Record{Kind: store.VersionTurn, ID: id})
		c.cover(id, id != "bare")
	}
	woken := map[string]int{}
	for range 2 * coveredEvery {
		c.tick(t.Context(), db)
		probed := db.take()
		var got []string
		for id, tick := range ticks {
			select {
			case <-tick:
				woken[id]++
				got = append(got, id)
			default:
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, probed) {
			t.Fatalf("tick woke %v but probed %v", got, probed)
		}
		if len(got) != 2 || got[0] != "bare" {
			t.Fatalf("tick woke %v, want bare and one covered follower", got)
		}
	}
	for id, n := range woken {
		if want := map[bool]int{true: 2 * coveredEvery, false: 2}[id == "bare"]; n != want {
			t.Errorf("%s woken %d times in %d ticks, want %d", id, n, 2*coveredEvery, want)
		}
	}
	c.cover("c0", false) // its control client ended
	for range coveredEvery {
		c.tick(t.Context(), db)
		if !slices.Contains(db.take(), "c0") {
			t.Fatal("a follower that lost its output watch skipped a tick")
		}
		<-ticks["c0"]
	}
}
