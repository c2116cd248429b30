package terminal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/terminal/fswatch"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

// HostOptions configures a monitor Host. Zero values are the documented
// defaults.
type HostOptions struct {
	// Owner names this host in monitor leases and in the store's process
	// registry; "" means this process's owner id (owner.Self).
	Owner string
	// Role is the host's role in the process registry; "" means
	// HostRole. A role that does not start with HostRole (a command
	// following its own Turn) is not counted on by LiveHost.
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
	// Watch wakes a monitor when one of paths (files or directories)
	// changes; nil means the host's one shared inotify watcher
	// (fswatch), whatever the number of followers. The channel must stay
	// open until ctx ends.
	Watch func(ctx context.Context, paths []string) (<-chan struct{}, error)
	// ScanGrace is how long a Turn's session-file scan may keep failing
	// (a *native.ScanError: a malformed line, a truncated or replaced
	// file, a symbolic link or FIFO at its path) before the Turn stalls
	// with the scan's code as the reason; DefaultScanGrace. Such a
	// failure does not mend by waiting, and file activity would keep the
	// inactivity timeout from ever firing; the grace only lets a file
	// that is put back at once (a rename dance, a permission change)
	// recover without a stall.
	ScanGrace time.Duration
	// Outbox, when set, delivers the callback outbox while Run runs; a
	// change of any Turn wakes it. Unless its options name an Owner, it
	// holds attempt leases under the host's Owner.
	Outbox *Outbox
}

// DefaultScanGrace is HostOptions.ScanGrace's default: long enough for a
// session file swapped and put back by a tool to read again, short next to
// the inactivity timeout a Turn would otherwise wait out.
const DefaultScanGrace = 30 * time.Second

// Host runs one monitor goroutine per open Turn, in one long-lived process.
// Monitors wake on session-file events, pane output and a slow re-check;
// a lease in the store keeps one monitor per Turn across processes, and the
// stored completion claim one completion per Turn.
type Host struct {
	s     *Service
	o     HostOptions
	log   *slog.Logger
	files *fswatch.Watcher // nil when HostOptions.Watch was given

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
}

// NewHost returns a Host for s; s.Send and friends hand it new Turns.
func NewHost(s *Service, o HostOptions) *Host {
	self := owner.Self()
	if o.Owner == "" {
		o.Owner = self.ID
	}
	self.ID = o.Owner
	if o.Role == "" {
		o.Role = HostRole
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
		files = fswatch.New(fswatch.Options{Logger: s.log})
		o.Watch = files.Watch
	}
	if o.ScanGrace <= 0 {
		o.ScanGrace = DefaultScanGrace
	}
	if x := o.Outbox; x != nil && !x.ownOwner {
		// One identity for the process: a host that proves this one dead
		// frees its delivery attempts with its monitor leases.
		x.o.Owner = o.Owner
	}
	h := &Host{s: s, o: o, log: s.log, files: files, running: map[string]bool{}, pending: map[string]bool{}, again: map[string]bool{},
		held: map[string]heldLease{}, self: self}
	s.mu.Lock()
	s.watch = h.take
	s.mu.Unlock()
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
	reg, _ := h.s.o.Store.(registry)
	if reg != nil {
		h.heartbeat(ctx, reg)
		defer func() { _ = reg.RemoveProcess(context.WithoutCancel(ctx), h.o.Owner) }()
		h.reapDead(ctx, reg) // before the first scan: a dead predecessor's Turns are free at once
	}
	for id := range pending {
		h.Watch(id)
	}
	h.publish(ctx)
	h.resumeHostLost(ctx)
	if x := h.o.Outbox; x != nil {
		h.s.setKick(x.Kick)
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			_ = x.Run(ctx)
		}()
	}
	// Work sent by a command of another process (or one whose own host
	// stopped) is announced on the store's feed: taken at once, not at
	// the next rescan.
	feed, _ := h.s.o.Store.(store.TerminalWorkFeed)
	var work <-chan struct{}
	if feed != nil {
		var stop func()
		work, stop = feed.WatchTerminalWork()
		defer stop()
	}
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
			if feed != nil && followed {
				// The leases this host gave back are free now: another
				// host takes the work over at once.
				feed.AnnounceTerminalWork(context.WithoutCancel(ctx))
			}
			return nil
		case <-t.C:
		case <-recheck.C:
			h.clock.tick(ctx, h.s.o.Store)
			scan = noScan
		case <-work:
			scan = h.scanNew
			h.wakeOutbox()
		case <-beat.C:
			h.renew(ctx)
			h.publish(ctx)
			if reg != nil {
				h.heartbeat(ctx, reg)
				h.reapDead(ctx, reg)
			}
		}
	}
}

// noScan is Run's scan after an event that needs none.
func noScan(context.Context) {}

