package terminal

import (
	"context"

	"github.com/clawconnect/clawconnect/termapi"
)

// Delegate sends r to the one idle pane running agent ("" = any), or
// refuses listing the candidates (termapi.Delegate).
func Delegate(ctx context.Context, d termapi.Delegator, agent string, r termapi.SendRequest) (termapi.SendResult, termapi.TerminalRow, error) {
	return termapi.Delegate(ctx, d, agent, r)
}

// CheckTimeouts checks a send's own timeouts (termapi.CheckTimeouts).
func CheckTimeouts(r termapi.SendRequest) error { return termapi.CheckTimeouts(r) }

// ShownStatus is the Turn's status as a person reads it
// (termapi.ShownStatus).
func ShownStatus(v termapi.TurnView) string { return termapi.ShownStatus(v) }
