package terminal

import (
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestLifecycleStepsAreAdvances: every step the lifecycle functions take,
// from every status the diagram of turn_lifecycle.go starts it in, is one
// termapi.CheckTurnAdvance allows, so the diagram and the store's check
// cannot drift apart.
func TestLifecycleStepsAreAdvances(t *testing.T) {
	t.Parallel()
	followed := []store.TurnStatus{store.TurnCreated, store.TurnRunning, store.TurnWaitingForAgent,
		store.TurnWaitingForOpenClaw, store.TurnCancelling}
	type step struct {
		name string
		from []store.TurnStatus
		do   func(*store.Turn)
		want store.TurnStatus // "" when it depends on the message
	}
	steps := []step{
		{"approvalAnswered", []store.TurnStatus{store.TurnWaitingForOpenClaw}, approvalAnswered, store.TurnWaitingForAgent},
		{"questionAnswered", []store.TurnStatus{store.TurnWaitingForOpenClaw}, questionAnswered, store.TurnWaitingForAgent},
		{"failTurn", followed, func(t *store.Turn) { failTurn(t, "submission_not_sent", "r") }, store.TurnFailed},
		{"stallTurn", followed, func(t *store.Turn) { stallTurn(t, 1, "r") }, store.TurnStalled},
		{"renewTurn", []store.TurnStatus{store.TurnStalled}, func(t *store.Turn) { renewTurn(t, time.UnixMilli(2), "renewed") }, store.TurnWaitingForAgent},
		{"cancelTurn", append([]store.TurnStatus{store.TurnStalled}, followed...), func(t *store.Turn) { cancelTurn(t, 1) }, store.TurnCancelled},
		{"closeTurn", []store.TurnStatus{store.TurnWaitingForOpenClaw, store.TurnIdle, store.TurnFailed, store.TurnStalled},
			func(t *store.Turn) { closeTurn(t, 1, "r") }, store.TurnClosed},
	}
	for _, typ := range []string{MsgProgress, MsgQuestion, MsgBlocked, MsgDone, MsgError, MsgCancelled} {
		for _, requires := range []bool{false, true} {
			m := Message{Type: typ, From: actorOf(AgentCodex), To: ActorOpenClaw, RequiresResponse: requires, TS: 1}
			steps = append(steps, step{"ApplyMessage " + typ, followed, func(t *store.Turn) { ApplyMessage(t, m) }, ""})
		}
	}
	for _, typ := range []string{MsgAnswer, MsgTask} {
		m := Message{Type: typ, From: ActorOpenClaw, To: actorOf(AgentCodex), RequiresResponse: true, TS: 1}
		steps = append(steps, step{"ApplyMessage " + typ, followed, func(t *store.Turn) { ApplyMessage(t, m) }, store.TurnWaitingForAgent})
	}
	for _, s := range steps {
		for _, from := range s.from {
			turn := &store.Turn{Status: from}
			s.do(turn)
			if s.want != "" && turn.Status != s.want {
				t.Errorf("%s from %s: status %s, want %s", s.name, from, turn.Status, s.want)
			}
			if err := termapi.CheckTurnAdvance(from, turn.Status); err != nil {
				t.Errorf("%s from %s: %v", s.name, from, err)
			}
		}
	}
}
