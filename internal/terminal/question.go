package terminal

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
	"github.com/clawconnect/clawconnect/termapi"
)

// KindQuestion is the callback kind of a question the agent asks in its
// own dialog (Claude Code's AskUserQuestion, Codex's request_user_input).
const KindQuestion = "question"

// answerSettle is how long a question dialog must have been shown before
// respond presses its keys (the TUIs ignore keys for a moment after they
// draw a dialog, as they do for an approval prompt).
const answerSettle = approvalSettle

// freeTextWait bounds the waits for a dialog's free-text row to take the
// cursor before the answer is typed into it, and for the answered dialog
// to close.
const freeTextWait = 3 * time.Second

// typedSettle is how long a typed answer must stay drawn unchanged before
// the Enter that submits it.
const typedSettle = 300 * time.Millisecond

// storedQuestion is q as the Turn records it: texts redacted.
func storedQuestion(q *screen.Question, now int64) *termapi.Question {
	out := &termapi.Question{Fingerprint: q.Fingerprint, Header: Redact(q.Header), Text: Redact(q.Text),
		FreeText: q.FreeText > 0, Position: q.Position, Count: q.Count, Unanswered: q.Unanswered, Answerable: q.Answerable, DetectedAt: now}
	for _, o := range q.Options {
		out.Options = append(out.Options, termapi.QuestionOption{Number: o.Number, Label: Redact(o.Label), Description: Redact(o.Description)})
	}
	return out
}

// questionBody is the callback text of a question: the question and its
// numbered options, then how to answer.
func questionBody(q *termapi.Question) string {
	var b strings.Builder
	b.WriteString("The agent asks: ")
	if q.Count > 1 {
		fmt.Fprintf(&b, "(question %d of %d) ", q.Position, q.Count)
	}
	writeQuestion(&b, q)
	switch {
	case !q.Answerable:
		b.WriteString("\nThe dialog does not have a shape that can be answered from here; answer it in the terminal.")
	case q.FreeText:
		b.WriteString("\nRespond with an option's number or label, or with your own answer (one line).")
	default:
		b.WriteString("\nRespond with an option's number or label.")
	}
	if rest := laterQuestions(q.Position, q.Count, q.Unanswered); q.Answerable && rest > 0 {
		fmt.Fprintf(&b, "\nThe dialog shows its questions one at a time and %d more follow%s. Respond with one line to answer this one (the next comes as its own question), or with %d lines, one answer per line in order, to answer this one and the following ones.",
			rest, map[bool]string{true: "s", false: ""}[rest == 1], rest+1)
	}
	return b.String()
}

// laterQuestions is how many unanswered questions a dialog of count
// questions shows after question position; 0 when they cannot be answered
// in one respond (some before this one are unanswered too).
func laterQuestions(position, count, unanswered int) int {
	if rest := count - position; count > 1 && unanswered == rest+1 {
		return rest
	}
	return 0
}

// splitAnswers reads a respond's text as one answer per non-empty line and
// checks the count against q: one (this question) or one for this and
// each later question.
func splitAnswers(q *screen.Question, text string) ([]string, error) {
	var answers []string
	for l := range strings.Lines(text) {
		if l = strings.TrimSpace(l); l != "" {
			answers = append(answers, l)
		}
	}
	rest := laterQuestions(q.Position, q.Count, q.Unanswered)
	switch {
	case len(answers) == 1 || len(answers) == rest+1:
		return answers, nil
	case rest == 0:
		return nil, fmt.Errorf("%w: the answer has %d lines but this question takes one answer on one line", termapi.ErrBadInput, len(answers))
	default:
		return nil, fmt.Errorf("%w: the answer has %d lines but the dialog has %d unanswered questions (this one and %d more); respond with one line for this question, or %d lines, one answer per line in order",
			termapi.ErrBadInput, len(answers), rest+1, rest, rest+1)
	}
}

// writeQuestion writes the question's text and its numbered options.
func writeQuestion(b *strings.Builder, q *termapi.Question) {
	b.WriteString(q.Text)
	for _, o := range q.Options {
		fmt.Fprintf(b, "\n%d. %s", o.Number, o.Label)
		if o.Description != "" {
			b.WriteString(" — " + o.Description)
		}
	}
}

