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
type recheckClock struct {
	mu   sync.Mutex
	subs map[string]*recheckSub // by followed id
	seen map[recordKey]int64    // versions read at the last tick
}

type recheckSub struct {
	tick chan struct{}
	keys []recordKey
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

// unchanged reports whether the last tick read k at version v (0: found
// no such record): the copy of k a follower holds at v is still the
// stored one as of that tick.
func (c *recheckClock) unchanged(k recordKey, v int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.seen[k]
	return ok && got == v
}

// tick reads the versions of every tracked record (a failed read leaves
// none known: every follower then reads afresh) and wakes every follower.
func (c *recheckClock) tick(ctx context.Context, db store.TerminalStore) {
	c.mu.Lock()
	byKind := map[string][]string{}
	dup := map[recordKey]bool{}
	for _, sub := range c.subs {
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
func watchVersion(w *store.Watch) int64         { return w.Revision }
func dispatchVersion(d *store.Dispatch) int64   { return d.Version }
