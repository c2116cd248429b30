// Package host is the monitor host of terminal turns: one long-lived
// scheduler per process that follows every open Turn and terminal watch of
// the store, one follower goroutine each, under a work lease in the store
// that keeps one follower per Turn across processes. It claims, renews and
// gives back those leases, rescans for work whose process died, wakes each
// follower on session-file events, pane output and its re-check tick, and,
// on a named host, publishes its panes and runs the operations other hosts
// queue for them. What a follower looks at is the Turn service's (Service):
// the host only says when.
package host

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/terminal/fswatch"
)

// Service is the Turn service as its host drives it (the terminal
// package's Service implements it, and Shared when it names a host).
type Service interface {
	// Attach makes h the host the service hands new work to (Host.Watch)
	// and tells of every change of a Turn (Host.Changed).
	Attach(h *Host)
	// Follow follows the Turn, or the terminal watch of a "watch-" id,
	// for h: it claims the id's work lease (Host.Claim) and looks at it
	// from h's wake-ups (Host.Loop) until it needs no follower, h loses
	// the lease, or ctx ends.
	Follow(ctx context.Context, h *Host, id string) error
	// Recover finishes, at each rescan, what stopped processes left
	// half-done (thread transitions; on a host that serves its machine,
	// Turns another host stalled while this one was away). It hands the
	// work it resumes to h.
	Recover(ctx context.Context, h *Host)
}

// Outbox is the callback outbox as a host runs it (outbox.Outbox).
type Outbox interface {
	// AdoptOwner makes id the owner of its delivery attempts unless its
	// options named one; called before Run.
	AdoptOwner(id string)
	// Run delivers due callbacks until ctx ends.
	Run(ctx context.Context) error
	// Kick asks Run to look for due callbacks now; it never blocks.
	Kick()
}

// Options configures a monitor Host. Zero values are the documented
// defaults.
type Options struct {
	// Store holds the leases, the process registry and the work feed;
	// required.
	Store store.Store
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Owner names this host in monitor leases and in the store's process
	// registry; "" means this process's owner id (owner.Self).
	Owner string
	// Role is the host's role in the process registry; "" means Role. A
	// role that does not start with Role (a command following its own
	// Turn) is not counted on by Live.
	Role string
	// LeaseTTL is how long a monitor lease lasts unrenewed; 30 s. A Turn
	// whose host died is taken over after it.
	LeaseTTL time.Duration
	// Recheck is the slow safety re-check of each Turn between file and
	// pane events; 10 s.
	Recheck time.Duration
	// Rescan is how often the store is scanned for open Turns that no live
	// host follows; 15 s.
	Rescan time.Duration
	// Watch wakes a follower when one of paths (files or directories)
	// changes; nil means the host's one shared inotify watcher
	// (fswatch), whatever the number of followers. The channel must stay
	// open until ctx ends.
	Watch func(ctx context.Context, paths []string) (<-chan struct{}, error)
	// Outbox, when set, delivers the callback outbox while Run runs; a
	// change of any Turn wakes it. Unless its options name an Owner, it
	// holds attempt leases under the host's Owner.
	Outbox Outbox
}

// Host runs one monitor goroutine per open Turn, in one long-lived process.
// Monitors wake on session-file events, pane output and a slow re-check;
// a lease in the store keeps one monitor per Turn across processes, and the
// stored completion claim one completion per Turn.
type Host struct {
	s     Service
	o     Options
	log   *slog.Logger
	files *fswatch.Watcher // nil when Options.Watch was given

	mu      sync.Mutex
	ctx     context.Context // set while Run runs
	running map[string]bool
	pending map[string]bool
	again   map[string]bool // Watch called while the monitor was stopping
	// began is set once a monitor ran here: the host announces at exit
	// that what it followed may be free (its monitors may have ended
	// before Run saw ctx end, so running may be empty by then).
	began bool
	// held are the work leases this host's followers hold, by id: the
	// host renews them together and stops the follower of one it lost.
	held map[string]heldLease
	// clock is the followers' shared re-check tick.
	clock recheckClock
	wg    sync.WaitGroup
	self  owner.Identity
	// shared is the service's part in a named host's work for the other
	// hosts; nil on a single machine.
	shared Shared
}

