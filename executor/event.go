package executor

import (
	"encoding/json"
	"fmt"
	"time"
)

// Kind names one of the seven event kinds.
type Kind string

// The seven event kinds. A switch over kinds must name all seven; the
// package's exhaustiveness test scans the module for switches that forget one.
const (
	KindTextDelta  Kind = "text-delta"
	KindToolCall   Kind = "tool-call"
	KindToolResult Kind = "tool-result"
	KindStatus     Kind = "status"
	KindCost       Kind = "cost"
	KindDone       Kind = "done"
	KindError      Kind = "error"
)

// Kinds returns the seven event kinds in their canonical order.
func Kinds() []Kind {
	return []Kind{KindTextDelta, KindToolCall, KindToolResult, KindStatus, KindCost, KindDone, KindError}
}

// Payload is the kind-specific part of an event. The set of implementations
// is closed: TextDelta, ToolCall, ToolResult, Status, Cost, Done and Error.
type Payload interface {
	// Kind names the payload's kind.
	Kind() Kind
	isPayload()
}

// Channel separates visible assistant output from reasoning traces.
type Channel string

// Text channels. The zero value means ChannelAssistant.
const (
	ChannelAssistant Channel = "assistant"
	ChannelReasoning Channel = "reasoning"
)

// TextDelta is incremental assistant text. A runtime without native deltas
// emits one synthetic TextDelta holding the whole message.
type TextDelta struct {
	Text    string  `json:"text"`
	Channel Channel `json:"channel,omitempty"`
}

// ToolCall is a tool invocation. Partial is true while the input JSON is
// still streaming.
type ToolCall struct {
	ToolCallID string          `json:"toolCallId"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	Partial    bool            `json:"partial"`
}

// ToolResult is the outcome of a tool call.
type ToolResult struct {
	ToolCallID string `json:"toolCallId"`
	Name       string `json:"name"`
	Output     string `json:"output"`
	IsError    bool   `json:"isError"`
}

// Phase is a non-text lifecycle phase.
type Phase string

// Lifecycle phases.
const (
	PhaseInit         Phase = "init"
	PhaseThinking     Phase = "thinking"
	PhaseRunning      Phase = "running"
	PhaseTurnComplete Phase = "turn-complete"
)

// Status is a non-text lifecycle signal.
type Status struct {
	Phase  Phase  `json:"phase"`
	Model  string `json:"model,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Usage counts tokens.
type Usage struct {
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	CachedInputTokens int64 `json:"cachedInputTokens,omitempty"`
}

// Total returns input plus output tokens.
func (u Usage) Total() int64 { return u.InputTokens + u.OutputTokens }

// Cost reports token usage and, when the runtime knows it, USD. Not every
// runtime reports USD: CostUSD is nil then, and Estimated marks a figure (or
// an absent figure) that a consumer must derive rather than trust.
type Cost struct {
	CostUSD   *float64 `json:"costUsd"`
	Usage     Usage    `json:"usage"`
	Model     string   `json:"model"` // empty when unknown (encoded as null)
	Estimated bool     `json:"estimated,omitempty"`
}

// DoneReason says how a run ended.
type DoneReason string

// Done reasons. When several apply, the precedence is aborted > max_turns >
// success > error.
const (
	DoneSuccess  DoneReason = "success"
	DoneMaxTurns DoneReason = "max_turns"
	DoneAborted  DoneReason = "aborted"
	DoneError    DoneReason = "error"
)

// Done is the terminal summary of one run or turn.
type Done struct {
	Reason  DoneReason `json:"reason"`
	Summary string     `json:"summary"`
	Usage   *Usage     `json:"usage,omitempty"`
	CostUSD *float64   `json:"costUsd,omitempty"`
}

// Error is a recoverable or fatal failure. Code is empty when the runtime
// gave none (encoded as null).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Fatal   bool   `json:"fatal"`
}

// Kind implements Payload.
func (TextDelta) Kind() Kind { return KindTextDelta }

// Kind implements Payload.
func (ToolCall) Kind() Kind { return KindToolCall }

// Kind implements Payload.
func (ToolResult) Kind() Kind { return KindToolResult }

// Kind implements Payload.
func (Status) Kind() Kind { return KindStatus }

// Kind implements Payload.
func (Cost) Kind() Kind { return KindCost }

// Kind implements Payload.
func (Done) Kind() Kind { return KindDone }

// Kind implements Payload.
func (Error) Kind() Kind { return KindError }

func (TextDelta) isPayload()  {}
func (ToolCall) isPayload()   {}
func (ToolResult) isPayload() {}
func (Status) isPayload()     {}
func (Cost) isPayload()       {}
func (Done) isPayload()       {}
func (Error) isPayload()      {}

