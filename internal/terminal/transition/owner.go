package transition

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/terminal/proc"
)

// Who runs a transition: the process that prepared it holds its lease
// and is registered as its owner, so any process sharing the store can
// tell whether that owner provably ended.

// selfIdentity is this process as the owner of the transitions it runs:
// the identity task and terminal leases use (host and pid namespace, pid,
// boot id and start time), so any process sharing the store can tell
// whether it can prove the owner dead.
var selfIdentity = sync.OnceValue(owner.Self)

// selfOwner is selfIdentity as a transition records it.
var selfOwner = sync.OnceValue(func() string { return selfIdentity().Encode() })

// ownerGone reports whether the process that owns a transition has
// provably exited. An owner on another host, boot or pid namespace is
// never proven gone from here: its transition is left as it is (there is
// no lease to run out) until a process that can see it settles it.
func ownerGone(o string) bool {
	if o == selfOwner() {
		return false
	}
	if id, err := owner.Decode(o); err == nil {
		return selfIdentity().Dead(id.Process("", 0))
	}
	// Owners written before transitions recorded the whole identity,
	// "pid:<pid>:start:<ticks>", are processes of this host.
	pid, ticks, err := proc.ParseIncarnation(o)
	if err != nil {
		return true
	}
	alive, err := proc.Alive(pid, ticks)
	return err == nil && !alive
}

// foreignOwner returns a transition owner that runs where this process
// cannot see it (another host or pid namespace, or either unknown).
func foreignOwner(o string) (owner.Identity, bool) {
	id, err := owner.Decode(o)
	if err != nil {
		return id, false
	}
	self := selfIdentity()
	return id, id.Host == "" || self.Host == "" || id.Host != self.Host
}

// leaseTTL is how long a transition's lease lasts unrenewed;
// the process running it renews it every third of that.
const leaseTTL = 2 * time.Minute

// holdWork claims kind's lease of id for this process (selfIdentity) and
// renews it in the background until the returned release ends it: work a
// command runs itself, such as a thread transition.
//
// While it holds such work the process is registered in the store's
// process registry under that identity (role WorkRole), so a host that
// proves it dead frees the lease at once (owner.Identity.ReapDead), as it
// does a dead host's, instead of waiting out the lease.
func (s *Service) holdWork(ctx context.Context, kind, id string, ttl time.Duration) (release func(), err error) {
	s.mu.Lock()
	s.holding++
	s.mu.Unlock()
	s.beatHolder(ctx) // registered before the lease names it
	unregister := func() {
		s.mu.Lock()
		s.holding--
		last := s.holding == 0
		s.mu.Unlock()
		if last {
			if err := s.o.Store.RemoveProcess(context.WithoutCancel(ctx), selfIdentity().ID); err != nil {
				s.log.Warn("leave the process registry", "err", err)
			}
		}
	}
	now := time.Now()
	// Not cut short by ctx: a claim whose row was written but that
	// reports the cancel would hold the work until the lease ran out. The
	// lease's time bounds it instead.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
	l, err := s.o.Store.ClaimWork(cctx, kind, id, selfIdentity().ID, now.UnixMilli(), now.Add(ttl).UnixMilli())
	cancel()
	if err != nil {
		unregister()
		return nil, fmt.Errorf("claim the %s lease: %w", kind, err)
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-tick.C:
				s.beatHolder(rctx)
				lost, err := s.o.Store.RenewWork(rctx, kind, l.Owner, time.Now().Add(ttl).UnixMilli(), []string{id})
				if err == nil && len(lost) > 0 {
					err = store.ErrLeaseLost
				}
				if err != nil && rctx.Err() == nil {
					s.log.Warn("renew work lease", "kind", kind, "id", id, "err", err)
				}
			}
		}
	}()
	return func() {
		stop()
		<-done
		if err := s.o.Store.ReleaseWork(context.WithoutCancel(ctx), l); err != nil {
			s.log.Warn("release work lease", "kind", kind, "id", id, "err", err)
		}
		unregister()
	}, nil
}

// WorkRole is the process-registry role of a process while it holds work
// leases of its own (a thread transition it runs). It does not start with
// host.Role: such a process follows no one else's work.
const WorkRole = "transition"

// beatHolder registers (or refreshes) this process as the owner of the
// work it holds for itself.
func (s *Service) beatHolder(ctx context.Context) {
	if err := s.o.Store.Heartbeat(ctx, selfIdentity().Process(WorkRole, time.Now().UnixMilli())); err != nil && ctx.Err() == nil {
		s.log.Warn("register as a work lease owner", "err", err)
	}
}

// ownerName names a transition's owner for a reader.
func ownerName(o string) string {
	if id, err := owner.Decode(o); err == nil {
		return id.String()
	}
	return o
}