// question is the monitor's look at a question dialog on the screen. It
// reports handled when the screen (or the Turn) concerns a question, so the
// approval checks are skipped.
func (m *monitor) question(ctx context.Context, t *store.Turn, sc agents.Screen, now time.Time) (handled bool, err error) {
	q := sc.Question
	answering := t.Takeover.AnsweringFingerprint != "" && now.Sub(time.UnixMilli(t.Takeover.AnsweringAt)) < approvalClaimStale
	switch {
	case answering:
		// A respond is pressing its keys (a typed answer redraws the
		// dialog first): it records the outcome itself.
		return q != nil || t.Question != nil, nil
	case q != nil && t.Question == nil && q.Fingerprint == t.Takeover.LastQuestionFingerprint:
		// The dialog answered last is still drawn (see forgetAnswered).
		return true, nil
	case q != nil && (t.Question == nil || t.Question.Fingerprint != q.Fingerprint):
		t.Question = storedQuestion(q, now.UnixMilli())
		t.Takeover.QuestionBlocked = !q.Answerable
		t.Takeover.AnsweringFingerprint, t.Takeover.AnsweringAt = "", 0
		typ := MsgQuestion
		if !q.Answerable {
			typ = MsgBlocked
		}
		msg, err := newMessage(t, actorOf(t.Agent), ActorOpenClaw, typ, questionBody(t.Question), now.UnixMilli())
		if err != nil {
			return true, err
		}
		msg.ID = callbackID(t.TurnID, t.Takeover.Submission.MessageID, q.Fingerprint, KindQuestion, strconv.FormatInt(now.UnixMilli(), 10))
		ApplyMessage(t, msg)
		t.Takeover.LastQuestionFingerprint = q.Fingerprint
		return true, m.write(ctx, store.TurnWrite{Turn: t, Events: []store.TurnEvent{
			event(now.UnixMilli(), "terminal_bridge_question_detected", map[string]any{"fingerprint": q.Fingerprint, "profile": q.Profile,
				"answerable": q.Answerable, "reason": q.Reason}),
			event(now.UnixMilli(), "message", msg)},
			Also: prepareCallback(t, msg, msg.ID, KindQuestion, map[string]any{"reason": "question", "question": t.Question,
				"question_fingerprint": q.Fingerprint, "answerable": q.Answerable, "next_steps": nextSteps(t, now)})})
	case q == nil && t.Question != nil && sc.Activity != string(screen.Unknown):
		// Closed without a respond of ours: answered (or dismissed) in
		// the terminal, or by a respond whose process stopped after its
		// keys. A screen not read (a frame half drawn) proves nothing
		// closed.
		data := map[string]any{"fingerprint": t.Question.Fingerprint, "decision": "answered_in_terminal"}
		questionAnswered(t)
		t.Takeover.AnsweringFingerprint, t.Takeover.AnsweringAt = "", 0
		t.Takeover.QuestionResolvedAt = now.UnixMilli()
		t.Takeover.LastQuestionFingerprint = "" // off the screen already
		return true, m.write(ctx, store.TurnWrite{Turn: t, Events: []store.TurnEvent{
			event(now.UnixMilli(), "terminal_bridge_question_resolved", data)}})
	}
	return false, nil
}

// answerChoice is how respond answers a question: the row to pick and, for
// a typed answer, the text to type into it.
type answerChoice struct {
	Number int
	Label  string
	Typed  string
}

// chooseAnswer maps a respond's text to a row of q: an option's number, or
// its label (case and a trailing " (Recommended)" aside); anything else is
// typed into the free-text row when the dialog has one, and refused
// otherwise with the options listed.
func chooseAnswer(q *screen.Question, text string) (answerChoice, error) {
	text = strings.TrimSpace(text)
	norm := func(s string) string {
		return strings.ToLower(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "(Recommended)")))
	}
	for _, o := range q.Options {
		if text == strconv.Itoa(o.Number) || text == strconv.Itoa(o.Number)+"." || norm(text) == norm(o.Label) {
			return answerChoice{Number: o.Number, Label: o.Label}, nil
		}
	}
	if q.FreeText > 0 && !strings.ContainsAny(text, "\n\r") {
		return answerChoice{Number: q.FreeText, Typed: text}, nil
	}
	var opts []string
	for _, o := range q.Options {
		opts = append(opts, fmt.Sprintf("%d (%s)", o.Number, o.Label))
	}
	why := "this dialog takes only one of its options from here"
	if q.FreeText > 0 {
		why = "a typed answer must be one line"
	}
	return answerChoice{}, fmt.Errorf("%w: %q is not one of the question's options and %s; respond with one of %s", termapi.ErrBadInput, text, why, strings.Join(opts, ", "))
}

