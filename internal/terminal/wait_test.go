package terminal

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/termapi"
)

// feedTurns is an in-memory Turn store with a change feed, so Wait runs in
// a synctest bubble: GetTurn counts the reads of each Turn, WriteTurn
// announces the Turn on the feed as the SQL stores do, and announce is a
// write by another process.
type feedTurns struct {
	store.Store // nil: only the methods below are used

	mu    sync.Mutex
	turns map[string]store.Turn
	reads map[string]int
	subs  map[string]map[chan struct{}]struct{}
}

func newFeedTurns(ids ...string) *feedTurns {
	f := &feedTurns{turns: map[string]store.Turn{}, reads: map[string]int{}, subs: map[string]map[chan struct{}]struct{}{}}
	for _, id := range ids {
		f.turns[id] = store.Turn{TurnID: id, Status: termapi.TurnRunning}
	}
	return f
}

func (f *feedTurns) GetTurn(_ context.Context, id string) (*store.Turn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.turns[id]
	if !ok {
		return nil, store.ErrNotFound
	}
	f.reads[id]++
	return &t, nil
}

func (f *feedTurns) WriteTurn(_ context.Context, w store.TurnWrite) error {
	f.announce(w.Turn.TurnID, w.Turn.Status)
	return nil
}

// announce stores the Turn's new status and wakes its watchers.
func (f *feedTurns) announce(id string, status termapi.TurnStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.turns[id]
	t.Status = status
	t.Version++
	f.turns[id] = t
	for ch := range f.subs[id] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (f *feedTurns) WatchTask(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs[id] == nil {
		f.subs[id] = map[chan struct{}]struct{}{}
	}
	f.subs[id][ch] = struct{}{}
	return ch, func() { f.mu.Lock(); delete(f.subs[id], ch); f.mu.Unlock() }
}

func (f *feedTurns) readsOf(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[id]
}

// TestWaitWakesOnItsOwnTurnOnly: a Wait re-reads its Turn when that Turn
// changes, by this process or (on the change feed) by another one, and
// not when another Turn changes; neither wake-up waits for a timer.
func TestWaitWakesOnItsOwnTurnOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const a, b, c = "turn-20260101T000000-0000000a", "turn-20260101T000000-0000000b", "turn-20260101T000000-0000000c"
		f := newFeedTurns(a, b, c)
		svc := NewService(Options{Store: f})
		ctx := t.Context()
		start := time.Now()
		type result struct {
			v   termapi.TurnView
			err error
			at  time.Duration
		}
		wait := func(id string) chan result {
			ch := make(chan result, 1)
			go func() { v, err := svc.Wait(ctx, id); ch <- result{v, err, time.Since(start)} }()
			return ch
		}
		doneA, doneC := wait(a), wait(c)
		synctest.Wait()
		if f.readsOf(a) != 1 || f.readsOf(c) != 1 {
			t.Fatalf("reads before any change: a %d, c %d", f.readsOf(a), f.readsOf(c))
		}
		// Another Turn changes: by another process, then by this one.
		f.announce(b, termapi.TurnWaitingForAgent)
		synctest.Wait()
		tb, _ := f.GetTurn(ctx, b)
		if err := svc.write(ctx, tb); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if f.readsOf(a) != 1 || f.readsOf(c) != 1 {
			t.Fatalf("a change of another Turn woke the waiters: reads a %d, c %d", f.readsOf(a), f.readsOf(c))
		}
		// Turn a ends in another process; Turn c in this one.
		f.announce(a, termapi.TurnIdle)
		ra := <-doneA
		tc, _ := f.GetTurn(ctx, c)
		tc.Status = termapi.TurnClosed
		if err := svc.write(ctx, tc); err != nil {
			t.Fatal(err)
		}
		rc := <-doneC
		for _, r := range []result{ra, rc} {
			if r.err != nil || r.at != 0 {
				t.Fatalf("wait = %+v, want the end at once (not after a re-check timer)", r)
			}
		}
		if ra.v.Status != termapi.TurnIdle || rc.v.Status != termapi.TurnClosed || f.readsOf(a) != 2 {
			t.Fatalf("a %s (%d reads), c %s", ra.v.Status, f.readsOf(a), rc.v.Status)
		}
	})
}

