package terminal

import (
	"fmt"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/ids"
)

// Message types and actors of a Turn's messages.
const (
	MsgTask     = "task"
	MsgQuestion = "question"
	MsgAnswer   = "answer"
	MsgProgress = "progress"
	MsgBlocked  = "blocked"
	MsgDone     = "done"
	MsgError    = "error"
	MsgControl  = "control"
	// MsgCancelled reports a Turn that ended by a cancel or an interrupt
	// in the terminal, not by the agent's reply.
	MsgCancelled = "cancelled"

	ActorOpenClaw = "openclaw"
)

// Message is one message of a Turn, logged as a "message" event.
type Message struct {
	ID               string `json:"id"`
	TS               int64  `json:"ts"`
	SessionID        string `json:"session_id"`
	TurnID           string `json:"turn_id"`
	From             string `json:"from"`
	To               string `json:"to"`
	Type             string `json:"type"`
	RequiresResponse bool   `json:"requires_response"`
	Body             string `json:"body"`
}

// actorOf returns the message actor of an agent kind.
func actorOf(agent string) string {
	if agent == "claude" {
		return "claude-code"
	}
	return agent
}

// newMessage builds a message with the default requires_response
// (task, question, answer, blocked) and checks its route.
func newMessage(t *store.Turn, from, to, typ, body string, ts int64) (Message, error) {
	m := Message{ID: ids.Message(), TS: ts, SessionID: t.SessionID, TurnID: t.TurnID, From: from, To: to, Type: typ, Body: body}
	switch typ {
	case MsgTask, MsgQuestion, MsgAnswer, MsgBlocked:
		m.RequiresResponse = true
	}
	if body == "" {
		return m, fmt.Errorf("message %s: the body is empty", typ)
	}
	allowed := map[string]bool{}
	if from == ActorOpenClaw {
		allowed = map[string]bool{MsgTask: true, MsgAnswer: true, MsgControl: true, MsgError: true}
	} else if to == ActorOpenClaw {
		allowed = map[string]bool{MsgQuestion: true, MsgProgress: true, MsgBlocked: true, MsgDone: true, MsgError: true, MsgCancelled: true}
	}
	if !allowed[typ] {
		return m, fmt.Errorf("message %s from %s to %s is not an allowed route", typ, from, to)
	}
	return m, nil
}
