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
	followed := []termapi.TurnStatus{termapi.TurnCreated, termapi.TurnRunning, termapi.TurnWaitingForAgent,
		termapi.TurnWaitingForOpenClaw, termapi.TurnCancelling}
	type step struct {
		name string
		from []termapi.TurnStatus
		do   func(*store.Turn)
		want termapi.TurnStatus // "" when it depends on the message
	}
	steps := []step{
		{"approvalAnswered", []termapi.TurnStatus{termapi.TurnWaitingForOpenClaw}, approvalAnswered, termapi.TurnWaitingForAgent},
		{"questionAnswered", []termapi.TurnStatus{termapi.TurnWaitingForOpenClaw}, questionAnswered, termapi.TurnWaitingForAgent},
		{"failTurn", followed, func(t *store.Turn) { failTurn(t, "submission_not_sent", "r") }, termapi.TurnFailed},
		{"stallTurn", followed, func(t *store.Turn) { stallTurn(t, 1, "r") }, termapi.TurnStalled},
		{"renewTurn", []termapi.TurnStatus{termapi.TurnStalled}, func(t *store.Turn) { renewTurn(t, time.UnixMilli(2), "renewed") }, termapi.TurnWaitingForAgent},
		{"cancelTurn", append([]termapi.TurnStatus{termapi.TurnStalled}, followed...), func(t *store.Turn) { cancelTurn(t, 1) }, termapi.TurnCancelled},
		{"closeTurn", []termapi.TurnStatus{termapi.TurnWaitingForOpenClaw, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled},
			func(t *store.Turn) { closeTurn(t, 1, "r") }, termapi.TurnClosed},
	}
	for _, typ := range []string{MsgProgress, MsgQuestion, MsgBlocked, MsgDone, MsgError, MsgCancelled} {
		for _, requires := range []bool{false, true} {
			m := Message{Type: typ, From: actorOf(termapi.AgentCodex), To: ActorOpenClaw, RequiresResponse: requires, TS: 1}
			steps = append(steps, step{"ApplyMessage " + typ, followed, func(t *store.Turn) { ApplyMessage(t, m) }, ""})
		}
	}
	for _, typ := range []string{MsgAnswer, MsgTask} {
		m := Message{Type: typ, From: ActorOpenClaw, To: actorOf(termapi.AgentCodex), RequiresResponse: true, TS: 1}
		steps = append(steps, step{"ApplyMessage " + typ, followed, func(t *store.Turn) { ApplyMessage(t, m) }, termapi.TurnWaitingForAgent})
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