// Event is one normalized runtime event: the common envelope plus a payload.
//
// Its JSON form is flat, with the seed's field names: kind, runId,
// sessionId (null when empty), ts (Unix milliseconds), seq, then the
// payload's fields (text, toolCallId, reason, ...).
type Event struct {
	RunID     string
	SessionID string // the runtime's session handle; empty when unknown
	TS        time.Time
	// Seq is strictly increasing per stream, starting at 1; it orders
	// events that share a timestamp.
	Seq     uint64
	Payload Payload
}

// Kind returns the payload's kind, or "" when the payload is nil.
func (e Event) Kind() Kind {
	if e.Payload == nil {
		return ""
	}
	return e.Payload.Kind()
}

type envelopeJSON struct {
	Kind      Kind    `json:"kind"`
	RunID     string  `json:"runId"`
	SessionID *string `json:"sessionId"`
	TS        int64   `json:"ts"`
	Seq       uint64  `json:"seq"`
}

// wire forms for fields the seed types as "string | null".
type costJSON struct {
	CostUSD   *float64 `json:"costUsd"`
	Usage     Usage    `json:"usage"`
	Model     *string  `json:"model"`
	Estimated bool     `json:"estimated,omitempty"`
}

type errorJSON struct {
	Code    *string `json:"code"`
	Message string  `json:"message"`
	Fatal   bool    `json:"fatal"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// MarshalJSON encodes the event in its flat wire form.
func (e Event) MarshalJSON() ([]byte, error) {
	if e.Payload == nil {
		return nil, fmt.Errorf("marshal event: nil payload")
	}
	env, err := json.Marshal(envelopeJSON{
		Kind:      e.Payload.Kind(),
		RunID:     e.RunID,
		SessionID: nullable(e.SessionID),
		TS:        e.TS.UnixMilli(),
		Seq:       e.Seq,
	})
	if err != nil {
		return nil, fmt.Errorf("marshal event: %w", err)
	}
	var body any
	switch p := e.Payload.(type) {
	case Cost:
		body = costJSON{CostUSD: p.CostUSD, Usage: p.Usage, Model: nullable(p.Model), Estimated: p.Estimated}
	case Error:
		body = errorJSON{Code: nullable(p.Code), Message: p.Message, Fatal: p.Fatal}
	case ToolCall:
		if len(p.Input) == 0 {
			p.Input = json.RawMessage("{}")
		}
		body = p
	case TextDelta, ToolResult, Status, Done:
		body = p
	default:
		return nil, fmt.Errorf("marshal event: unknown payload %T", p)
	}
	pb, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("marshal event %s: %w", e.Payload.Kind(), err)
	}
	out := make([]byte, 0, len(env)+len(pb))
	out = append(out, env[:len(env)-1]...)
	if len(pb) > 2 {
		out = append(out, ',')
		out = append(out, pb[1:]...)
	} else {
		out = append(out, '}')
	}
	return out, nil
}

// UnmarshalJSON decodes the flat wire form written by MarshalJSON.
func (e *Event) UnmarshalJSON(b []byte) error {
	var env envelopeJSON
	if err := json.Unmarshal(b, &env); err != nil {
		return fmt.Errorf("unmarshal event: %w", err)
	}
	var p Payload
	var err error
	switch env.Kind {
	case KindTextDelta:
		var v TextDelta
		err = json.Unmarshal(b, &v)
		p = v
	case KindToolCall:
		var v ToolCall
		err = json.Unmarshal(b, &v)
		p = v
	case KindToolResult:
		var v ToolResult
		err = json.Unmarshal(b, &v)
		p = v
	case KindStatus:
		var v Status
		err = json.Unmarshal(b, &v)
		p = v
	case KindCost:
		var v costJSON
		err = json.Unmarshal(b, &v)
		p = Cost{CostUSD: v.CostUSD, Usage: v.Usage, Model: deref(v.Model), Estimated: v.Estimated}
	case KindDone:
		var v Done
		err = json.Unmarshal(b, &v)
		p = v
	case KindError:
		var v errorJSON
		err = json.Unmarshal(b, &v)
		p = Error{Code: deref(v.Code), Message: v.Message, Fatal: v.Fatal}
	default:
		return fmt.Errorf("unmarshal event: unknown kind %q", env.Kind)
	}
	if err != nil {
		return fmt.Errorf("unmarshal event %s: %w", env.Kind, err)
	}
	*e = Event{RunID: env.RunID, SessionID: deref(env.SessionID), TS: time.UnixMilli(env.TS), Seq: env.Seq, Payload: p}
	return nil
}
