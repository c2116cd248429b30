package executor

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func ptr[T any](v T) *T { return &v }

func TestEventJSONWireForm(t *testing.T) {
	ts := time.UnixMilli(1_764_000_000_123)
	env := func(p Payload) Event { return Event{RunID: "r1", SessionID: "s1", TS: ts, Seq: 7, Payload: p} }
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"text delta", env(TextDelta{Text: "hi", Channel: ChannelReasoning}),
			`{"kind":"text-delta","runId":"r1","sessionId":"s1","ts":1764000000123,"seq":7,"text":"hi","channel":"reasoning"}`},
		{"tool call", env(ToolCall{ToolCallID: "c1", Name: "Bash", Input: json.RawMessage(`{"command":"ls"}`)}),
			`{"kind":"tool-call","runId":"r1","sessionId":"s1","ts":1764000000123,"seq":7,"toolCallId":"c1","name":"Bash","input":{"command":"ls"},"partial":false}`},
		{"tool call without input", env(ToolCall{ToolCallID: "c1", Name: "x", Input: json.RawMessage(`{}`)}),
			`{"kind":"tool-call","runId":"r1","sessionId":"s1","ts":1764000000123,"seq":7,"toolCallId":"c1","name":"x","input":{},"partial":false}`},
		{"tool result", env(ToolResult{ToolCallID: "c1", Name: "Bash", Output: "ok", IsError: true}),
			`{"kind":"tool-result","runId":"r1","sessionId":"s1","ts":1764000000123,"seq":7,"toolCallId":"c1","name":"Bash","output":"ok","isError":true}`},
		{"status", env(Status{Phase: PhaseInit, Model: "m"}),
			`{"kind":"status","runId":"r1","sessionId":"s1","ts":1764000000123,"seq":7,"phase":"init","model":"m"}`},
		{"cost without usd", env(Cost{Usage: Usage{InputTokens: 10, OutputTokens: 6}, Estimated: true}),
			`{"kind":"cost","runId":"r1","sessionId":"s1","ts":1764000000123,"seq":7,"costUsd":null,"usage":{"inputTokens":10,"outputTokens":6},"model":null,"estimated":true}`},
		{"cost with usd", env(Cost{CostUSD: ptr(0.5), Usage: Usage{InputTokens: 1, OutputTokens: 2, CachedInputTokens: 3}, Model: "sonnet"}),
			`{"kind":"cost","runId":"r1","sessionId":"s1","ts":1764000000123,"seq":7,"costUsd":0.5,"usage":{"inputTokens":1,"outputTokens":2,"cachedInputTokens":3},"model":"sonnet"}`},
		{"done", env(Done{Reason: DoneAborted, Summary: "stopped"}),
			`{"kind":"done","runId":"r1","sessionId":"s1","ts":1764000000123,"seq":7,"reason":"aborted","summary":"stopped"}`},
		{"done with usage", env(Done{Reason: DoneSuccess, Summary: "ok", Usage: &Usage{InputTokens: 1}, CostUSD: ptr(0.25)}),
			`{"kind":"done","runId":"r1","sessionId":"s1","ts":1764000000123,"seq":7,"reason":"success","summary":"ok","usage":{"inputTokens":1,"outputTokens":0},"costUsd":0.25}`},
		{"error without code", env(Error{Message: "boom", Fatal: true}),
			`{"kind":"error","runId":"r1","sessionId":"s1","ts":1764000000123,"seq":7,"code":null,"message":"boom","fatal":true}`},
		{"no session id", Event{RunID: "r1", TS: ts, Seq: 1, Payload: Done{Reason: DoneError}},
			`{"kind":"done","runId":"r1","sessionId":null,"ts":1764000000123,"seq":1,"reason":"error","summary":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, string(b)); diff != "" {
				t.Errorf("wire form (-want +got):\n%s", diff)
			}
			var back Event
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.ev, back, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEventJSONRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"unknown kind", `{"kind":"telepathy","runId":"r"}`},
		{"not an object", `[1,2]`},
		{"bad payload", `{"kind":"text-delta","text":5}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ev Event
			if err := json.Unmarshal([]byte(tt.in), &ev); err == nil {
				t.Errorf("Unmarshal(%s) = nil error, want one", tt.in)
			}
		})
	}
	if _, err := json.Marshal(Event{}); err == nil {
		t.Error("Marshal(Event{}) with nil payload = nil error, want one")
	}
}

func TestKindsAreTheSevenPayloadKinds(t *testing.T) {
	got := []Kind{TextDelta{}.Kind(), ToolCall{}.Kind(), ToolResult{}.Kind(), Status{}.Kind(), Cost{}.Kind(), Done{}.Kind(), Error{}.Kind()}
	if diff := cmp.Diff(Kinds(), got); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
}
