package fakemodel

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseScript(t *testing.T) {
	tests := []struct {
		name   string
		prompt string
		want   Script
	}{
		{"plain", "hello there", Script{Text: "FAKE-REPLY: hello there"}},
		{"echo", "say ECHO=tok-123 please", Script{Text: "tok-123"}},
		{"first echo wins", "ECHO=a ECHO=b", Script{Text: "a"}},
		{"empty echo is text", "ECHO=", Script{Text: "FAKE-REPLY: ECHO="}},
		{"long", "LONG", Script{Text: LongText(DefaultLongLines)}},
		{"long n", "LONG=3", Script{Text: LongText(3)}},
		{"long too big is text", "LONG=100001", Script{Text: "FAKE-REPLY: LONG=100001"}},
		{"empty", "EMPTY", Script{Text: ""}},
		{"slow", "SLOW go", Script{Text: "FAKE-REPLY: SLOW go", Slow: true}},
		{"hang", "HANG ECHO=x", Script{Text: "x", Hang: true}},
		{"wait", "WAIT=1500 ECHO=w", Script{Text: "w", Wait: 1500 * time.Millisecond}},
		{"wait once", "WAITONCE=1500 ECHO=w", Script{Text: "w", Wait: 1500 * time.Millisecond, WaitOnce: true}},
		{"wait capped", "WAIT=999999999", Script{Text: "FAKE-REPLY: WAIT=999999999", Wait: maxWait}},
		{"wait negative ignored", "WAIT=-5", Script{Text: "FAKE-REPLY: WAIT=-5"}},
		{"fail400", "FAIL400", Script{Text: "FAKE-REPLY: FAIL400", Fail: 400}},
		{"fail500", "x FAIL500", Script{Text: "FAKE-REPLY: x FAIL500", Fail: 500}},
		{"fail any", "FAIL=429", Script{Text: "FAKE-REPLY: FAIL=429", Fail: 429}},
		{"fail out of range", "FAIL=200", Script{Text: "FAKE-REPLY: FAIL=200"}},
		{"lower case is text", "slow echo=x", Script{Text: "FAKE-REPLY: slow echo=x"}},
		{"toolcall", "please TOOLCALL: echo hi there\nthanks", Script{
			Text: "FAKE-REPLY: please TOOLCALL: echo hi there\nthanks", ToolCommand: "echo hi there"}},
		{"toolcall without command", "TOOLCALL:", Script{Text: "FAKE-REPLY: TOOLCALL:"}},
		{"escalated toolcall", "TOOLCALL: ESCALATE touch x", Script{
			Text: "FAKE-REPLY: TOOLCALL: ESCALATE touch x", ToolCommand: "touch x", Escalate: true}},
		{"escalate without command is a command", "TOOLCALL: ESCALATE", Script{
			Text: "FAKE-REPLY: TOOLCALL: ESCALATE", ToolCommand: "ESCALATE"}},
		{"question", "QUESTION: Pick one? | Tea | Coffee |  | Water\nmore", Script{
			Text: "FAKE-REPLY: QUESTION: Pick one? | Tea | Coffee |  | Water\nmore", Question: "Pick one?", QuestionOptions: []string{"Tea", "Coffee", "Water"}}},
		{"question with default options", "QUESTION: Which color? | Green", Script{
			Text: "FAKE-REPLY: QUESTION: Which color? | Green", Question: "Which color?", QuestionOptions: DefaultQuestionOptions}},
		{"several questions", "QUESTION: Color? | Red | Blue || Size? | S | M ||  | x", Script{
			Text: "FAKE-REPLY: QUESTION: Color? | Red | Blue || Size? | S | M ||  | x", Question: "Color?", QuestionOptions: []string{"Red", "Blue"},
			MoreQuestions: []Question{{Text: "Size?", Options: []string{"S", "M"}}}}},
		{"question without text is text", "QUESTION: | a | b", Script{Text: "FAKE-REPLY: QUESTION: | a | b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ParseScript(tt.prompt)); diff != "" {
				t.Errorf("ParseScript(%q) (-want +got):\n%s", tt.prompt, diff)
			}
		})
	}
}

