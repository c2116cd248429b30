package terminal

import (
	"context"

	"github.com/clawconnect/clawconnect/termapi"
)

// Candidate is a pane a delegate considered (termapi.Candidate).
type Candidate = termapi.Candidate

// DelegateRefusal is a delegate that found no single idle pane
// (termapi.DelegateRefusal).
type DelegateRefusal = termapi.DelegateRefusal

// Delegate sends r to the one idle pane running agent ("" = any), or
// refuses listing the candidates (termapi.Delegate).
func Delegate(ctx context.Context, d termapi.Delegator, agent string, r SendRequest) (SendResult, TerminalRow, error) {
	return termapi.Delegate(ctx, d, agent, r)
}

// CheckTimeouts checks a send's own timeouts (termapi.CheckTimeouts).
func CheckTimeouts(r SendRequest) error { return termapi.CheckTimeouts(r) }

// ShownStatus is the Turn's status as a person reads it
// (termapi.ShownStatus).
func ShownStatus(v TurnView) string { return termapi.ShownStatus(v) }
