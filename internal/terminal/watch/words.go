package watch

import (
	"fmt"
	"strings"

	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/redact"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
	"github.com/clawconnect/clawconnect/termapi"
)

// The words of a notification: a watch's callback message speaks the
// vocabulary of a Turn's callbacks (the Turn service's message types and
// actors, its question and result texts), so the plugin reads both alike.

// Message types and the actor of a notification.
const (
	msgQuestion   = "question"
	msgDone       = "done"
	msgError      = "error"
	actorOpenClaw = "openclaw"
)

// actorOf returns the message actor of an agent kind.
func actorOf(agent string) string {
	if agent == "claude" {
		return "claude-code"
	}
	return agent
}

// resultText redacts s and keeps at most native.MaxText characters.
func resultText(s string) string {
	out, _ := native.Clip(redact.Redact(strings.TrimSpace(s)))
	return out
}

// storedQuestion is q as the watch reports it: texts redacted.
func storedQuestion(q *screen.Question, now int64) *termapi.Question {
	out := &termapi.Question{Fingerprint: q.Fingerprint, Header: redact.Redact(q.Header), Text: redact.Redact(q.Text),
		FreeText: q.FreeText > 0, Position: q.Position, Count: q.Count, Unanswered: q.Unanswered, Answerable: q.Answerable, DetectedAt: now}
	for _, o := range q.Options {
		out.Options = append(out.Options, termapi.QuestionOption{Number: o.Number, Label: redact.Redact(o.Label), Description: redact.Redact(o.Description)})
	}
	return out
}

// questionBody is the notification text of a question the watched task
// asks: the question and its numbered options, answered in the terminal.
func questionBody(agent string, q *termapi.Question) string {
	var b strings.Builder
	b.WriteString("The watched " + agent + " task asks: ")
	b.WriteString(q.Text)
	for _, o := range q.Options {
		fmt.Fprintf(&b, "\n%d. %s", o.Number, o.Label)
		if o.Description != "" {
			b.WriteString(" — " + o.Description)
		}
	}
	b.WriteString("\nAnswer it in the terminal.")
	return b.String()
}
