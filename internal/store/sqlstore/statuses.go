package sqlstore

import (
	"strings"
	"sync"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// The status conditions below are built at their first use, not at init:
// every start of the binary ran them, clawconnect mcp before it could
// answer initialize (it opens its store only after).

// openTurn selects the Turns that need a monitor (termapi.TurnStatus.Monitored).
var openTurn = sync.OnceValue(func() string { return statusIn(termapi.TurnStatuses(), termapi.TurnStatus.Monitored) })

// turnSendBlocking selects the Turns that keep their Session from taking
// a new one (termapi.TurnStatus.SendBlocking).
var turnSendBlocking = sync.OnceValue(func() string { return statusIn(termapi.TurnStatuses(), termapi.TurnStatus.SendBlocking) })

// callbackDue selects the callbacks the outbox still attempts
// (termapi.CallbackStatus.Due).
var callbackDue = sync.OnceValue(func() string { return statusIn(termapi.CallbackStatuses(), termapi.CallbackStatus.Due) })

// turnAdvanceFrom is the SQL condition on the stored status of a Turn
// that WriteTurn may write with status to (termapi.CheckTurnAdvance).
func turnAdvanceFrom(to termapi.TurnStatus) string {
	return statusIn(termapi.TurnStatuses(), func(from termapi.TurnStatus) bool { return termapi.CheckTurnAdvance(from, to) == nil })
}

// openTransition selects the transitions still running (not
// store.TransitionFinal).
var openTransition = sync.OnceValue(func() string { return statusNotIn(store.TransitionStatuses(), store.TransitionFinal) })

// activeWatch selects the watches a monitor follows: the one status that
// is not final. Migration 0007's partial index spells the same condition.
var activeWatch = sync.OnceValue(func() string {
	return statusIn(store.WatchStatuses(), func(s string) bool { return s == store.WatchActive })
})

// pendingHostOp selects the host operations still to run.
var pendingHostOp = sync.OnceValue(func() string {
	return statusIn([]string{store.HostOpPending, store.HostOpDone}, func(s string) bool { return s == store.HostOpPending })
})

// runningTask selects the tasks not ended (not Status.Terminal).
// Migrations 0001 and 0004's partial indexes spell the same condition,
// and endedTask its complement.
var (
	runningTask = sync.OnceValue(func() string {
		return statusIn(store.Statuses(), func(s store.Status) bool { return !s.Terminal() })
	})
	endedTask = sync.OnceValue(func() string {
		return statusNotIn(store.Statuses(), func(s store.Status) bool { return !s.Terminal() })
	})
)

// statusIn is the SQL condition "status IN (…)" over the statuses of all
// that keep holds ("status = …" for one): the SQL status sets are built
// from the Go predicates, so the two cannot drift apart. The values are
// the package's own constants, never input.
func statusIn[S ~string](all []S, keep func(S) bool) string {
	in := quoted(all, keep)
	if len(in) == 1 {
		return "status = " + in[0]
	}
	return "status IN (" + strings.Join(in, ",") + ")"
}

// statusNotIn is statusIn's complement: "status NOT IN (…)" over the
// statuses of all that drop holds ("status <> …" for one).
func statusNotIn[S ~string](all []S, drop func(S) bool) string {
	out := quoted(all, drop)
	if len(out) == 1 {
		return "status <> " + out[0]
	}
	return "status NOT IN (" + strings.Join(out, ",") + ")"
}

// quoted returns the SQL literals of the statuses of all that pick holds.
func quoted[S ~string](all []S, pick func(S) bool) []string {
	var q []string
	for _, s := range all {
		if pick(s) {
			q = append(q, "'"+string(s)+"'")
		}
	}
	return q
}