// TestWaitRechecksWhenAnAnnouncementIsLost: a change the feed never
// announced is seen at the slow re-check.
func TestWaitRechecksWhenAnAnnouncementIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const a = "turn-20260101T000000-0000000a"
		f := newFeedTurns(a)
		svc := NewService(Options{Store: f})
		start := time.Now()
		done := make(chan error, 1)
		go func() { _, err := svc.Wait(t.Context(), a); done <- err }()
		synctest.Wait()
		f.mu.Lock()
		f.turns[a] = store.Turn{TurnID: a, Status: termapi.TurnIdle} // written, never announced
		f.mu.Unlock()
		if err := <-done; err != nil || time.Since(start) != waitRecheck {
			t.Fatalf("wait = %v after %s, want the end at the %s re-check", err, time.Since(start), waitRecheck)
		}
	})
}

// readSignal passes a store through and reports each Turn read, so a
// benchmark knows when Wait is blocked on its Turn. It hides the store's
// change feed: a Wait over it re-reads on the poll, as every Wait did
// before Waits followed the feed.
type readSignal struct {
	store.Store
	read chan struct{}
}

func (r readSignal) GetTurn(ctx context.Context, id string) (*store.Turn, error) {
	t, err := r.Store.GetTurn(ctx, id)
	select {
	case r.read <- struct{}{}:
	default:
	}
	return t, err
}

// readSignalFeed is readSignal with the store's change feed.
type readSignalFeed struct{ readSignal }

func (r readSignalFeed) WatchTask(id string) (<-chan struct{}, func()) {
	return r.Store.WatchTask(id)
}

// BenchmarkWaitWake measures how long a Wait in one process takes to see
// that another process (its own store handle on the same SQLite file)
// ended the Turn: "feed" wakes on the store's change feed, "poll" re-reads
// every second as Waits did before.
func BenchmarkWaitWake(b *testing.B) {
	a := newFakeAgent(termapi.AgentCodex, 360)
	r := newRig(b, a)
	ctx := b.Context()
	other := secondHandle(b, r)
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	setStatus := func(status termapi.TurnStatus) {
		t, err := r.st.GetTurn(ctx, res.TurnID)
		if err != nil {
			b.Fatal(err)
		}
		t.Status = status
		if err := r.st.WriteTurn(ctx, store.TurnWrite{Turn: t}); err != nil {
			b.Fatal(err)
		}
	}
	for _, mode := range []string{"feed", "poll"} {
		b.Run(mode, func(b *testing.B) {
			sig := readSignal{Store: other, read: make(chan struct{}, 1)}
			var st store.Store = sig
			if mode == "feed" {
				st = readSignalFeed{sig}
			}
			waiter := NewService(Options{Store: st})
			var total time.Duration
			for b.Loop() {
				setStatus(termapi.TurnRunning)
				select {
				case <-sig.read: // the previous iteration's last read
				default:
				}
				done := make(chan time.Time, 1)
				go func() {
					if _, err := waiter.Wait(ctx, res.TurnID); err != nil {
						b.Error(err)
					}
					done <- time.Now()
				}()
				<-sig.read
				written := time.Now()
				// Not idle: an idle Turn never runs again, and the next
				// iteration sets it running.
				setStatus(termapi.TurnWaitingForOpenClaw)
				total += (<-done).Sub(written)
			}
			b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "wake-ms/op")
		})
	}
}

// TestATurnWriteIsAnnouncedToAnotherStoreHandle: a Turn written through one
// SQLite store handle wakes the watchers of that Turn on another handle
// (another process), so their Waits need no re-check.
func TestATurnWriteIsAnnouncedToAnotherStoreHandle(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 361)
	r := newRig(t, a)
	testTurnWriteAnnounced(t, r, a, secondHandle(t, r))
}

func testTurnWriteAnnounced(t *testing.T, r *rig, a *fakeAgent, other store.Store) {
	ctx := t.Context()
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	changed, stop := other.WatchTask(res.TurnID)
	defer stop()
	tr, err := r.st.GetTurn(ctx, res.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	tr.Status = termapi.TurnWaitingForAgent
	if err := r.st.WriteTurn(ctx, store.TurnWrite{Turn: tr}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the other store handle was not told of the Turn's change")
	}
}

// secondHandle moves the rig onto a SQLite file of its own and returns a
// second store handle on that file, as another process would open it.
func secondHandle(tb testing.TB, r *rig) store.Store {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), sqlite.FileName)
	var stores [2]store.Store
	for i := range stores {
		st, err := sqlite.Open(tb.Context(), sqlite.Options{Path: path})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = st.Close() })
		stores[i] = st
	}
	r.st = stores[0]
	r.svc = r.service()
	return stores[1]
}