// scanNew starts a monitor for each open Turn and active watch this host
// does not follow yet; unlike rescan it leaves running monitors and
// transitions alone, so an announcement costs two reads.
func (h *Host) scanNew(ctx context.Context) {
	ids, err := h.openWork(ctx)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("scan announced terminal work", "err", err)
		}
		return
	}
	h.mu.Lock()
	var todo []string
	for _, id := range ids {
		if !h.running[id] {
			todo = append(todo, id)
		}
	}
	h.mu.Unlock()
	for _, id := range todo {
		h.Watch(id)
	}
}

// openWork lists the ids of the open Turns and active watches (ids only:
// no record is decoded).
func (h *Host) openWork(ctx context.Context) ([]string, error) {
	ids, err := h.s.o.Store.OpenTurnIDs(ctx, store.MaxPage)
	if err != nil {
		return nil, err
	}
	if ws, ok := h.s.o.Store.(store.WatchStore); ok {
		wids, err := ws.ActiveWatchIDs(ctx, store.MaxPage)
		if err != nil {
			return nil, err
		}
		ids = append(ids, wids...)
	}
	return ids, nil
}

// registry is the part of the store through which hosts (and task
// managers) prove each other dead and free a dead process's leases.
type registry interface {
	store.ProcessRegistry
	ReleaseLeases(ctx context.Context, owner string, ids []string) (int, error)
}

// heartbeat registers the host in the store's process registry, so that a
// host that restarts after this one was killed can prove it dead.
func (h *Host) heartbeat(ctx context.Context, reg registry) {
	if err := reg.Heartbeat(ctx, h.self.Process(h.o.Role, time.Now().UnixMilli())); err != nil && ctx.Err() == nil {
		h.log.Warn("terminal host heartbeat failed", "err", err)
	}
}

// reapDead frees every lease of a process this host proves dead (same
// machine, pid gone or reused) or that stopped beating ten leases ago, so
// its Turns' monitors are taken over now instead of when their leases
// expire. Run rescans right after it.
func (h *Host) reapDead(ctx context.Context, reg registry) {
	h.self.ReapDead(ctx, reg, time.Now().Add(-10*h.o.LeaseTTL).UnixMilli(), h.log)
}

// rescan starts a follower for each open Turn and active watch that no
// live process follows. It only reads: the leases of the work this host
// does not follow are looked up, and only work whose lease is free or
// expired gets a follower, which then claims it.
func (h *Host) rescan(ctx context.Context) {
	if _, err := h.s.RecoverTransitions(ctx); err != nil && ctx.Err() == nil {
		h.log.Warn("recover transitions", "err", err)
	}
	ids, err := h.s.o.Store.OpenTurnIDs(ctx, store.MaxPage)
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("scan open turns", "err", err)
		}
		return
	}
	h.watchUnfollowed(ctx, store.LeaseMonitor, ids)
	h.rescanWatches(ctx)
	h.resumeHostLost(ctx)
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
	leases, err := h.s.o.Store.WorkLeases(ctx, kind, ids)
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

// heldLease is a work lease one of the host's followers holds.
type heldLease struct {
	kind  string
	fence int64 // tells a renewal's snapshot from a later claim of the same id
	stop  context.CancelFunc
}

