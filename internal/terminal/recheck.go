package terminal

import (
	"context"
	"sync"

	"github.com/clawconnect/clawconnect/internal/store"
)

// recordKey names one stored record a follower reads at each re-check (a
// store.Version* kind and the record's id).
type recordKey struct{ kind, id string }

// recheckClock is the host's one re-check tick. At each tick it reads the
// stored version of every record its followers read, in one query per
// kind, then wakes every follower; a follower whose records did not move
// since its last look reuses what it decoded then instead of reading and
// decoding them again. The look itself (the pane's process, its screen,
// the session files) still runs at every tick, so a dead agent or a
// re-bound session is noticed within the re-check period as before.
//
// A follower whose session files and pane output both have a live event
// source (covered) is woken by those events when anything it looks at
// changes; the tick is then only a safety net, and it comes every
// coveredEvery-th tick, the covered followers spread evenly over them.
// A follower missing either source keeps the short tick: an approval
// prompt drawn on the screen with no file write, or a file nobody
// watches, is seen by the re-check only.
type recheckClock struct {
	mu    sync.Mutex
	subs  map[string]*recheckSub // by followed id
	seen  map[recordKey]int64    // versions read at the last tick
	ticks int                    // ticks so far
	next  int                    // phase of the next subscriber
}

// coveredEvery is how many ticks a covered follower sleeps through: with
// the default 10 s re-check its safety look comes every minute.
const coveredEvery = 6

type recheckSub struct {
	tick    chan struct{}
	keys    []recordKey
	covered bool
	phase   int // the covered follower's tick comes when (ticks+phase)%coveredEvery == 0
}

// due reports whether sub looks at tick n.
func (sub *recheckSub) due(n int) bool {
	return !sub.covered || (n+sub.phase)%coveredEvery == 0
}

// subscribe registers the follower of id: the returned channel receives
// each re-check tick (dropped while the follower is busy, as a ticker
// does); stop unregisters it.
func (c *recheckClock) subscribe(id string) (tick <-chan struct{}, stop func()) {
	sub := &recheckSub{tick: make(chan struct{}, 1)}
	c.mu.Lock()
	if c.subs == nil {
		c.subs = map[string]*recheckSub{}
	}
	sub.phase = c.next
	c.next = (c.next + 1) % coveredEvery
	c.subs[id] = sub
	c.mu.Unlock()
	return sub.tick, func() {
		c.mu.Lock()
		if c.subs[id] == sub {
			delete(c.subs, id)
		}
		c.mu.Unlock()
	}
}

// track names the records the follower of id reads at each re-check.
func (c *recheckClock) track(id string, keys ...recordKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sub := c.subs[id]; sub != nil {
		sub.keys = keys
	}
}

// cover records whether every source the follower of id looks at has a
// live event source (recheckClock).
func (c *recheckClock) cover(id string, covered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sub := c.subs[id]; sub != nil {
		sub.covered = covered
	}
}

// unchanged reports whether the last tick read k at version v (0: found
// no such record): the copy of k a follower holds at v is still the
// stored one as of that tick.
func (c *recheckClock) unchanged(k recordKey, v int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.seen[k]
	return ok && got == v
}

// tick reads the versions of the records of every follower due at this
// tick (a failed read leaves none known: they then read afresh) and wakes
// those followers.
func (c *recheckClock) tick(ctx context.Context, db store.TerminalStore) {
	c.mu.Lock()
	c.ticks++
	n := c.ticks
	byKind := map[string][]string{}
	dup := map[recordKey]bool{}
	for _, sub := range c.subs {
		if !sub.due(n) {
			continue
		}
		for _, k := range sub.keys {
			if !dup[k] {
				dup[k] = true
				byKind[k.kind] = append(byKind[k.kind], k.id)
			}
		}
	}
	c.mu.Unlock()
	seen := make(map[recordKey]int64, len(dup))
	for kind, ids := range byKind {
		vs, err := db.Versions(ctx, kind, ids)
		if err != nil {
			seen = nil
			break
		}
		for _, id := range ids {
			seen[recordKey{kind, id}] = vs[id] // 0: no such record
		}
	}
	c.mu.Lock()
	c.seen = seen
	for _, sub := range c.subs {
		if !sub.due(n) {
			continue
		}
		select {
		case sub.tick <- struct{}{}:
		default:
		}
	}
	c.mu.Unlock()
}

// reuse returns held when the follower woke for a re-check tick and the
// tick read held's record at held's version (version(held)); otherwise it
// reads the record afresh.
func reuse[T any](c *recheckClock, w wake, key recordKey, held *T, version func(*T) int64, read func() (*T, error)) (*T, error) {
	if w.recheck && held != nil && c.unchanged(key, version(held)) {
		return held, nil
	}
	return read()
}

func turnVersion(t *store.Turn) int64           { return t.Version }
func sessionVersion(s *store.TermSession) int64 { return s.Revision }