// New returns a Host that follows the work of s; s hands it new Turns
// (Service.Attach).
func New(s Service, o Options) *Host {
	self := owner.Self()
	if o.Owner == "" {
		o.Owner = self.ID
	}
	self.ID = o.Owner
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Role == "" {
		o.Role = Role
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.Recheck <= 0 {
		o.Recheck = 10 * time.Second
	}
	if o.Rescan <= 0 {
		o.Rescan = 15 * time.Second
	}
	var files *fswatch.Watcher
	if o.Watch == nil {
		files = fswatch.New(fswatch.Options{Logger: o.Logger})
		o.Watch = files.Watch
	}
	if x := o.Outbox; x != nil {
		// One identity for the process: a host that proves this one dead
		// frees its delivery attempts with its monitor leases.
		x.AdoptOwner(o.Owner)
	}
	h := &Host{s: s, o: o, log: o.Logger, files: files, running: map[string]bool{}, pending: map[string]bool{}, again: map[string]bool{},
		held: map[string]heldLease{}, self: self}
	if sh, ok := s.(Shared); ok && sh.HostName() != "" {
		h.shared = sh
	}
	s.Attach(h)
	return h
}

// Owner is the host's lease owner name.
func (h *Host) Owner() string { return h.o.Owner }

// Run resumes every open Turn of the store, follows new ones, and rescans
// for Turns whose host died, until ctx ends; it then waits for its
// monitors to stop.
func (h *Host) Run(ctx context.Context) error {
	h.mu.Lock()
	h.ctx = ctx
	pending := h.pending
	h.pending = map[string]bool{}
	h.mu.Unlock()
	h.heartbeat(ctx)
	defer func() { _ = h.o.Store.RemoveProcess(context.WithoutCancel(ctx), h.o.Owner) }()
	h.reapDead(ctx) // before the first scan: a dead predecessor's Turns are free at once
	for id := range pending {
		h.Watch(id)
	}
	h.publish(ctx)
	if x := h.o.Outbox; x != nil {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			_ = x.Run(ctx)
		}()
	}
	// Work sent by a command of another process (or one whose own host
	// stopped) is announced on the store's feed: taken at once, not at
	// the next rescan.
	work, stopWork := h.o.Store.WatchTerminalWork()
	defer stopWork()
	t := time.NewTicker(h.o.Rescan)
	defer t.Stop()
	beat := time.NewTicker(h.o.LeaseTTL / 3)
	defer beat.Stop()
	recheck := time.NewTicker(h.o.Recheck)
	defer recheck.Stop()
	scan := h.rescan
	for {
		scan(ctx)
		scan = h.rescan
		h.runHostOps(ctx)
		select {
		case <-ctx.Done():
			h.mu.Lock()
			h.ctx = nil
			followed := h.began
			h.mu.Unlock()
			h.wg.Wait()
			if h.files != nil {
				_ = h.files.Close() // its reader ends before Run returns
			}
			if followed {
				// The leases this host gave back are free now: another
				// host takes the work over at once.
				h.o.Store.AnnounceTerminalWork(context.WithoutCancel(ctx))
			}
			return nil
		case <-t.C:
		case <-recheck.C:
			h.clock.tick(ctx, h.o.Store)
			scan = noScan
		case <-work:
			scan = h.scanNew
			h.wakeOutbox()
		case <-beat.C:
			h.renew(ctx)
			h.publish(ctx)
			h.heartbeat(ctx)
			h.reapDead(ctx)
		}
	}
}

// noScan is Run's scan after an event that needs none.
func noScan(context.Context) {}

// scanNew starts a follower for each open Turn and active watch that no
// live process follows; unlike rescan it leaves running monitors and
// transitions alone. Like rescan it only reads (the ids, then the leases of
// those this host does not follow): an announcement by any host must not
// make every other host try to claim work that is followed already.
func (h *Host) scanNew(ctx context.Context) {
	ids, err := h.o.Store.OpenTurnIDs(ctx, store.MaxPage)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("scan announced terminal work", "err", err)
		}
		return
	}
	h.watchUnfollowed(ctx, store.LeaseMonitor, ids)
	h.rescanWatches(ctx)
}

// heartbeat registers the host in the store's process registry, so that a
// host that restarts after this one was killed can prove it dead.
func (h *Host) heartbeat(ctx context.Context) {
	if err := h.o.Store.Heartbeat(ctx, h.self.Process(h.o.Role, time.Now().UnixMilli())); err != nil && ctx.Err() == nil {
		h.log.Warn("terminal host heartbeat failed", "err", err)
	}
}

// reapDead frees every lease of a process this host proves dead (same
// machine, pid gone or reused) or that stopped beating ten leases ago, so
// its Turns' monitors are taken over now instead of when their leases
// expire. Run rescans right after it.
func (h *Host) reapDead(ctx context.Context) {
	h.self.ReapDead(ctx, h.o.Store, time.Now().Add(-10*h.o.LeaseTTL).UnixMilli(), h.log)
}

// rescan starts a follower for each open Turn and active watch that no
// live process follows. It only reads: the leases of the work this host
// does not follow are looked up, and only work whose lease is free or
// expired gets a follower, which then claims it.
func (h *Host) rescan(ctx context.Context) {
	h.s.Recover(ctx, h)
	ids, err := h.o.Store.OpenTurnIDs(ctx, store.MaxPage)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("scan open turns", "err", err)
		}
		return
	}
	h.watchUnfollowed(ctx, store.LeaseMonitor, ids)
	h.rescanWatches(ctx)
}

// watchUnfollowed starts a follower (Watch) for each of ids whose kind
// lease no live process holds and that this host does not follow yet.
func (h *Host) watchUnfollowed(ctx context.Context, kind string, ids []string) {
	h.mu.Lock()
	ids = slices.DeleteFunc(ids, func(id string) bool { return h.running[id] })
	h.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	leases, err := h.o.Store.WorkLeases(ctx, kind, ids)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("read work leases", "kind", kind, "err", err)
		}
		return
	}
	now := time.Now().UnixMilli()
	followed := make(map[string]bool, len(leases))
	for _, l := range leases {
		followed[l.ID] = l.Until >= now && l.Owner != h.o.Owner
	}
	for _, id := range ids {
		if !followed[id] {
			h.Watch(id)
		}
	}
}