// answer answers the question dialog of t in the pane: the row's digit,
// and for a typed answer the text and Enter. Like an approve, it claims the
// dialog on the Turn before it presses a key and records the answer
// itself, so the monitor does not take the closing dialog for a human's
// answer; the same Turn then goes on to the agent's reply.
func (s *Service) answer(ctx context.Context, t *store.Turn, text string) (termapi.SendResult, error) {
	fp := t.Question.Fingerprint
	p, a, err := s.turnPane(ctx, t)
	if err != nil {
		return termapi.SendResult{}, err
	}
	if wait := time.Until(time.UnixMilli(t.Question.DetectedAt).Add(answerSettle)); wait > 0 {
		select {
		case <-ctx.Done():
			return termapi.SendResult{}, ctx.Err()
		case <-time.After(wait):
		}
	}
	shown, err := s.o.Terminals.Capture(ctx, p)
	if err != nil {
		return termapi.SendResult{}, fmt.Errorf("capture pane: %w", err)
	}
	sc := a.Screen(shown)
	switch {
	case sc.Question == nil:
		return termapi.SendResult{}, fmt.Errorf("%w: the pane no longer shows the question", termapi.ErrRefused)
	case sc.Question.Fingerprint != fp:
		return termapi.SendResult{}, fmt.Errorf("%w: the pane shows a different question than the one reported; run status again", termapi.ErrRefused)
	case !sc.Question.Answerable:
		return termapi.SendResult{}, fmt.Errorf("%w: the question dialog does not have a shape that can be answered from here (%s); answer it in the terminal", termapi.ErrRefused, sc.Question.Reason)
	}
	answers, err := splitAnswers(sc.Question, text)
	if err != nil {
		return termapi.SendResult{}, err
	}
	choice, err := chooseAnswer(sc.Question, answers[0])
	if err != nil {
		return termapi.SendResult{}, err
	}
	t.Takeover.AnsweringFingerprint, t.Takeover.AnsweringAt = fp, nowMs()
	if err := s.write(ctx, t); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return termapi.SendResult{}, fmt.Errorf("%w: turn %s changed while it was being answered; run status again", termapi.ErrRefused, t.TurnID)
		}
		return termapi.SendResult{}, err
	}
	given, failed := s.pressAnswers(ctx, p, a, sc.Question, choice, answers)
	if len(given) == 0 {
		s.releaseAnswer(context.WithoutCancel(ctx), t.TurnID, fp)
		return termapi.SendResult{}, failed
	}
	data := map[string]any{"fingerprint": fp, "decision": "answered"}
	for k, v := range given[0] {
		data[k] = v
	}
	if len(given) > 1 {
		data["answers"] = given
	}
	for {
		now := nowMs()
		if t.Takeover.AnsweringFingerprint != fp {
			break // the monitor recorded it for a responder that took too long
		}
		t.Takeover.AnsweringFingerprint, t.Takeover.AnsweringAt = "", 0
		t.Takeover.QuestionResolvedAt = now
		if t.Status == termapi.TurnWaitingForOpenClaw && t.Question != nil && t.Question.Fingerprint == fp {
			questionAnswered(t)
			t.Takeover.LastActivityAt, t.Takeover.LastActivityReason = now, "answered"
		}
		err := s.write(context.WithoutCancel(ctx), t, event(now, "terminal_bridge_question_answered", data))
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrConflict) {
			return termapi.SendResult{}, fmt.Errorf("the answer was given but recording it failed: %w", err)
		}
		if t, err = s.turn(context.WithoutCancel(ctx), t.TurnID); err != nil {
			return termapi.SendResult{}, err
		}
	}
	s.startMonitor(ctx, t.TurnID)
	if failed != nil {
		return termapi.SendResult{}, fmt.Errorf("%d of %d answers were given, then: %w", len(given), len(answers), failed)
	}
	return termapi.SendResult{SessionID: t.SessionID, TurnID: t.TurnID, SubmissionOutcome: termapi.OutcomeAccepted, DoNotRetry: true}, nil
}

// pressAnswers gives answers to the dialog's questions in turn, from page
// (the one shown, whose answer is first): each later answer is chosen
// from its own question once the dialog shows it. It returns what was
// given, for the audit, and why it stopped early, if it did.
func (s *Service) pressAnswers(ctx context.Context, p agents.Pane, a agents.Agent, page *screen.Question, choice answerChoice, answers []string) (given []map[string]any, failed error) {
	for i := range answers {
		if i > 0 {
			prev := page
			var ok bool
			page, ok = s.waitScreen(ctx, p, a, func(q *screen.Question) bool { return q != nil && q.Position == prev.Position+1 && q.Answerable })
			if !ok {
				return given, fmt.Errorf("%w: the dialog did not show question %d of %d ready for an answer; run status again", termapi.ErrRefused, prev.Position+1, prev.Count)
			}
			var err error
			if choice, err = chooseAnswer(page, answers[i]); err != nil {
				return given, fmt.Errorf("answer %d: %w", i+1, err)
			}
		}
		if err := s.pressAnswer(ctx, p, a, page, choice); err != nil {
			return given, err
		}
		// Wait until the question is gone: a dialog holding a typed answer
		// is drawn with another fingerprint until the TUI takes the Enter,
		// and the monitor must not report it as a new question.
		shown := page
		s.waitScreen(ctx, p, a, func(q *screen.Question) bool {
			return q == nil || q.Text != shown.Text || q.Position != shown.Position
		})
		g := map[string]any{"option": choice.Number}
		if choice.Typed != "" {
			g["typed"] = true
		} else {
			g["label"] = Redact(choice.Label)
		}
		given = append(given, g)
	}
	return given, nil
}

