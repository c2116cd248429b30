package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
	"github.com/clawconnect/clawconnect/plugins/openclaw"
	"github.com/clawconnect/clawconnect/termapi"
)

// queuedCallbacks are the callback messages the outbox holds for a Turn,
// oldest first: what its origin session is sent.
func queuedCallbacks(t *testing.T, st store.Store, turnID string) []outbox.CallbackMessage {
	t.Helper()
	cbs, err := st.TurnCallbacks(t.Context(), turnID, 20)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]outbox.CallbackMessage, len(cbs))
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
func questionRespondDone(t *testing.T, svc *Service, st store.Store, rp *realPane, request, answer, want string) {
	t.Helper()
	ctx := t.Context()
	const origin = "agent:main:cc-question-e2e"
	res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: request, OriginSession: origin})
	if err != nil {
		t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
	}
	v := waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnWaitingForOpenClaw, termapi.TurnIdle, termapi.TurnFailed)
	if v.Status != termapi.TurnWaitingForOpenClaw || v.Question == nil || !v.Question.Answerable || len(v.Question.Options) != 2 {
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
	v = waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled)
	if v.Status != termapi.TurnIdle || !strings.HasPrefix(v.Result.Text, strings.TrimSpace(fakemodel.ToolResultPrefix)) || !strings.Contains(v.Result.Text, want) {
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

// TestE2ECodexQuestionTypedAndSeveral: the real Codex 0.171.0 TUI's
// request_user_input dialog answered with text that matches no option
// (typed as the note of "None of the above"), then a dialog of two
// questions answered in one respond of two lines, after one of three lines
// is refused for its count. The model receives exactly those answers.
func TestE2ECodexQuestionTypedAndSeveral(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.Codex, model, "--enable", codex.QuestionFeature)
	svc, st := newRealService(t, rp)
	runHost(t, svc)
	lastToolResult := func() string {
		t.Helper()
		var reply string
		for _, r := range model.Requests() {
			if r.IsToolResult {
				reply = r.Reply
			}
		}
		return reply
	}
	// sameAnswers compares the tool result the model received with want
	// as JSON: Codex writes the answers of several questions in any order.
	sameAnswers := func(got, want string) bool {
		var g, w any
		body, ok := strings.CutPrefix(got, fakemodel.ToolResultPrefix)
		return ok && json.Unmarshal([]byte(body), &g) == nil && json.Unmarshal([]byte(want), &w) == nil && reflect.DeepEqual(g, w)
	}
	typed := `{"answers":{"choice":{"answers":["None of the above","user_note: Green please"]}}}`
	questionRespondDone(t, svc, st, rp, "QUESTION: Which color should the widget be | Red | Blue", "Green please", typed)
	if got := lastToolResult(); !sameAnswers(got, typed) {
		t.Fatalf("the model received %q, want the typed answer %q", got, typed)
	}
	waitSendable(t, svc, rp)

	ctx := t.Context()
	res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "QUESTION: Which color | Red | Blue || Which size | Small | Large", OriginSession: "agent:main:codex-several-e2e"})
	if err != nil {
		t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
	}
	v := waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnWaitingForOpenClaw, termapi.TurnIdle, termapi.TurnFailed)
	if v.Status != termapi.TurnWaitingForOpenClaw || v.Question == nil || !v.Question.Answerable || v.Question.Position != 1 || v.Question.Count != 2 {
		t.Fatalf("turn = %+v (question %+v); screen:\n%s", v, v.Question, rp.debug())
	}
	cbs := queuedCallbacks(t, st, res.TurnID)
	if len(cbs) != 1 || cbs[0].Type != MsgQuestion || !strings.Contains(cbs[0].Body, "(question 1 of 2) Which color") || !strings.Contains(cbs[0].Body, "with 2 lines, one answer per line") {
		t.Fatalf("callbacks = %+v", cbs)
	}
	t.Logf("question callback: %s", cbs[0].Body)
	if _, err := svc.Respond(ctx, res.TurnID, "1\n2\n3"); !errors.Is(err, termapi.ErrBadInput) || !strings.Contains(err.Error(), "3 lines but the dialog has 2 unanswered questions") {
		t.Fatalf("respond with three answers to two questions = %v, want a bad-input error about the count", err)
	}
	if _, err := svc.Respond(ctx, res.TurnID, "Green please\nLarge"); err != nil {
		t.Fatalf("respond: %v; screen:\n%s", err, rp.debug())
	}
	several := `{"answers":{"choice":{"answers":["None of the above","user_note: Green please"]},"choice2":{"answers":["Large"]}}}`
	v = waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled)
	if v.Status != termapi.TurnIdle || !sameAnswers(v.Result.Text, several) {
		t.Fatalf("answered turn = %+v; screen:\n%s", v, rp.debug())
	}
	if got := lastToolResult(); !sameAnswers(got, several) {
		t.Fatalf("the model received %q, want %q", got, several)
	}
	if cbs := queuedCallbacks(t, st, res.TurnID); len(cbs) != 2 || cbs[1].Type != MsgDone {
		t.Fatalf("callbacks = %+v, want the first question and then done", cbs)
	}
}