// claim takes kind's lease of id for the host. It returns a context that
// ends when the host loses the lease (a renewal finds it taken) and the
// release the follower must call when it stops.
func (h *Host) claim(ctx context.Context, kind, id string) (store.WorkLease, context.Context, func(), error) {
	now := time.Now()
	l, err := h.s.o.Store.ClaimWork(ctx, kind, id, h.o.Owner, now.UnixMilli(), now.Add(h.o.LeaseTTL).UnixMilli())
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
		if err := h.s.o.Store.ReleaseWork(context.WithoutCancel(ctx), l); err != nil {
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
		lost, err := h.s.o.Store.RenewWork(ctx, kind, h.o.Owner, until, ids)
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

// Watch starts a monitor for the Turn (or the follower of a terminal
// watch, for a "watch-" id) unless this host already runs one. Before Run
// it queues the id. It never blocks.
func (h *Host) Watch(turnID string) { h.take(turnID) }

// take is Watch; it reports whether the host runs (false: it queued the
// id for Run).
func (h *Host) take(turnID string) bool {
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
	go h.monitor(h.ctx, turnID)
	return true
}

// monitor runs the Turn's monitor until it stops, then again if Watch was
// called meanwhile.
func (h *Host) monitor(ctx context.Context, turnID string) {
	defer h.wg.Done()
	for {
		var err error
		if isWatchID(turnID) {
			err = (&watcher{h: h, s: h.s, id: turnID}).run(ctx)
		} else {
			err = (&monitor{h: h, s: h.s, turnID: turnID}).run(ctx)
		}
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

// Monitoring reports how many monitors this host runs now.
func (h *Host) Monitoring() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.running)
}

// monitor follows one Turn.
type monitor struct {
	h      *Host
	s      *Service
	turnID string
	lease  store.MonitorLease

	pane       Pane
	agent      Agent
	activityAt time.Time
	diagnostic string
	// scanFailingSince is when the session-file scans began to fail
	// without a break (zero while they succeed).
	scanFailingSince time.Time
	// turn and sess are the Turn and Session as the last look left them
	// (the Turn as stored by its last write, unless spoiled: a write
	// failed after the look changed it); a re-check reuses them while
	// their stored versions stay (recheckClock).
	turn    *store.Turn
	sess    *store.TermSession
	spoiled bool
	// evidenceWait is the approval prompt whose auto-approval waits for
	// the session file to record its call, and since when (autoapprove.go).
	evidenceWait struct {
		fingerprint string
		since       time.Time
	}
}

func (m *monitor) run(ctx context.Context) error {
	if stop, err := m.h.screenForeign(ctx, m.turnID); stop {
		return err
	}
	l, ctx, release, err := m.h.claim(ctx, store.LeaseMonitor, m.turnID)
	if errors.Is(err, store.ErrLeaseLost) {
		return nil // another host follows it
	}
	if err != nil {
		return err
	}
	m.lease = l
	defer release()
	t, err := m.s.o.Store.GetTurn(ctx, m.turnID)
	if err != nil {
		return err
	}
	if !store.TurnMonitored(t.Status) {
		return nil
	}
	if err := json.Unmarshal(t.Takeover.TerminalControl, &m.pane); err != nil {
		return fmt.Errorf("turn %s has no readable pane record: %w", m.turnID, err)
	}
	if m.agent, err = m.s.agent(t.Agent); err != nil {
		return err
	}
	m.activityAt = time.UnixMilli(t.Takeover.LastActivityAt)
	anchor := t.Takeover.Submission.Anchor
	if ev := t.Takeover.Submission.AcceptanceEvidence; len(ev) > 0 {
		anchor = ev
	}
	return m.h.follow(ctx, m.pane, m.agent.WatchPaths(m.pane, anchor), "turn_id", m.turnID, m.check)
}

// follow calls check whenever the agent's session files (paths) or the
// pane's output change, at every re-check tick and when check's next
// timeout falls due. It returns when check says stop, the lease is lost
// (check's write fails with store.ErrLeaseLost, or the host's renewal
// ends ctx), or ctx ends; logKey and logID name what is followed in
// warnings.
func (h *Host) follow(ctx context.Context, pane Pane, paths []string, logKey, logID string,
	check func(ctx context.Context, w wake) (stop bool, next time.Time, err error)) error {
	s := h.s
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	files, err := h.o.Watch(wctx, paths)
	filesWatched := err == nil && len(paths) > 0
	switch {
	case errors.Is(err, fswatch.ErrLimit):
		// The watcher warned once, with the sysctl to raise; doctor
		// reports the exhausted limit too.
		s.log.Debug("watch session files; falling back to the re-check", logKey, logID, "err", err)
	case err != nil:
		s.log.Warn("watch session files; falling back to the re-check", logKey, logID, "err", err)
	}
	var output <-chan struct{}
	if ow, ok := s.o.Terminals.(OutputWatcher); ok {
		if output, err = ow.WatchOutput(wctx, pane); err != nil {
			s.log.Warn("watch pane output", logKey, logID, "err", err)
		}
	}
	recheck, unsubscribe := h.clock.subscribe(logID)
	defer unsubscribe()
	h.clock.cover(logID, filesWatched && output != nil)
	deadline := time.NewTimer(time.Hour)
	defer deadline.Stop()
	var w wake
	for {
		stop, next, err := check(ctx, w)
		fileEvent := w.file
		lastCheck := time.Now()
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, store.ErrLeaseLost) {
				return nil
			}
			s.log.Warn("terminal follower check", logKey, logID, "err", err)
		}
		if stop {
			return nil
		}
		if fileEvent {
			// The screen often follows the file (an approval prompt is
			// drawn after the tool call is written): look again soon.
			if soon := time.Now().Add(300 * time.Millisecond); soon.Before(next) {
				next = soon
			}
		}
		w = wake{}
		deadline.Reset(max(time.Until(next), 10*time.Millisecond))
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-files:
				w.file = true
				break wait
			case _, ok := <-output:
				if !ok {
					output = nil // the control client ended; the re-check remains
					h.clock.cover(logID, false)
					continue
				}
				// A redrawing pane writes many times a second: one look
				// per outputGap at most.
				if gap := outputGap - time.Since(lastCheck); gap > 0 {
					deadline.Reset(gap)
					continue
				}
				break wait
			case <-recheck:
				w.recheck = true
				break wait
			case <-deadline.C:
				break wait
			}
		}
	}
}

