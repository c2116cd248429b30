package termapi_test

import (
	"errors"
	"testing"

	"github.com/clawconnect/clawconnect/termapi"
)

// TestCheckTurnAdvance pins every step of the Turn lifecycle: the table
// lists, for each status, the statuses a write may move it to, and every
// other pair is refused.
func TestCheckTurnAdvance(t *testing.T) {
	t.Parallel()
	followed := []termapi.TurnStatus{termapi.TurnRunning, termapi.TurnWaitingForAgent, termapi.TurnWaitingForOpenClaw,
		termapi.TurnCancelling, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled, termapi.TurnCancelled}
	steps := map[termapi.TurnStatus][]termapi.TurnStatus{
		termapi.TurnCreated:            followed,
		termapi.TurnRunning:            followed,
		termapi.TurnWaitingForAgent:    followed,
		termapi.TurnCancelling:         followed,
		termapi.TurnWaitingForOpenClaw: append(followed[:len(followed):len(followed)], termapi.TurnClosed),
		termapi.TurnStalled:            {termapi.TurnWaitingForAgent, termapi.TurnCancelled, termapi.TurnClosed},
		termapi.TurnIdle:               {termapi.TurnClosed},
		termapi.TurnFailed:             {termapi.TurnClosed},
		termapi.TurnCancelled:          nil,
		termapi.TurnClosed:             nil,
	}
	if len(steps) != len(termapi.TurnStatuses()) {
		t.Fatalf("the table covers %d statuses, TurnStatuses has %d", len(steps), len(termapi.TurnStatuses()))
	}
	for _, from := range termapi.TurnStatuses() {
		allowed := map[termapi.TurnStatus]bool{from: true}
		for _, to := range steps[from] {
			allowed[to] = true
		}
		for _, to := range termapi.TurnStatuses() {
			err := termapi.CheckTurnAdvance(from, to)
			if allowed[to] != (err == nil) {
				t.Errorf("CheckTurnAdvance(%s, %s) = %v, want allowed=%v", from, to, err, allowed[to])
			}
			if err != nil && !errors.Is(err, termapi.ErrRefused) {
				t.Errorf("CheckTurnAdvance(%s, %s) = %v, want it to wrap ErrRefused", from, to, err)
			}
		}
	}
	for _, bad := range [][2]termapi.TurnStatus{{"", termapi.TurnRunning}, {termapi.TurnRunning, "done"}, {"done", "done"}} {
		if err := termapi.CheckTurnAdvance(bad[0], bad[1]); !errors.Is(err, termapi.ErrRefused) {
			t.Errorf("CheckTurnAdvance(%q, %q) = %v, want a refusal", bad[0], bad[1], err)
		}
	}
}

// TestTurnStatusSets pins the status sets the store's SQL is built from.
func TestTurnStatusSets(t *testing.T) {
	t.Parallel()
	for _, s := range termapi.TurnStatuses() {
		if !s.Valid() {
			t.Errorf("%s is listed but not Valid", s)
		}
		if s.Monitored() && s.Released() {
			t.Errorf("%s is both monitored and released", s)
		}
		if s.Final() && !s.Released() {
			t.Errorf("%s is final but holds the input", s)
		}
		if s.Running() && !s.SendBlocking() {
			t.Errorf("%s runs but does not block a send", s)
		}
	}
	if !termapi.TurnStalled.SendBlocking() || termapi.TurnStalled.Monitored() || termapi.TurnStalled.Released() {
		t.Error("a stalled Turn blocks sends, is not followed and keeps the input until closed or renewed")
	}
}