// TestE2EClaudeQuestionCallbackIntoRealGateway: the whole loop with the
// real OpenClaw gateway 2026.9.6 and the ClawConnect plugin: a Turn sent
// from session S to the real Claude Code TUI asks a question in its
// dialog; S gets exactly one callback run whose message carries the
// question and its options; respond picks "Blue" and S then gets the done
// callback whose reply shows the choice.
func TestE2EClaudeQuestionCallbackIntoRealGateway(t *testing.T) {
	if os.Getenv("CLAWCONNECT_E2E") != "1" {
		t.Skip("set CLAWCONNECT_E2E=1 to run against the real OpenClaw gateway and Claude Code")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	g, err := realgateway.Start(ctx, realgateway.Options{
		Plugins: []realgateway.Plugin{{ID: "clawconnect", Dir: openclaw.Dir(), Config: map[string]any{"daemon": false}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gc, err := gateway.Dial(ctx, gateway.Options{URL: g.URL(), Token: g.Token()})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.ClaudeCode, model, "--permission-mode", "default")
	svc, st := newRealService(t, rp)
	runHost(t, svc)
	x := outbox.New(outbox.Options{Store: st, Owner: "e2e", WaitTimeout: 60 * time.Second,
		Dial: func(ctx context.Context, _ string) (outbox.Caller, error) {
			return gateway.Dial(ctx, gateway.Options{URL: g.URL(), Token: g.Token(), CallTimeout: 5 * time.Second})
		}})
	defer x.Close()
	const S = "agent:main:cc-question-gateway"
	// inS waits for the callback runs in S whose message holds marker and
	// returns their texts.
	inS := func(marker string) []string {
		t.Helper()
		var texts []string
		var rows int
		var err error
		if !poll.WithinEvery(60*time.Second, 200*time.Millisecond, func() bool {
			if _, err := x.DeliverDue(ctx); err != nil {
				t.Fatal(err)
			}
			texts, rows = nil, 0
			var h *gateway.History
			if h, err = gc.History(ctx, gateway.HistoryRequest{SessionKey: S, Limit: 200}); err == nil {
				rows = len(h.Messages)
				for _, m := range h.Messages {
					if m.Role == "user" && strings.Contains(m.Text, "[ClawConnect callback]") && strings.Contains(m.Text, marker) {
						texts = append(texts, m.Text)
					}
				}
			}
			return len(texts) > 0
		}) {
			t.Logf("no callback message with %q in S's history within 60 s (last read: %d rows, %v)", marker, rows, err)
		}
		return texts
	}
	res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "QUESTION: Which color should the widget be? | Red | Blue", OriginSession: S})
	if err != nil {
		t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
	}
	if v := waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnWaitingForOpenClaw, termapi.TurnIdle); v.Question == nil {
		t.Fatalf("turn = %+v; screen:\n%s", v, rp.debug())
	}
	asked := inS("Message type: question")
	if len(asked) != 1 || !strings.Contains(asked[0], "Which color should the widget be?") || !strings.Contains(asked[0], "2. Blue") {
		t.Fatalf("S received %d question callbacks: %q", len(asked), asked)
	}
	t.Logf("S received the question (excerpt): %.600s", asked[0])
	if _, err := svc.Respond(ctx, res.TurnID, "Blue"); err != nil {
		t.Fatalf("respond: %v; screen:\n%s", err, rp.debug())
	}
	if v := waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled); v.Status != termapi.TurnIdle {
		t.Fatalf("answered turn = %+v; screen:\n%s", v, rp.debug())
	}
	done := inS("Message type: done")
	if len(done) != 1 || !strings.Contains(done[0], `"Blue"`) {
		t.Fatalf("S received %d done callbacks: %q", len(done), done)
	}
	t.Logf("S received the reply (excerpt): %.600s", done[0])
	if again := inS("Message type: question"); len(again) != 1 {
		t.Fatalf("S received %d question callbacks in all", len(again))
	}
}