// wake is why a follower looks: a session-file event, the host's
// re-check tick (which read the versions of the follower's records), or
// neither (its first look, pane output, a timeout falling due).
type wake struct{ file, recheck bool }

// outputGap is the shortest time between two looks woken by pane output.
const outputGap = 250 * time.Millisecond

func (m *monitor) fence() *store.Fence {
	return &store.Fence{Owner: m.lease.Owner, Token: m.lease.Fence, Now: time.Now().UnixMilli()}
}

// write stores t fenced by the lease.
func (m *monitor) write(ctx context.Context, w store.TurnWrite) error {
	w.Fence = m.fence()
	w.Turn.UpdatedAt = time.Now().UnixMilli()
	if err := m.s.o.Store.WriteTurn(ctx, w); err != nil {
		m.spoiled = true // the look's copy now differs from the stored Turn
		return err
	}
	m.s.notify(w.Turn.TurnID)
	if w.Also != nil { // a callback was queued
		m.s.announceCallback(ctx)
	}
	return nil
}

// check looks at the Turn once. It returns stop when the Turn no longer
// needs a monitor, and when the next timeout falls due.
func (m *monitor) check(ctx context.Context, w wake) (bool, time.Time, error) {
	never := time.Now().Add(time.Hour)
	held := m.turn
	m.turn = nil
	t, err := reuse(&m.h.clock, w, recordKey{store.VersionTurn, m.turnID}, held, turnVersion,
		func() (*store.Turn, error) { return m.s.o.Store.GetTurn(ctx, m.turnID) })
	if err != nil {
		return false, never, err
	}
	defer func() {
		if !m.spoiled {
			m.turn = t
		}
		m.spoiled = false
	}()
	if !store.TurnMonitored(t.Status) {
		return true, never, nil
	}
	sess, err := reuse(&m.h.clock, w, recordKey{store.VersionSession, t.SessionID}, m.sess, sessionVersion,
		func() (*store.TermSession, error) { return m.s.o.Store.GetTermSession(ctx, t.SessionID) })
	if err != nil {
		return false, never, err
	}
	m.sess = sess
	m.h.clock.track(m.turnID, recordKey{store.VersionTurn, m.turnID}, recordKey{store.VersionSession, t.SessionID})
	if b := sess.Binding; b == nil || b.BindingID != t.TerminalBindingID || b.Generation != t.TerminalBindingGeneration {
		return true, never, m.stall(ctx, t, "binding_superseded", "the session was rebound to another terminal context")
	}
	now := time.Now()
	if w.file {
		m.activityAt = now
	}
	m.s.followKey(m.pane.Key)
	p, alive, derr := m.s.livePane(ctx, 500*time.Millisecond, m.pane)
	if alive {
		m.pane = p
	}
	dead := derr == nil && !alive
	if pc, ok := m.s.o.Terminals.(ProcessChecker); ok {
		// The incarnation itself decides: a pane that is briefly not
		// listed (or not controllable) is not a dead agent.
		if running, err := pc.Alive(m.pane); err == nil {
			dead = !running
		} else {
			dead = false
		}
	}
	sub := t.Takeover.Submission
	var scanErr *native.ScanError
	if sub.Status == store.DispatchPrepared || sub.Status == store.DispatchTextInjected {
		// A sender owns these phases. Once it has had longer than any send
		// takes, it is gone: the text may be in the composer. Never resend.
		if due := time.UnixMilli(sub.PreparedAt).Add(senderLeaseTTL); now.Before(due) {
			return false, due, nil
		}
		return true, never, m.abandonSend(ctx, t)
	}
	if sub.Status == store.DispatchEnterDispatched {
		acc, err := m.agent.Accepted(ctx, m.pane, sub.Anchor, m.requestText(t))
		if err != nil {
			m.diagnose(ctx, t, "acceptance: "+err.Error())
			errors.As(err, &scanErr)
		} else if acc != nil {
			if err := m.accept(ctx, t, *acc); err != nil {
				return false, never, err
			}
			sub = t.Takeover.Submission
		}
	}
	if sub.Status == store.DispatchAgentAccepted {
		c, err := m.agent.Completion(ctx, m.pane, sub.Anchor, Acceptance{NativeTurnID: sub.NativeTurnID, ThreadID: t.NativeThreadID, Evidence: sub.AcceptanceEvidence})
		if err != nil {
			m.diagnose(ctx, t, "completion: "+err.Error())
			errors.As(err, &scanErr)
		} else if c != nil {
			return true, never, m.complete(ctx, t, *c)
		}
	}
	if dead {
		reason := "bound_agent_process_verified_dead"
		if sub.Status != store.DispatchAgentAccepted {
			reason += "_completion_unverifiable"
		}
		return true, never, m.stallAgentGone(ctx, t, reason)
	}
	scanDue := never
	if scanErr == nil {
		m.scanFailingSince = time.Time{}
	} else {
		if m.scanFailingSince.IsZero() {
			m.scanFailingSince = now
		}
		if scanDue = m.scanFailingSince.Add(m.h.o.ScanGrace); !now.Before(scanDue) {
			return true, never, m.stall(ctx, t, string(scanErr.Code), fmt.Sprintf(
				"every scan of the agent's session file failed for %s (%s), so the Turn's end cannot be told from it; look at the pane", m.h.o.ScanGrace, Redact(scanErr.Error())))
		}
	}
	if alive {
		if err := m.screen(ctx, t, now); err != nil {
			return false, never, err
		}
	}
	if t.Status == store.TurnWaitingForOpenClaw {
		return false, scanDue, nil
	}
	// Timeouts: hard wins over inactivity.
	last := time.UnixMilli(t.Takeover.LastActivityAt)
	if m.activityAt.After(last) {
		last = m.activityAt
	}
	inact := time.Duration(t.Takeover.InactivityTimeoutMinutes * float64(time.Minute))
	hard := time.UnixMilli(t.Takeover.HardDeadlineAt)
	if t.Takeover.HardDeadlineAt > 0 && !now.Before(hard) {
		return true, never, m.stall(ctx, t, "hard_timeout",
			fmt.Sprintf("terminal bridge reached its hard lifetime of %g minutes", t.Takeover.HardTimeoutMinutes))
	}
	next := never
	if inact > 0 {
		due := last.Add(inact)
		if !now.Before(due) {
			return true, never, m.stall(ctx, t, "inactivity_timeout",
				fmt.Sprintf("terminal bridge observed no activity for %g minutes", t.Takeover.InactivityTimeoutMinutes))
		}
		next = due
		// Persist activity now and then, so a restarted host does not
		// stall a Turn that was active.
		if last.UnixMilli()-t.Takeover.LastActivityAt > min(inact.Milliseconds()/10, 30_000) {
			t.Takeover.LastActivityAt, t.Takeover.LastActivityReason = last.UnixMilli(), "observed"
			t.Takeover.InactivityDeadlineAt = due.UnixMilli()
			if err := m.write(ctx, store.TurnWrite{Turn: t}); err != nil {
				return false, next, err
			}
		}
	}
	if t.Takeover.HardDeadlineAt > 0 && hard.Before(next) {
		next = hard
	}
	if scanDue.Before(next) {
		next = scanDue
	}
	return false, next, nil
}

