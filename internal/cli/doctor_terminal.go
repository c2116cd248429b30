package cli

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
)

// terminalWork is the part of the store doctor reads about terminal work:
// the open Turns, active watches, undelivered callbacks and transitions,
// the work leases that say who follows or runs each, and who is alive.
type terminalWork interface {
	Processes(ctx context.Context) ([]store.Process, error)
	OpenTurns(ctx context.Context, limit int) ([]*store.Turn, error)
	OpenTransitions(ctx context.Context, limit int) ([]*store.Transition, error)
	ActiveWatches(ctx context.Context, limit int) ([]*store.Watch, error)
	DueCallbacks(ctx context.Context, now int64, limit int) ([]*store.Callback, error)
	WorkLeases(ctx context.Context, kind string, ids []string) ([]store.WorkLease, error)
}

// followed is one piece of open terminal work and its lease (zero: none).
type followed struct {
	what  string
	lease store.WorkLease
}

// checkTerminalWork is one verdict per open Turn, active watch,
// undelivered callback and running transition saying which process
// follows or runs it (the holder of its work lease), a failing one per
// uncertain transition (its terminal stays blocked until someone settles
// it), and a failing one when open terminal work has no live host at all:
// nothing then records the Turns' replies, approval prompts or callbacks,
// fires the watches, delivers the callbacks or recovers the transitions
// of a process that died.
func checkTerminalWork(ctx context.Context, db terminalWork, hostRuns bool, now time.Time) []verdict {
	fail := func(what string, err error) []verdict {
		return []verdict{{area: "terminal", detail: what + ": " + err.Error(), fix: "The store answered but this table did not; retry."}}
	}
	turns, err := db.OpenTurns(ctx, store.MaxPage)
	if err != nil {
		return fail("open terminal Turns", err)
	}
	watches, err := db.ActiveWatches(ctx, store.MaxPage)
	if err != nil {
		return fail("active terminal watches", err)
	}
	// Every undelivered callback, due or not, with its attempt lease.
	cbs, err := db.DueCallbacks(ctx, math.MaxInt64, store.MaxPage)
	if err != nil {
		return fail("undelivered callbacks", err)
	}
	transitions, err := db.OpenTransitions(ctx, store.MaxPage)
	if err != nil {
		return fail("open thread transitions", err)
	}
	if len(turns)+len(watches)+len(cbs)+len(transitions) == 0 {
		return nil
	}
	leases := func(kind string, ids []string) (map[string]store.WorkLease, error) {
		held := map[string]store.WorkLease{}
		if len(ids) == 0 {
			return held, nil
		}
		ls, err := db.WorkLeases(ctx, kind, ids)
		for _, l := range ls {
			held[l.ID] = l
		}
		return held, err
	}
	monitors, err := leases(store.LeaseMonitor, turnIDs(turns))
	if err != nil {
		return fail("Turn monitor leases", err)
	}
	followers, err := leases(store.LeaseWatch, watchIDs(watches))
	if err != nil {
		return fail("watch follower leases", err)
	}
	var running []*store.Transition
	var vs []verdict
	for _, tr := range transitions {
		if tr.Status == store.TransitionUncertain {
			// No process runs it any more: a person decides.
			vs = append(vs, verdict{area: "terminal", detail: fmt.Sprintf("transition %s (%s) on %s is uncertain: %s; its terminal takes no new Turn until it is settled",
				tr.TransitionID, tr.Kind, tr.TerminalID, tr.Reason),
				fix: "Look at the pane, then: clawconnect terminal resolve-transition " + tr.TransitionID + " --adopt (or --abort)"})
			continue
		}
		running = append(running, tr)
	}
	runners, err := leases(store.LeaseTransition, transitionIDs(running))
	if err != nil {
		return fail("transition leases", err)
	}
	var work []followed
	for _, tr := range running {
		work = append(work, followed{"transition " + tr.TransitionID + " (" + tr.Kind + ", " + tr.Status + ") on " + tr.TerminalID, runners[tr.TransitionID]})
	}
	for _, t := range turns {
		work = append(work, followed{"turn " + t.TurnID + " (" + string(t.Status) + ")", monitors[t.TurnID]})
	}
	for _, w := range watches {
		work = append(work, followed{"watch " + w.WatchID + " on " + w.TerminalID, followers[w.WatchID]})
	}
	ps, err := db.Processes(ctx)
	if err != nil {
		return fail("process registry", err)
	}
	live := map[string]store.Process{}
	var hosts []string
	for _, p := range ps {
		if now.Sub(time.UnixMilli(p.HeartbeatAt)) <= staleAfter {
			live[p.ID] = p
			if strings.HasPrefix(p.Role, hostpkg.Role) {
				hosts = append(hosts, fmt.Sprintf("%s pid %d", p.Role, p.PID))
			}
		}
	}
	holder := func(owner string) string {
		switch p, ok := live[owner]; {
		case ok:
			return fmt.Sprintf("%s pid %d", p.Role, p.PID)
		case strings.HasPrefix(owner, "send-"):
			return "the command sending it"
		}
		return "process " + owner + " (not registered as live; a live host takes it over when its lease ends)"
	}
	var unfollowed []string
	for _, w := range work {
		if w.lease.Until < now.UnixMilli() {
			unfollowed = append(unfollowed, w.what)
			continue
		}
		verb := " is followed by "
		if w.lease.Kind == store.LeaseTransition {
			verb = " is run by "
		}
		vs = append(vs, verdict{ok: true, area: "terminal", detail: w.what + verb + holder(w.lease.Owner)})
	}
	for _, cb := range cbs {
		what := fmt.Sprintf("callback %s of %s (%s, %d attempt(s))", cb.MessageID, cb.TurnID, cb.Status, cb.Attempts)
		if cb.LeaseUntil >= now.UnixMilli() {
			vs = append(vs, verdict{ok: true, area: "terminal", detail: what + " is being delivered by " + holder(cb.LeaseOwner)})
			continue
		}
		unfollowed = append(unfollowed, what)
	}
	if len(unfollowed) == 0 && (len(hosts) > 0 || hostRuns || len(turns)+len(watches)+len(cbs)+len(running) == 0) {
		return vs
	}
	shown := strings.Join(unfollowed[:min(len(unfollowed), 5)], ", ")
	if len(unfollowed) > 5 {
		shown += ", …"
	}
	switch {
	case len(hosts) > 0:
		return append(vs, verdict{ok: true, area: "terminal", detail: fmt.Sprintf(
			"%d piece(s) of terminal work waiting for a follower: %s; the live host (%s) takes them at its next rescan or delivery round",
			len(unfollowed), shown, strings.Join(hosts, ", "))})
	case hostRuns:
		return append(vs, verdict{ok: true, area: "terminal", detail: fmt.Sprintf(
			"%d piece(s) of terminal work waiting for a follower: %s; a live monitor host takes them at its next rescan",
			len(unfollowed), shown)})
	}
	detail := fmt.Sprintf("open terminal work has no live monitor host: %s; nothing records Turns' replies, approval prompts or callbacks", shown)
	if len(unfollowed) == 0 {
		detail = "open terminal work has no live monitor host: its followers hold leases but none of them is registered as live"
	}
	return append(vs, verdict{area: "terminal", detail: detail,
		fix: "Start one with this CLAWCONNECT_HOME: clawconnect terminal daemon (or clawconnect serve); it takes the work over at once."})
}

func turnIDs(ts []*store.Turn) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.TurnID
	}
	return out
}

func watchIDs(ws []*store.Watch) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.WatchID
	}
	return out
}

func transitionIDs(ts []*store.Transition) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.TransitionID
	}
	return out
}