// rescanWatches starts a follower for every active watch no live host
// follows (a restarted host resumes them here).
func (h *Host) rescanWatches(ctx context.Context) {
	ids, err := h.o.Store.ActiveWatchIDs(ctx, store.MaxPage)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("scan active watches", "err", err)
		}
		return
	}
	h.watchUnfollowed(ctx, store.LeaseWatch, ids)
}

// heldLease is a work lease one of the host's followers holds.
type heldLease struct {
	kind  string
	fence int64 // tells a renewal's snapshot from a later claim of the same id
	stop  context.CancelFunc
}

// Claim takes kind's lease of id (a store.Lease* kind) for the host. It
// returns a context that ends when the host loses the lease (a renewal
// finds it taken) and the release the follower must call when it stops;
// store.ErrLeaseLost when another live process holds it.
func (h *Host) Claim(ctx context.Context, kind, id string) (store.WorkLease, context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return store.WorkLease{}, ctx, nil, err
	}
	// The claim is not cut short by a stop: a driver that sees the cancel
	// after the row was written reports the cancel, and the lease would
	// stay held with no follower to give it back. A claim made as the
	// host stops is released by its follower, whose context is done. It
	// is bounded by the lease's time, past which its lease would be
	// worthless, so a stop during a store outage does not hang on it.
	now := time.Now()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.o.LeaseTTL)
	l, err := h.o.Store.ClaimWork(cctx, kind, id, h.o.Owner, now.UnixMilli(), now.Add(h.o.LeaseTTL).UnixMilli())
	cancel()
	if err != nil {
		return l, ctx, nil, err
	}
	lctx, stop := context.WithCancel(ctx)
	h.mu.Lock()
	h.held[id] = heldLease{kind: kind, fence: l.Fence, stop: stop}
	h.mu.Unlock()
	release := func() {
		h.mu.Lock()
		delete(h.held, id)
		h.mu.Unlock()
		stop()
		if err := h.o.Store.ReleaseWork(context.WithoutCancel(ctx), l); err != nil {
			h.log.Warn("release work lease", "kind", kind, "id", id, "err", err)
		}
	}
	return l, lctx, release, nil
}

// renew extends every lease the host's followers hold, one statement per
// kind, and stops the follower of each lease it lost.
func (h *Host) renew(ctx context.Context) {
	h.mu.Lock()
	byKind := map[string][]string{}
	renewed := make(map[string]int64, len(h.held))
	for id, l := range h.held {
		byKind[l.kind] = append(byKind[l.kind], id)
		renewed[id] = l.fence
	}
	h.mu.Unlock()
	until := time.Now().Add(h.o.LeaseTTL).UnixMilli()
	for kind, ids := range byKind {
		lost, err := h.o.Store.RenewWork(ctx, kind, h.o.Owner, until, ids)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("renew work leases", "kind", kind, "err", err)
			}
			continue
		}
		h.mu.Lock()
		for _, id := range lost {
			if l, ok := h.held[id]; ok && l.fence == renewed[id] {
				h.log.Info("work lease lost; another process follows it now", "kind", kind, "id", id)
				l.stop()
				delete(h.held, id)
			}
		}
		h.mu.Unlock()
	}
}

// Watch starts a follower for the Turn (or for the terminal watch of a
// "watch-" id) unless this host already runs one. Before Run it queues the
// id and reports false. It never blocks.
func (h *Host) Watch(turnID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil {
		h.pending[turnID] = true
		return false
	}
	if h.running[turnID] {
		// The running monitor may be about to stop (it saw the Turn
		// leave the monitored statuses): it checks once more first.
		h.again[turnID] = true
		return true
	}
	h.running[turnID] = true
	h.began = true
	h.wg.Add(1)
	go h.follow(h.ctx, turnID)
	return true
}

// Changed is told of every change of a Turn this process makes: it wakes
// the outbox. It never blocks.
func (h *Host) Changed() {
	if x := h.o.Outbox; x != nil {
		x.Kick()
	}
}

// follow runs the follower of id until it stops, then again if Watch was
// called meanwhile.
func (h *Host) follow(ctx context.Context, turnID string) {
	defer h.wg.Done()
	for {
		err := h.s.Follow(ctx, h, turnID)
		if err != nil && ctx.Err() == nil {
			h.log.Warn("terminal monitor stopped", "turn_id", turnID, "err", err)
		}
		h.mu.Lock()
		if !h.again[turnID] || ctx.Err() != nil {
			delete(h.running, turnID)
			delete(h.again, turnID)
			h.mu.Unlock()
			return
		}
		delete(h.again, turnID)
		h.mu.Unlock()
	}
}

// Monitoring reports how many followers this host runs now.
func (h *Host) Monitoring() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.running)
}