// approvalClaimStale is how long after an approve claimed a prompt the
// monitor stops waiting for it to record the prompt's resolution; an
// approve records it right after pressing the key.
const approvalClaimStale = 30 * time.Second

// screen reads the pane: question dialogs (question.go), approval prompts
// and screen activity.
func (m *monitor) screen(ctx context.Context, t *store.Turn, now time.Time) error {
	text, err := m.s.o.Terminals.Capture(ctx, m.pane)
	if err != nil {
		return nil // a failed capture proves nothing
	}
	// Only the agent's own session files count as activity: a spinner
	// that keeps redrawing over a hung model request is not progress.
	sc := m.agent.Screen(text)
	if err := m.forgetAnswered(ctx, t, sc); err != nil {
		return err
	}
	if handled, err := m.question(ctx, t, sc, now); handled {
		return err
	}
	switch {
	case sc.Approval != nil && t.Approval == nil && sc.Approval.Fingerprint == t.Takeover.LastApprovalFingerprint:
		// The prompt answered last is still drawn: the TUI redraws only
		// after it took the key, however long a loaded machine makes that.
		// It is being answered, not asked again, until a look finds it
		// gone (below).
		return nil
	case sc.Approval != nil && (t.Approval == nil || t.Approval.Fingerprint != sc.Approval.Fingerprint):
		handled, declined, err := m.autoApprove(ctx, t, sc.Approval)
		if handled {
			return err
		}
		cmd := ""
		if t.Agent == AgentCodex {
			cmd = Redact(sc.Approval.Command)
		}
		t.Approval = &store.Approval{Fingerprint: sc.Approval.Fingerprint, Kind: sc.Approval.Kind, Command: cmd, DetectedAt: now.UnixMilli()}
		t.Takeover.ApprovalBlocked = !sc.Approval.Approvable
		typ, body := MsgQuestion, "The agent asks for approval ("+sc.Approval.Kind+")."
		if !sc.Approval.Approvable {
			typ, body = MsgBlocked, "The agent shows an approval prompt that cannot be answered safely from here."
		}
		msg, err := newMessage(t, actorOf(t.Agent), ActorOpenClaw, typ, body, now.UnixMilli())
		if err != nil {
			return err
		}
		// The same prompt may be asked again (the screen showed it gone in
		// between): each asking is its own callback.
		msg.ID = callbackID(t.TurnID, t.Takeover.Submission.MessageID, sc.Approval.Fingerprint, typ, strconv.FormatInt(now.UnixMilli(), 10))
		ApplyMessage(t, msg)
		t.Takeover.LastApprovalFingerprint = sc.Approval.Fingerprint
		detected := map[string]any{"fingerprint": sc.Approval.Fingerprint, "approvable": sc.Approval.Approvable}
		meta := map[string]any{"reason": "approval_required", "approval_kind": sc.Approval.Kind, "approval_fingerprint": sc.Approval.Fingerprint,
			"approvable": sc.Approval.Approvable, "next_steps": nextSteps(t, now)}
		if declined != "" {
			// A rule of this agent and workspace exists: say why it did
			// not answer, so the person knows the rule was considered.
			detected["auto_approve_declined"], meta["auto_approve_declined"] = declined, declined
		}
		return m.write(ctx, store.TurnWrite{Turn: t, Events: []store.TurnEvent{
			event(now.UnixMilli(), "terminal_bridge_approval_detected", detected),
			event(now.UnixMilli(), "message", msg)},
			Also: prepareCallback(t, msg, msg.ID, KindApproval, meta)})
	case sc.Approval == nil && t.Status == store.TurnWaitingForOpenClaw && t.Approval != nil:
		data := map[string]any{"decision": "answered_in_terminal"}
		if t.Takeover.ApprovingFingerprint == t.Approval.Fingerprint {
			// An approve claimed this prompt: it records the resolution,
			// unless it has not done so long after pressing the key (its
			// process died in between), when the monitor records it.
			if now.Sub(time.UnixMilli(t.Takeover.ApprovingAt)) < approvalClaimStale {
				return nil
			}
			data = map[string]any{"fingerprint": t.Approval.Fingerprint, "decision": "approve", "recorded_by": "monitor"}
			t.Takeover.ApprovingFingerprint, t.Takeover.ApprovingAt = "", 0
		}
		// Answered in the terminal by a human (or by an approve whose
		// process stopped before recording it).
		t.Approval, t.Status = nil, store.TurnWaitingForAgent
		t.Takeover.ApprovalResolvedAt = now.UnixMilli()
		t.Takeover.LastApprovalFingerprint = "" // off the screen already
		return m.write(ctx, store.TurnWrite{Turn: t, Events: []store.TurnEvent{
			event(now.UnixMilli(), "terminal_bridge_approval_resolved", data)}})
	}
	return nil
}