// pressAnswer presses choice's row of question q or, for a typed answer,
// the keys that open its free-text row and, once it has the cursor, the
// text and Enter.
func (s *Service) pressAnswer(ctx context.Context, p agents.Pane, a agents.Agent, q *screen.Question, choice answerChoice) error {
	if choice.Typed == "" {
		if err := s.o.Terminals.SendKeys(ctx, p, strconv.Itoa(choice.Number)); err != nil {
			return fmt.Errorf("press the answer's key: %w", err)
		}
		return nil
	}
	if err := s.o.Terminals.SendKeys(ctx, p, q.FreeTextKeys...); err != nil {
		return fmt.Errorf("open the free-text row: %w", err)
	}
	// The row takes typed text only once it has the cursor; the dialog
	// then redraws (another fingerprint).
	if _, ok := s.waitScreen(ctx, p, a, func(q *screen.Question) bool { return q != nil && q.Typing && q.Selected == choice.Number }); !ok {
		return fmt.Errorf("%w: the free-text row did not take the cursor; answer in the terminal", termapi.ErrRefused)
	}
	if err := s.o.Terminals.SendText(ctx, p, choice.Typed); err != nil {
		return fmt.Errorf("type the answer: %w", err)
	}
	// Enter only once the text shows: a TUI may hold fast keys back as a
	// paste for a moment (Codex does), and an Enter that overtakes them
	// submits the row without its text and lets it spill into the next
	// question.
	// It must also stay drawn unchanged for typedSettle: Codex was seen
	// to carry a note that had just been drawn over to the next question.
	typed := strings.Join(strings.Fields(choice.Typed), " ")
	var seen string
	var seenAt time.Time
	if _, ok := s.waitScreenText(ctx, p, a, func(shown string, q *screen.Question) bool {
		// Claude Code draws the text in place of "Type something.", so
		// the row no longer reads as the free-text row.
		if q == nil || !strings.Contains(strings.Join(strings.Fields(shown), " "), typed) {
			return false
		}
		if shown != seen {
			seen, seenAt = shown, time.Now()
		}
		return time.Since(seenAt) >= typedSettle
	}); !ok {
		return fmt.Errorf("%w: the typed answer did not show in the dialog's free-text row; answer in the terminal", termapi.ErrRefused)
	}
	if err := s.o.Terminals.SendKeys(ctx, p, "Enter"); err != nil {
		return fmt.Errorf("submit the typed answer: %w", err)
	}
	return nil
}

// waitScreen waits up to freeTextWait for the pane's question dialog (nil
// when none is shown) to satisfy ok, and returns it.
func (s *Service) waitScreen(ctx context.Context, p agents.Pane, a agents.Agent, ok func(*screen.Question) bool) (*screen.Question, bool) {
	return s.waitScreenText(ctx, p, a, func(_ string, q *screen.Question) bool { return ok(q) })
}

// waitScreenText is waitScreen for a condition that also reads the
// capture.
func (s *Service) waitScreenText(ctx context.Context, p agents.Pane, a agents.Agent, ok func(shown string, q *screen.Question) bool) (*screen.Question, bool) {
	deadline := time.Now().Add(freeTextWait)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if text, err := s.o.Terminals.Capture(ctx, p); err == nil {
			if q := a.Screen(text).Question; ok(text, q) {
				return q, true
			}
		}
		if time.Now().After(deadline) {
			return nil, false
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-tick.C:
		}
	}
}

// releaseAnswer drops a respond's claim on question fp after its keys
// could not be pressed, so that the monitor reads the dialog again.
func (s *Service) releaseAnswer(ctx context.Context, turnID, fp string) {
	for range 5 {
		t, err := s.turn(ctx, turnID)
		if err != nil || t.Takeover.AnsweringFingerprint != fp {
			return
		}
		t.Takeover.AnsweringFingerprint, t.Takeover.AnsweringAt = "", 0
		if err := s.write(ctx, t); !errors.Is(err, store.ErrConflict) {
			return
		}
	}
}
