package terminal

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/codex"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
)

// queuedCallbacks are the callback messages the outbox holds for a Turn,
// oldest first: what its origin session is sent.
func queuedCallbacks(t *testing.T, st store.TerminalStore, turnID string) []CallbackMessage {
	t.Helper()
	cbs, err := st.(store.CallbackStore).TurnCallbacks(t.Context(), turnID, 20)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]CallbackMessage, len(cbs))
	for i, cb := range cbs {
		if err := json.Unmarshal(cb.Message, &out[len(cbs)-1-i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// questionRespondDone sends a request that makes the fake model ask a
// question through the agent's own dialog, checks the Turn waits with one
// question callback carrying the question and its options, responds with
// answer and checks the same Turn ends done with a reply and a done
// callback that show want.
func questionRespondDone(t *testing.T, svc *Service, st store.TerminalStore, rp *realPane, request, answer, want string) {
	t.Helper()
	ctx := t.Context()
	const origin = "agent:main:cc-question-e2e"
	res, err := svc.Send(ctx, SendRequest{TerminalID: rp.pane.TerminalID, Request: request, OriginSession: origin})
	if err != nil {
		t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
	}
	v := waitTurnStatus(t, svc, res.TurnID, 60*time.Second, store.TurnWaitingForOpenClaw, store.TurnIdle, store.TurnFailed)
	if v.Status != store.TurnWaitingForOpenClaw || v.Question == nil || !v.Question.Answerable || len(v.Question.Options) != 2 {
		t.Fatalf("turn = %+v (question %+v); screen:\n%s", v, v.Question, rp.debug())
	}
	cbs := queuedCallbacks(t, st, res.TurnID)
	if len(cbs) != 1 || cbs[0].Type != MsgQuestion || cbs[0].Metadata["kind"] != KindQuestion ||
		!strings.Contains(cbs[0].Body, v.Question.Text) || !strings.Contains(cbs[0].Body, "2. Blue") {
		t.Fatalf("callbacks = %+v", cbs)
	}
	t.Logf("question callback: %s", cbs[0].Body)
	if _, err := svc.Respond(ctx, res.TurnID, answer); err != nil {
		t.Fatalf("respond: %v; screen:\n%s", err, rp.debug())
	}
	v = waitTurnStatus(t, svc, res.TurnID, 60*time.Second, store.TurnIdle, store.TurnFailed, store.TurnStalled)
	if v.Status != store.TurnIdle || !strings.HasPrefix(v.Result.Text, strings.TrimSpace(fakemodel.ToolResultPrefix)) || !strings.Contains(v.Result.Text, want) {
		t.Fatalf("answered turn = %+v; screen:\n%s", v, rp.debug())
	}
	cbs = queuedCallbacks(t, st, res.TurnID)
	if len(cbs) != 2 || cbs[1].Type != MsgDone || !strings.Contains(cbs[1].Body, want) {
		t.Fatalf("callbacks = %+v, want the question and then done", cbs)
	}
	t.Logf("done callback: %s", cbs[1].Body)
}

// TestE2EClaudeQuestionCallbackRespondDone: the real Claude Code 2.1.332
// TUI asks an AskUserQuestion question (the fake model's QUESTION:
// directive); the Turn sends one question callback, respond picks an
// option by its label, and the same Turn ends done with the reply showing
// the choice. Then the same with a typed answer in the free-text row.
func TestE2EClaudeQuestionCallbackRespondDone(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.ClaudeCode, model, "--permission-mode", "default")
	svc, st := newRealService(t, rp)
	runHost(t, svc)
	questionRespondDone(t, svc, st, rp, "QUESTION: Which color should the widget be? | Red | Blue", "Blue", `"Blue"`)
	waitSendable(t, svc, rp)
	questionRespondDone(t, svc, st, rp, "QUESTION: Which size should it be? | Red | Blue", "Medium please", `"Medium please"`)
}

// TestE2ECodexQuestionCallbackRespondDone: the same for the real Codex
// 0.171.0 TUI's request_user_input dialog (started with the feature that
// offers it outside Plan mode), answered by the option's number.
func TestE2ECodexQuestionCallbackRespondDone(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.Codex, model, "--enable", codex.QuestionFeature)
	svc, st := newRealService(t, rp)
	runHost(t, svc)
	questionRespondDone(t, svc, st, rp, "QUESTION: Which color should the widget be | Red | Blue", "2", `"Blue"`)
}