// forgetAnswered drops the fingerprint of the prompt or question dialog
// answered last once a readable screen no longer shows it. Until then the same
// prompt on the screen is the answered one that the TUI has not redrawn
// yet, however long a loaded machine makes it take; from then on it is
// the agent asking again. It re-reads t after its write.
func (m *monitor) forgetAnswered(ctx context.Context, t *store.Turn, sc Screen) error {
	if sc.Activity == string(screen.Unknown) {
		return nil // a screen not read proves nothing gone (a frame half drawn)
	}
	tk := &t.Takeover
	approval := t.Approval == nil && tk.LastApprovalFingerprint != "" &&
		(sc.Approval == nil || sc.Approval.Fingerprint != tk.LastApprovalFingerprint)
	question := t.Question == nil && tk.LastQuestionFingerprint != "" && tk.AnsweringFingerprint == "" &&
		(sc.Question == nil || sc.Question.Fingerprint != tk.LastQuestionFingerprint)
	if !approval && !question {
		return nil
	}
	if approval {
		tk.LastApprovalFingerprint = ""
	}
	if question {
		tk.LastQuestionFingerprint = ""
	}
	if err := m.write(ctx, store.TurnWrite{Turn: t}); err != nil {
		return err
	}
	fresh, err := m.s.o.Store.GetTurn(ctx, t.TurnID)
	if err != nil {
		return err
	}
	*t = *fresh
	return nil
}

// requestText is the text of the message in flight.
func (m *monitor) requestText(t *store.Turn) string {
	if t.Takeover.Submission.MessageType == MsgAnswer {
		return t.Takeover.Submission.Text
	}
	return t.Takeover.RequestText
}

// diagnose records a detector error once (redacted); it never completes
// the Turn from a guess.
func (m *monitor) diagnose(ctx context.Context, t *store.Turn, msg string) {
	msg = Redact(msg)
	if msg == m.diagnostic {
		return
	}
	m.diagnostic = msg
	t.Takeover.DetectorDiagnostic = msg
	if err := m.write(ctx, store.TurnWrite{Turn: t, Events: []store.TurnEvent{event(time.Now().UnixMilli(), "terminal_bridge_detector_diagnostic", map[string]any{"diagnostic": msg})}}); err != nil {
		m.s.log.Warn("record detector diagnostic", "turn_id", t.TurnID, "err", err)
	}
}