func TestLongText(t *testing.T) {
	if got := LongText(0); got != "" {
		t.Errorf("LongText(0) = %q, want empty", got)
	}
	want := "line 0001: the quick brown fox jumps over the lazy dog\nline 0002: the quick brown fox jumps over the lazy dog"
	if got := LongText(2); got != want {
		t.Errorf("LongText(2) = %q, want %q", got, want)
	}
}

func strPtr(s string) *string { return &s }

func TestExtractPrompt(t *testing.T) {
	tests := []struct {
		name string
		api  API
		body any
		want Extracted
	}{
		{
			name: "openclaw chat completions",
			api:  APIChatCompletions,
			body: map[string]any{"messages": []any{
				map[string]any{"role": "system", "content": "You are OpenClaw. SLOW FAIL400"},
				map[string]any{"role": "user", "content": "[Mon 2026-11-30 09:35 UTC] hello ECHO=abc\n\nRuntime: agent=main | session=agent:main:x"},
				map[string]any{"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nstuff\n<<<END>>>"},
			}},
			want: Extracted{Prompt: "hello ECHO=abc"},
		},
		{
			name: "chat completions content parts",
			api:  APIChatCompletions,
			body: map[string]any{"messages": []any{
				map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "parts prompt"}}},
			}},
			want: Extracted{Prompt: "parts prompt"},
		},
		{
			name: "chat completions tool result",
			api:  APIChatCompletions,
			body: map[string]any{"messages": []any{
				map[string]any{"role": "user", "content": "TOOLCALL: echo hi"},
				map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{}},
				map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "hi\n"},
				map[string]any{"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> x"},
			}},
			want: Extracted{ToolResult: strPtr("hi\n")},
		},
		{
			name: "claude code messages",
			api:  APIMessages,
			body: map[string]any{"system": []any{map[string]any{"type": "text", "text": "HANG"}}, "messages": []any{
				map[string]any{"role": "user", "content": []any{
					map[string]any{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
					map[string]any{"type": "text", "text": "hi claude"},
				}},
			}},
			want: Extracted{Prompt: "hi claude"},
		},
		{
			name: "claude code large paste",
			api:  APIMessages,
			body: map[string]any{"messages": []any{
				map[string]any{"role": "user", "content": []any{
					map[string]any{"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
					map[string]any{"type": "text", "text": "\n\n<pasted_content id=\"ab\">\nline 1\nECHO=ok\n</pasted_content id=\"ab\">\n"},
				}},
			}},
			want: Extracted{Prompt: "<pasted_content id=\"ab\">\nline 1\nECHO=ok\n</pasted_content id=\"ab\">"},
		},
		{
			name: "claude code tool result",
			api:  APIMessages,
			body: map[string]any{"messages": []any{
				map[string]any{"role": "user", "content": "TOOLCALL: echo hi"},
				map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "t1"}}},
				map[string]any{"role": "user", "content": []any{
					map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": "hi"},
				}},
			}},
			want: Extracted{ToolResult: strPtr("hi")},
		},
		{
			name: "claude code prompt after interrupted tool",
			api:  APIMessages,
			body: map[string]any{"messages": []any{
				map[string]any{"role": "user", "content": []any{
					map[string]any{"type": "tool_result", "tool_use_id": "t1", "content": []any{map[string]any{"type": "text", "text": "no"}}},
					map[string]any{"type": "text", "text": "[Request interrupted by user for tool use]"},
					map[string]any{"type": "text", "text": "next prompt"},
				}},
			}},
			want: Extracted{Prompt: "next prompt"},
		},
		{
			name: "codex responses",
			api:  APIResponses,
			body: map[string]any{"input": []any{
				map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "SLOW"}}},
				map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "<environment_context>x</environment_context>"}}},
				map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "hi codex"}}},
			}},
			want: Extracted{Prompt: "hi codex"},
		},
		{
			name: "codex tool output",
			api:  APIResponses,
			body: map[string]any{"input": []any{
				map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "TOOLCALL: x"}}},
				map[string]any{"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"},
				map[string]any{"type": "function_call_output", "call_id": "c1", "output": "Chunk ID: 1\nOutput:\nhi-codex\n"},
			}},
			want: Extracted{ToolResult: strPtr("Chunk ID: 1\nOutput:\nhi-codex\n")},
		},
		{
			name: "responses string input",
			api:  APIResponses,
			body: map[string]any{"input": "just text"},
			want: Extracted{Prompt: "just text"},
		},
		{
			name: "no user message",
			api:  APIChatCompletions,
			body: map[string]any{"messages": []any{map[string]any{"role": "system", "content": "x"}}},
			want: Extracted{},
		},
		{
			name: "messages of the wrong type",
			api:  APIChatCompletions,
			body: map[string]any{"messages": "nope"},
			want: Extracted{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := json.Marshal(tt.body)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ExtractPrompt(tt.api, body)
			if err != nil {
				t.Fatalf("ExtractPrompt: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ExtractPrompt (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExtractPromptRejectsNonJSON(t *testing.T) {
	if _, err := ExtractPrompt(APIMessages, []byte("not json")); err == nil {
		t.Fatal("ExtractPrompt accepted a non-JSON body")
	}
}

func TestToolOutputLine(t *testing.T) {
	tests := []struct{ in, want string }{
		{"hi\n", "hi"},
		{"Chunk ID: 1\nWall time: 0s\nOutput:\nhi-codex\nmore\n", "hi-codex"},
		{"  first\nsecond", "first"},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := toolOutputLine(tt.in); got != tt.want {
				t.Errorf("toolOutputLine(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		text string
		n    int
		want []string
	}{
		{"", 4, nil},
		{"abcd", 4, []string{"a", "b", "c", "d"}},
		{"ab", 4, []string{"a", "b"}},
		{"héllo", 2, []string{"hé", "llo"}},
		{"abc", 0, []string{"abc"}},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, split(tt.text, tt.n)); diff != "" {
				t.Errorf("split (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseScript(f *testing.F) {
	for _, s := range []string{"hello", "ECHO=x LONG=5 WAIT=10", "TOOLCALL: ls\n", "FAIL=503 SLOW HANG", "LONG=-1 EMPTY"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, prompt string) {
		s := ParseScript(prompt)
		if s.Wait < 0 || s.Wait > maxWait {
			t.Fatalf("wait %v out of range", s.Wait)
		}
		if s.Fail != 0 && (s.Fail < 400 || s.Fail > 599) {
			t.Fatalf("fail status %d out of range", s.Fail)
		}
	})
}

func FuzzExtractPrompt(f *testing.F) {
	seeds := []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","content":[{"type":"text"}]}]}]}`,
		`{"input":[{"type":"function_call_output","output":"x"}]}`,
		`{"input":"s"}`,
		`{"messages":[{"role":"tool","content":{}}]}`,
		`[]`, `null`, `{`,
	}
	for _, s := range seeds {
		f.Add(uint8(0), s)
		f.Add(uint8(1), s)
	}
	apis := []API{APIChatCompletions, APIResponses, APIMessages}
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		ex, err := ExtractPrompt(apis[int(which)%len(apis)], []byte(body))
		if err != nil {
			return
		}
		_ = ParseScript(ex.Prompt)
		if ex.ToolResult != nil {
			_ = toolOutputLine(*ex.ToolResult)
		}
	})
}

func TestParseScriptToolUse(t *testing.T) {
	s := ParseScript(`please TOOLUSE: clawconnect_terminal_send {"terminal_id":"terminal:v2:x","request":"ECHO=ok"}` + "\nmore")
	if s.ToolName != "clawconnect_terminal_send" || s.ToolArgs != `{"terminal_id":"terminal:v2:x","request":"ECHO=ok"}` {
		t.Fatalf("script = %+v", s)
	}
	if s := ParseScript(`TOOLUSE: broken {"a":`); s.ToolName != "" {
		t.Fatalf("invalid JSON arguments gave a tool call: %+v", s)
	}
}
