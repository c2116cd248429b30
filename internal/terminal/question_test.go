package terminal

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/termapi"
)

// colorQuestion is a question dialog as the parsers report Claude Code's:
// two options and a free-text row.
func colorQuestion(answerable bool) *screen.Question {
	q := &screen.Question{Profile: "fake-question", Fingerprint: "q-1", Header: "Choice", Text: "Which color should the widget be?",
		Options:  []screen.Option{{Number: 1, Label: "Red", Description: "Choose Red"}, {Number: 2, Label: "Blue (Recommended)"}},
		FreeText: 3, FreeTextKeys: []string{"3"}, Selected: 1, Answerable: answerable}
	if !answerable {
		q.Reason = "the dialog asks more than one question"
	}
	return q
}

// eventsNamed returns the data of the Turn's events of one type.
func eventsNamed(t *testing.T, r *rig, turnID, typ string) []map[string]any {
	t.Helper()
	evs, err := r.st.TurnEvents(t.Context(), turnID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, e := range evs {
		if e.Type == typ {
			var m map[string]any
			_ = json.Unmarshal(e.Data, &m)
			out = append(out, m)
		}
	}
	return out
}

// TestQuestionIsOneCallbackAndRespondAnswersIt: the agent's question
// dialog puts the Turn in waiting_for_openclaw with one question callback
// carrying the question and its options; respond picks the option in the
// pane (by number, by label, or typed into the free-text row) and the same
// Turn goes on to done with the reply.
func TestQuestionIsOneCallbackAndRespondAnswersIt(t *testing.T) {
	for i, tt := range []struct {
		answer   string
		keys     []string
		recorded string
	}{
		{"2", []string{"2"}, "Blue (Recommended)"},
		{" blue ", []string{"2"}, "Blue (Recommended)"},
		{"red", []string{"1"}, "Red"},
		{"Medium please", []string{"3", "Enter"}, "Medium please"},
	} {
		t.Run(tt.answer, func(t *testing.T) {
			a := newFakeAgent(termapi.AgentClaude, 700+i)
			r := newRig(t, a)
			r.start(r.svc, hostpkg.Options{})
			ctx := t.Context()
			id := questionScenario(true)(t, r, a)
			cbs := callbacksOf(t, r, id)
			if len(cbs) != 1 {
				t.Fatalf("callbacks = %+v, want one", cbs)
			}
			m := cbs[0]
			if m.Type != MsgQuestion || m.Metadata["kind"] != KindQuestion || !m.RequiresResponse ||
				!strings.Contains(m.Body, "Which color should the widget be?") || !strings.Contains(m.Body, "2. Blue (Recommended)") {
				t.Fatalf("question callback = %+v", m)
			}
			if q, _ := m.Metadata["question"].(map[string]any); q == nil || q["text"] != "Which color should the widget be?" || len(q["options"].([]any)) != 2 {
				t.Fatalf("callback metadata.question = %v", m.Metadata["question"])
			}
			v, err := r.svc.Status(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if v.Question == nil || !v.Question.FreeText || v.Question.Options[1].Label != "Blue (Recommended)" ||
				!cmp.Equal(v.NextSteps, []string{StepRespond, StepCancel, StepClose, StepStatus}) {
				t.Fatalf("status = %+v (question %+v)", v, v.Question)
			}
			before := len(a.sentKeys())
			res, err := r.svc.Respond(ctx, id, tt.answer)
			if err != nil {
				t.Fatal(err)
			}
			if res.TurnID != id || res.SubmissionOutcome != termapi.OutcomeAccepted {
				t.Fatalf("respond = %+v", res)
			}
			if got := a.sentKeys()[before:]; !cmp.Equal(got, tt.keys) {
				t.Fatalf("keys pressed %v, want %v", got, tt.keys)
			}
			a.mu.Lock()
			answers := append([]string(nil), a.answers...)
			a.mu.Unlock()
			if !cmp.Equal(answers, []string{tt.recorded}) {
				t.Fatalf("the dialog got %v, want %q", answers, tt.recorded)
			}
			if v, _ := r.svc.Status(ctx, id); v.Status != termapi.TurnWaitingForAgent || v.Question != nil {
				t.Fatalf("after respond: %+v", v)
			}
			if evs := eventsNamed(t, r, id, "terminal_bridge_question_answered"); len(evs) != 1 {
				t.Fatalf("answered events = %v", evs)
			}
			// The monitor looks at the pane again (a typed answer's dialog
			// may still be drawn): no second question.
			a.mu.Lock()
			seen := a.captures
			a.mu.Unlock()
			a.poke()
			poll.Until(t, 10*time.Second, "the monitor's next look", func() bool {
				a.mu.Lock()
				defer a.mu.Unlock()
				return a.captures > seen
			})
			if n := len(callbacksOf(t, r, id)); n != 1 {
				t.Fatalf("%d callbacks after the answer, want only the question: %+v", n, callbacksOf(t, r, id))
			}
			a.finish("FAKE-TOOL-RESULT: "+tt.recorded, false)
			v = r.waitStatus(id, termapi.TurnIdle)
			if v.Result == nil || !strings.Contains(v.Result.Text, tt.recorded) {
				t.Fatalf("turn = %+v", v)
			}
			cbs = callbacksOf(t, r, id)
			if len(cbs) != 2 || cbs[1].Type != MsgDone || !strings.Contains(cbs[1].Body, tt.recorded) {
				t.Fatalf("callbacks = %+v, want the question then done", cbs)
			}
			if evs := eventsNamed(t, r, id, "terminal_bridge_question_resolved"); len(evs) != 0 {
				t.Fatalf("the respond's own answer was logged as a human's: %v", evs)
			}
		})
	}
}

// TestRespondToAQuestionRefusesWhatItCannotGive: an answer that is no
// option of a dialog without a free-text row, and a question the dialog's
// shape does not let the bridge answer, are refused without a key pressed.
func TestRespondToAQuestionRefusesWhatItCannotGive(t *testing.T) {
	t.Run("not an option", func(t *testing.T) {
		a := newFakeAgent(termapi.AgentCodex, 720)
		r := newRig(t, a)
		r.start(r.svc, hostpkg.Options{})
		id := sendFrom(t, r, a, termapi.SendRequest{})
		a.set(func(f *fakeAgent) {
			f.question = colorQuestion(true)
			f.question.FreeText = 0
		})
		r.waitStatus(id, termapi.TurnWaitingForOpenClaw)
		before := len(a.sentKeys())
		_, err := r.svc.Respond(t.Context(), id, "Green")
		if !errors.Is(err, termapi.ErrBadInput) || !strings.Contains(err.Error(), "1 (Red), 2 (Blue (Recommended))") {
			t.Fatalf("respond = %v", err)
		}
		if got := a.sentKeys()[before:]; len(got) != 0 {
			t.Fatalf("pressed %v", got)
		}
		if v, _ := r.svc.Status(t.Context(), id); v.Status != termapi.TurnWaitingForOpenClaw || v.Question == nil {
			t.Fatalf("after a refused respond: %+v", v)
		}
	})
	t.Run("not answerable", func(t *testing.T) {
		a := newFakeAgent(termapi.AgentClaude, 725)
		r := newRig(t, a)
		r.start(r.svc, hostpkg.Options{})
		id := questionScenario(false)(t, r, a)
		cbs := callbacksOf(t, r, id)
		if len(cbs) != 1 || cbs[0].Type != MsgBlocked || !strings.Contains(cbs[0].Body, "answer it in the terminal") {
			t.Fatalf("callbacks = %+v", cbs)
		}
		before := len(a.sentKeys())
		if _, err := r.svc.Respond(t.Context(), id, "1"); !errors.Is(err, termapi.ErrRefused) {
			t.Fatalf("respond = %v", err)
		}
		if got := a.sentKeys()[before:]; len(got) != 0 {
			t.Fatalf("pressed %v", got)
		}
	})
}

// TestQuestionAnsweredInTheTerminal: a dialog closed in the pane sends the
// Turn back to the agent with the answer logged as the terminal's, and the
// same dialog is not reported twice.
func TestQuestionAnsweredInTheTerminal(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 730)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	id := questionScenario(true)(t, r, a)
	a.set(func(f *fakeAgent) { f.question = nil })
	r.waitStatus(id, termapi.TurnWaitingForAgent)
	evs := eventsNamed(t, r, id, "terminal_bridge_question_resolved")
	if len(evs) != 1 || evs[0]["decision"] != "answered_in_terminal" {
		t.Fatalf("resolved events = %v", evs)
	}
	if n := len(callbacksOf(t, r, id)); n != 1 {
		t.Fatalf("%d callbacks, want the one question", n)
	}
}

func TestSplitAnswersChecksTheCount(t *testing.T) {
	t.Parallel()
	first := &screen.Question{Position: 1, Count: 3, Unanswered: 3}
	for _, c := range []struct {
		name string
		q    *screen.Question
		text string
		want []string
		err  string
	}{
		{"one answer", first, "Red", []string{"Red"}, ""},
		{"one per question", first, "Red\n\n  Large \n2\n", []string{"Red", "Large", "2"}, ""},
		{"too few", first, "Red\nLarge", nil, "has 2 lines but the dialog has 3 unanswered questions"},
		{"too many", first, "1\n2\n3\n4", nil, "respond with one line for this question, or 3 lines"},
		{"a single question takes one line", colorQuestion(true), "Red\nBlue", nil, "this question takes one answer on one line"},
		{"an earlier one unanswered", &screen.Question{Position: 2, Count: 3, Unanswered: 3}, "1\n2", nil, "takes one answer on one line"},
		{"the last of several", &screen.Question{Position: 3, Count: 3, Unanswered: 1}, "1", []string{"1"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := splitAnswers(c.q, c.text)
			if c.err != "" {
				if !errors.Is(err, termapi.ErrBadInput) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("splitAnswers(%q) = %v, %v; want a bad-input error with %q", c.text, got, err, c.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("splitAnswers(%q) = %q, %v; want %q", c.text, got, err, c.want)
			}
		})
	}
}

func TestQuestionBodySaysHowToAnswerSeveral(t *testing.T) {
	t.Parallel()
	q := storedQuestion(&screen.Question{Fingerprint: "f", Text: "Which color", Options: []screen.Option{{Number: 1, Label: "Red"}, {Number: 2, Label: "Blue"}},
		FreeText: 3, Position: 1, Count: 2, Unanswered: 2, Answerable: true}, 1)
	body := questionBody(q)
	for _, want := range []string{"(question 1 of 2) Which color", "or with your own answer", "1 more follows", "with 2 lines, one answer per line"} {
		if !strings.Contains(body, want) {
			t.Errorf("body %q lacks %q", body, want)
		}
	}
	q.Position, q.Unanswered = 2, 1
	if body := questionBody(q); strings.Contains(body, "lines") || !strings.Contains(body, "(question 2 of 2)") {
		t.Errorf("the last question's body %q", body)
	}
}