// accept records acceptance found by the monitor after Send returned.
func (m *monitor) accept(ctx context.Context, t *store.Turn, acc Acceptance) error {
	d, err := m.s.o.Store.GetDispatch(ctx, t.Takeover.TerminalKey)
	if err != nil {
		return err
	}
	if d.TurnID != t.TurnID || d.MessageID != t.Takeover.Submission.MessageID {
		return fmt.Errorf("the terminal's dispatch ledger moved to turn %s", d.TurnID)
	}
	now := time.Now().UnixMilli()
	nd := *d
	nd.Status, nd.AgentAcceptedAt = store.DispatchAgentAccepted, now
	t.Takeover.Submission.Status = store.DispatchAgentAccepted
	t.Takeover.Submission.Outcome = OutcomeAccepted
	t.Takeover.Submission.NativeTurnID = acc.NativeTurnID
	t.Takeover.Submission.AcceptanceEvidence = acc.Evidence
	t.Takeover.Submission.AcceptedAt = now
	if t.NativeThreadID == "" && acc.ThreadID != "" {
		t.NativeThreadID = acc.ThreadID
		if err := m.s.refineThread(ctx, t.SessionID, t.TerminalBindingID, acc.ThreadID); err != nil {
			m.s.log.Warn("bind the native thread", "turn_id", t.TurnID, "err", err)
		}
	}
	return m.write(ctx, store.TurnWrite{Turn: t,
		Dispatch: &store.DispatchAdvance{TerminalKey: d.TerminalKey, GenerationID: d.GenerationID, Update: &nd},
		Events:   []store.TurnEvent{event(now, "terminal_message_agent_accepted", map[string]any{"native_turn_id": acc.NativeTurnID, "by": "monitor"})}})
}

// complete claims the Turn's one completion and records the reply.
func (m *monitor) complete(ctx context.Context, t *store.Turn, c Completion) error {
	sub := t.Takeover.Submission
	text := resultText(c.Text)
	b, _ := json.Marshal(map[string]string{"text": text, "match": c.Match, "id": c.ID, "native_turn_id": sub.NativeTurnID, "message_id": sub.MessageID})
	sum := sha256.Sum256(b)
	fp := hex.EncodeToString(sum[:])
	outcome := c.Outcome
	if outcome != "failed" && outcome != OutcomeCancelled {
		outcome = "completed"
	}
	now := time.Now().UnixMilli()
	typ, body := MsgDone, text
	kind, meta := KindCompletion, map[string]any{"completion_fingerprint": fp, "completion_id": c.ID,
		"completion_outcome": outcome, "match": c.Match, "rollout_turn_id": sub.NativeTurnID}
	switch outcome {
	case "failed":
		typ = MsgError
	case OutcomeCancelled:
		// Cancel sets the status before it presses the key and the monitor
		// stops: an interrupt read here was pressed in the terminal.
		typ, kind = MsgCancelled, KindCancellation
		body = "The agent's turn was interrupted in the terminal before it replied."
		meta["cancelled_by"] = CancelledInTerminal
	}
	if body == "" {
		body = "(the agent finished without reply text)"
	}
	msg, err := newMessage(t, actorOf(t.Agent), ActorOpenClaw, typ, body, now)
	if err != nil {
		return err
	}
	msg.ID = callbackID(t.TurnID, sub.MessageID, fp, outcome)
	ApplyMessage(t, msg)
	meta["next_steps"] = nextSteps(t, time.UnixMilli(now))
	t.Result = &store.TurnResult{Outcome: outcome, Text: text, Match: c.Match}
	t.Approval, t.Question = nil, nil
	claim := &store.CompletionClaim{TurnID: t.TurnID, MessageID: sub.MessageID, CompletionFingerprint: fp,
		CompletionID: c.ID, CallbackMessageID: msg.ID, Outcome: outcome, ClaimedAt: now}
	// The Session's checkpoint commits with the completion: a host
	// stopped between two separate writes would leave the Turn done with
	// the previous checkpoint, and its own prompt would then look like a
	// human's to the next session_exact send.
	err = m.write(ctx, store.TurnWrite{Turn: t, Claim: claim, Events: []store.TurnEvent{
		event(now, "terminal_bridge_completion_claimed", claim), event(now, "message", msg)},
		Also: joinHooks(
			bindingCurrent(t),
			prepareCallback(t, msg, msg.ID, kind, meta),
			m.checkpoint(ctx, t, now))})
	if errors.Is(err, errBindingSuperseded) {
		// Re-bound between this check's look at the Session and the
		// claim: the completion belongs to a context the Session left.
		fresh, gerr := m.s.o.Store.GetTurn(ctx, t.TurnID)
		if gerr != nil {
			return gerr
		}
		return m.stall(ctx, fresh, "binding_superseded", "the session was rebound to another terminal context")
	}
	return err
}

// errBindingSuperseded refuses a completion claim whose Turn's binding is
// no longer its Session's current one.
var errBindingSuperseded = errors.New("the Session was re-bound before the completion was claimed")

// bindingCurrent returns the hook that fences a write by the Turn's
// binding: it fails with errBindingSuperseded, rolling the write back,
// when the Session was re-bound since the monitor looked.
func bindingCurrent(t *store.Turn) func(context.Context, store.TerminalTx) error {
	sessionID, bindingID, gen := t.SessionID, t.TerminalBindingID, t.TerminalBindingGeneration
	return func(ctx context.Context, tx store.TerminalTx) error {
		sess, err := tx.GetTermSession(ctx, sessionID)
		if err != nil {
			return fmt.Errorf("completion fence: %w", err)
		}
		if b := sess.Binding; b == nil || b.BindingID != bindingID || b.Generation != gen {
			return errBindingSuperseded
		}
		return nil
	}
}

// checkpoint returns the hook that records on the Session, in the
// completion's transaction, where its native context ended, so a later
// session_exact send can tell whether a human typed since. It returns nil
// (no checkpoint; the next exact send skips the check) when the pane's
// context cannot be read.
func (m *monitor) checkpoint(ctx context.Context, t *store.Turn, now int64) func(context.Context, store.TerminalTx) error {
	id, err := m.s.identify(ctx, m.agent, m.pane)
	if err != nil {
		m.s.log.Warn("checkpoint: identify", "turn_id", t.TurnID, "err", err)
		return nil
	}
	anchor, err := m.agent.Anchor(ctx, m.pane, id)
	if err != nil {
		m.s.log.Warn("checkpoint: anchor", "turn_id", t.TurnID, "err", err)
		return nil
	}
	sessionID, bindingID := t.SessionID, t.TerminalBindingID
	return func(ctx context.Context, tx store.TerminalTx) error {
		sess, err := tx.GetTermSession(ctx, sessionID)
		if err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		if sess.Binding == nil || sess.Binding.BindingID != bindingID {
			return nil // re-bound since: the checkpoint belongs to another binding
		}
		sess.Binding.Checkpoint, sess.Binding.LastVerifiedAt, sess.UpdatedAt = anchor, now, now
		if err := tx.SaveTermSession(ctx, sess); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
		return nil
	}
}

// joinHooks runs the non-nil hooks in order in one transaction; nil when
// there are none.
func joinHooks(hooks ...func(context.Context, store.TerminalTx) error) func(context.Context, store.TerminalTx) error {
	var live []func(context.Context, store.TerminalTx) error
	for _, h := range hooks {
		if h != nil {
			live = append(live, h)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return func(ctx context.Context, tx store.TerminalTx) error {
		for _, h := range live {
			if err := h(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	}
}

// abandonSend fails a Turn whose sender died between prepared and Enter:
// the ledger records uncertain, which blocks the pane until a human closes
// the Turn.
func (m *monitor) abandonSend(ctx context.Context, t *store.Turn) error {
	d, err := m.s.o.Store.GetDispatch(ctx, t.Takeover.TerminalKey)
	if err != nil {
		return err
	}
	now := time.Now().UnixMilli()
	reason := "the sending process stopped before Enter; the text may be in the composer and is never resent — look at the pane, then close the Turn"
	w := store.TurnWrite{Turn: t, Events: []store.TurnEvent{event(now, "terminal_message_uncertain", map[string]any{"reason": reason})}}
	if d.TurnID == t.TurnID && d.MessageID == t.Takeover.Submission.MessageID {
		nd := *d
		nd.Status, nd.UncertainAt, nd.Error = store.DispatchUncertain, now, reason
		w.Dispatch = &store.DispatchAdvance{TerminalKey: d.TerminalKey, GenerationID: d.GenerationID, Update: &nd}
	}
	t.Status = store.TurnFailed
	t.Takeover.Submission.Status, t.Takeover.Submission.Outcome = store.DispatchUncertain, OutcomeUncertain
	t.Takeover.DetectorDiagnostic = reason
	t.Result = &store.TurnResult{Outcome: "failed", Text: reason, Match: "submission_uncertain"}
	return m.write(ctx, w)
}

// stall marks the Turn stalled with reason.
func (m *monitor) stall(ctx context.Context, t *store.Turn, code, reason string) error {
	return m.write(ctx, stallWrite(t, code, reason, time.Now().UnixMilli()))
}
