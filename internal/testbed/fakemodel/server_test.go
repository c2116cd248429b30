package fakemodel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sseEvent is one parsed SSE event.
type sseEvent struct {
	Name string
	Data string
}

func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" || cur.Name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read SSE: %v", err)
	}
	return out
}

func post(t *testing.T, ctx context.Context, url string, body any) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func field(t *testing.T, data string, path ...string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("event data %q: %v", data, err)
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// streamed is what a client reassembles from a stream.
type streamed struct {
	Text     string
	ToolName string
	ToolArgs string
	Stop     string
	Names    []string
}

func reassemble(t *testing.T, api API, events []sseEvent) streamed {
	t.Helper()
	var s streamed
	for _, e := range events {
		s.Names = append(s.Names, e.Name)
		switch api {
		case APIChatCompletions:
			if e.Data == "[DONE]" {
				s.Names[len(s.Names)-1] = "[DONE]"
				continue
			}
			choices, _ := field(t, e.Data, "choices").([]any)
			if len(choices) == 0 {
				s.Names[len(s.Names)-1] = "usage"
				continue
			}
			c := choices[0].(map[string]any)
			d := c["delta"].(map[string]any)
			if txt, ok := d["content"].(string); ok {
				s.Text += txt
			}
			if calls, ok := d["tool_calls"].([]any); ok {
				fn := calls[0].(map[string]any)["function"].(map[string]any)
				if n, ok := fn["name"].(string); ok {
					s.ToolName = n
				}
				s.ToolArgs += fn["arguments"].(string)
			}
			if f, ok := c["finish_reason"].(string); ok {
				s.Stop = f
			}
		case APIResponses:
			switch e.Name {
			case "response.output_text.delta":
				s.Text += field(t, e.Data, "delta").(string)
			case "response.output_item.added":
				if n, ok := field(t, e.Data, "item", "name").(string); ok {
					s.ToolName = n
				}
			case "response.function_call_arguments.delta":
				s.ToolArgs += field(t, e.Data, "delta").(string)
			case "response.completed":
				s.Stop = field(t, e.Data, "response", "status").(string)
				if field(t, e.Data, "response", "id") == nil {
					t.Error("response.completed without response.id")
				}
			}
		case APIMessages:
			switch e.Name {
			case "content_block_delta":
				switch field(t, e.Data, "delta", "type") {
				case "text_delta":
					s.Text += field(t, e.Data, "delta", "text").(string)
				case "input_json_delta":
					s.ToolArgs += field(t, e.Data, "delta", "partial_json").(string)
				}
			case "content_block_start":
				if n, ok := field(t, e.Data, "content_block", "name").(string); ok {
					s.ToolName = n
				}
			case "message_delta":
				s.Stop = field(t, e.Data, "delta", "stop_reason").(string)
			}
			if got := field(t, e.Data, "type"); got != e.Name {
				t.Errorf("event %q carries type %v", e.Name, got)
			}
		}
	}
	return s
}

func requestBody(api API, prompt string, stream bool) (string, map[string]any) {
	switch api {
	case APIResponses:
		return "/v1/responses", map[string]any{"model": "m1", "stream": stream, "input": []any{
			map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": prompt}}},
		}}
	case APIMessages:
		return "/v1/messages?beta=true", map[string]any{"model": "m1", "stream": stream, "max_tokens": 10, "messages": []any{
			map[string]any{"role": "user", "content": prompt},
		}}
	default:
		return "/v1/chat/completions", map[string]any{"model": "m1", "stream": stream,
			"stream_options": map[string]any{"include_usage": true},
			"messages":       []any{map[string]any{"role": "user", "content": prompt}}}
	}
}

var modelAPIs = []API{APIChatCompletions, APIResponses, APIMessages}

func TestStreamedText(t *testing.T) {
	s := New(t, Options{})
	wantNames := map[API][]string{
		APIChatCompletions: {"", "", "", "", "", "", "usage", "[DONE]"},
		APIResponses: {"response.created", "response.in_progress", "response.output_item.added",
			"response.content_part.added", "response.output_text.delta", "response.output_text.delta",
			"response.output_text.delta", "response.output_text.delta", "response.output_text.done",
			"response.content_part.done", "response.output_item.done", "response.completed"},
		APIMessages: {"message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
			"content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"},
	}
	wantStop := map[API]string{APIChatCompletions: "stop", APIResponses: "completed", APIMessages: "end_turn"}
	for _, api := range modelAPIs {
		t.Run(string(api), func(t *testing.T) {
			path, body := requestBody(api, "please ECHO=final-answer-42 now", true)
			resp := post(t, t.Context(), s.URL()+path, body)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			got := reassemble(t, api, readSSE(t, resp.Body))
			want := streamed{Text: "final-answer-42", Stop: wantStop[api], Names: wantNames[api]}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("stream (-want +got):\n%s", diff)
			}
			r := s.MustWaitRequest(t, 10*time.Second, func(r Request) bool { return r.Done && r.API == api })
			if r.Prompt != "please ECHO=final-answer-42 now" || r.Reply != "final-answer-42" || r.Status != 200 || !r.Stream || r.Model != "m1" {
				t.Errorf("logged request = %+v", r)
			}
		})
	}
}

func TestNonStreaming(t *testing.T) {
	s := New(t, Options{})
	for _, api := range modelAPIs {
		t.Run(string(api), func(t *testing.T) {
			path, body := requestBody(api, "hi", false)
			resp := post(t, t.Context(), s.URL()+path, body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			var text any
			switch api {
			case APIChatCompletions:
				text = field(t, string(b), "choices").([]any)[0].(map[string]any)["message"].(map[string]any)["content"]
			case APIResponses:
				item := field(t, string(b), "output").([]any)[0].(map[string]any)
				text = item["content"].([]any)[0].(map[string]any)["text"]
			case APIMessages:
				text = field(t, string(b), "content").([]any)[0].(map[string]any)["text"]
			}
			if text != "FAKE-REPLY: hi" {
				t.Errorf("text = %v, want FAKE-REPLY: hi", text)
			}
		})
	}
}

func TestToolCall(t *testing.T) {
	s := New(t, Options{})
	tests := []struct {
		api    API
		tools  any
		prompt string // default "TOOLCALL: echo hi"
		want   streamed
	}{
		{APIChatCompletions, []any{map[string]any{"type": "function", "function": map[string]any{
			"name": "exec", "parameters": map[string]any{"properties": map[string]any{"command": map[string]any{}}}}}}, "",
			streamed{ToolName: "exec", ToolArgs: `{"command":"echo hi"}`, Stop: "tool_calls"}},
		{APIResponses, []any{map[string]any{"type": "function", "name": "exec_command",
			"parameters": map[string]any{"properties": map[string]any{"cmd": map[string]any{}}}}}, "",
			streamed{ToolName: "exec_command", ToolArgs: `{"cmd":"echo hi"}`, Stop: "completed"}},
		{APIMessages, []any{map[string]any{"name": "Bash", "input_schema": map[string]any{
			"properties": map[string]any{"command": map[string]any{}, "description": map[string]any{}}}}}, "",
			streamed{Text: toolPreamble, ToolName: "Bash", ToolArgs: `{"command":"echo hi","description":"fake scripted command"}`, Stop: "tool_use"}},
		{APIMessages, nil, "", // no tools declared: the Claude Code default
			streamed{Text: toolPreamble, ToolName: "Bash", ToolArgs: `{"command":"echo hi","description":"fake scripted command"}`, Stop: "tool_use"}},
		{APIResponses, []any{map[string]any{"type": "function", "name": "exec_command",
			"parameters": map[string]any{"properties": map[string]any{"cmd": map[string]any{}, "sandbox_permissions": map[string]any{}}}}},
			"TOOLCALL: ESCALATE touch x",
			streamed{ToolName: "exec_command", ToolArgs: `{"cmd":"touch x","justification":"` + EscalateJustification + `","sandbox_permissions":"require_escalated"}`, Stop: "completed"}},
		{APIMessages, []any{map[string]any{"name": "Bash", "input_schema": map[string]any{
			"properties": map[string]any{"command": map[string]any{}, "dangerouslyDisableSandbox": map[string]any{}}}}},
			"TOOLCALL: ESCALATE touch x",
			streamed{Text: toolPreamble, ToolName: "Bash", ToolArgs: `{"command":"touch x","dangerouslyDisableSandbox":true}`, Stop: "tool_use"}},
		{APIMessages, []any{map[string]any{"name": "AskUserQuestion", "input_schema": map[string]any{}}}, "QUESTION: Which? | Tea | Coffee",
			streamed{Text: toolPreamble, ToolName: "AskUserQuestion", Stop: "tool_use",
				ToolArgs: `{"questions":[{"header":"Choice","multiSelect":false,"options":[{"label":"Tea","description":"Choose Tea"},{"label":"Coffee","description":"Choose Coffee"}],"question":"Which?"}]}`}},
		{APIResponses, []any{map[string]any{"type": "function", "name": "request_user_input"}}, "QUESTION: Which? | Tea | Coffee",
			streamed{ToolName: "request_user_input", Stop: "completed",
				ToolArgs: `{"questions":[{"header":"Choice","id":"choice","options":[{"label":"Tea","description":"Choose Tea"},{"label":"Coffee","description":"Choose Coffee"}],"question":"Which?"}]}`}},
	}
	for _, tt := range tests {
		t.Run(string(tt.api)+" "+tt.prompt, func(t *testing.T) {
			prompt := tt.prompt
			if prompt == "" {
				prompt = "TOOLCALL: echo hi"
			}
			path, body := requestBody(tt.api, prompt, true)
			body["tools"] = tt.tools
			resp := post(t, t.Context(), s.URL()+path, body)
			got := reassemble(t, tt.api, readSSE(t, resp.Body))
			got.Names = nil
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tool call (-want +got):\n%s", diff)
			}
		})
	}
}

func TestToolResultReply(t *testing.T) {
	s := New(t, Options{})
	body := map[string]any{"model": "m", "stream": true, "messages": []any{
		map[string]any{"role": "user", "content": "TOOLCALL: echo hi"},
		map[string]any{"role": "assistant", "content": nil},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "hi\n"},
	}}
	resp := post(t, t.Context(), s.URL()+"/v1/chat/completions", body)
	got := reassemble(t, APIChatCompletions, readSSE(t, resp.Body))
	if want := ToolResultPrefix + "hi"; got.Text != want || got.ToolName != "" {
		t.Errorf("reply = %+v, want text %q and no tool call", got, want)
	}
}

func TestFailures(t *testing.T) {
	s := New(t, Options{})
	tests := []struct {
		api    API
		prompt string
		status int
		errTyp []string
	}{
		{APIChatCompletions, "FAIL400", 400, []string{"error", "type"}},
		{APIResponses, "FAIL=429", 429, []string{"error", "type"}},
		{APIMessages, "FAIL500", 500, []string{"error", "type"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.api), func(t *testing.T) {
			path, body := requestBody(tt.api, tt.prompt, true)
			resp := post(t, t.Context(), s.URL()+path, body)
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if typ, _ := field(t, string(b), tt.errTyp...).(string); typ == "" {
				t.Errorf("error body %s has no error type", b)
			}
			if tt.api == APIMessages && field(t, string(b), "type") != "error" {
				t.Errorf("anthropic error body %s lacks type:error", b)
			}
		})
	}
}

func TestSlowStream(t *testing.T) {
	s := New(t, Options{SlowChunks: 5, SlowChunkDelay: time.Millisecond})
	path, body := requestBody(APIMessages, "SLOW ECHO=abcdefghij", true)
	resp := post(t, t.Context(), s.URL()+path, body)
	events := readSSE(t, resp.Body)
	deltas := 0
	for _, e := range events {
		if e.Name == "content_block_delta" {
			deltas++
		}
	}
	if got := reassemble(t, APIMessages, events); got.Text != "abcdefghij" || deltas != 5 {
		t.Errorf("text %q in %d deltas, want abcdefghij in 5", got.Text, deltas)
	}
}

// started matches the model call whose prompt contains sub once the server
// has read it (before it is answered).
func started(sub string) func(Request) bool {
	return func(r Request) bool { return strings.Contains(r.Prompt, sub) }
}

func TestClientAbortIsLogged(t *testing.T) {
	s := New(t, Options{})
	for _, prompt := range []string{"HANG abort-1", "WAIT=600000 abort-2", "SLOW abort-3"} {
		t.Run(prompt, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			path, body := requestBody(APIChatCompletions, prompt, true)
			errc := make(chan error, 1)
			go func() {
				b, _ := json.Marshal(body)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+path, bytes.NewReader(b))
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				errc <- err
			}()
			s.MustWaitRequest(t, 10*time.Second, started(prompt))
			cancel()
			if err := <-errc; err == nil {
				t.Error("the held request completed; want it cut off")
			}
			r := s.MustWaitRequest(t, 10*time.Second, func(r Request) bool { return r.Done && r.Prompt == prompt })
			if !r.Disconnected {
				t.Errorf("request not marked disconnected: %+v", r)
			}
		})
	}
}

// TestWaitOnceWaitsForTheFirstRequestOnly: WAITONCE holds the first
// request with its prompt (cut off here, as a gateway restart would), and
// answers the same prompt again at once.
func TestWaitOnceWaitsForTheFirstRequestOnly(t *testing.T) {
	s := New(t, Options{})
	const prompt = "WAITONCE=600000 ECHO=once-ok"
	ctx, cancel := context.WithCancel(t.Context())
	path, body := requestBody(APIChatCompletions, prompt, false)
	errc := make(chan error, 1)
	go func() {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+path, bytes.NewReader(b))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	first := s.MustWaitRequest(t, 10*time.Second, started(prompt))
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the first request was answered; want it held")
	}
	if first.Script.Wait != 10*time.Minute || !first.Script.WaitOnce {
		t.Errorf("first request's script = %+v, want a 10 min wait", first.Script)
	}
	// A bound well under the wait: the repeat must not wait at all.
	rctx, rcancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer rcancel()
	resp := post(t, rctx, s.URL()+path, body)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "once-ok") {
		t.Fatalf("repeat: status %d, %v: %s", resp.StatusCode, err, b)
	}
	reqs := s.Requests()
	if last := reqs[len(reqs)-1]; last.Prompt != prompt || last.Script.Wait != 0 {
		t.Errorf("repeat's script = %+v, want no wait", last.Script)
	}
}

func TestCloseEndsHeldStreams(t *testing.T) {
	s, err := Start(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	path, body := requestBody(APIResponses, "HANG", true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b, _ := json.Marshal(body)
		resp, err := http.Post(s.URL()+path, "application/json", bytes.NewReader(b))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	s.MustWaitRequest(t, 10*time.Second, started("HANG"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.WaitRequest(t.Context(), func(Request) bool { return false }); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitRequest after Close = %v, want ErrClosed", err)
	}
}

func TestOtherEndpoints(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "requests.jsonl")
	s := New(t, Options{Model: "my-model", LogPath: logPath})
	get := func(method, path string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), method, s.URL()+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(http.MethodGet, "/v1/models"); code != 200 || !strings.Contains(body, `"id":"my-model"`) {
		t.Errorf("models: %d %s", code, body)
	}
	if code, _ := get(http.MethodHead, "/api/hello"); code != 200 {
		t.Errorf("HEAD probe: %d", code)
	}
	if code, _ := get(http.MethodGet, "/nope"); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
	resp := post(t, t.Context(), s.URL()+"/v1/messages/count_tokens", map[string]any{"messages": []any{}})
	b, _ := io.ReadAll(resp.Body)
	if n, _ := field(t, string(b), "input_tokens").(float64); resp.StatusCode != 200 || n < 1 {
		t.Errorf("count_tokens: %d %s", resp.StatusCode, b)
	}
	resp = post(t, t.Context(), s.URL()+"/v1/responses", map[string]any{"stream": false, "input": "x",
		"text": map[string]any{"format": map[string]any{"type": "json_schema", "schema": map[string]any{
			"properties": map[string]any{"title": map[string]any{"type": "string"}}}}}})
	b, _ = io.ReadAll(resp.Body)
	item := field(t, string(b), "output").([]any)[0].(map[string]any)
	if got := item["content"].([]any)[0].(map[string]any)["text"]; got != `{"title":"Fake title"}` {
		t.Errorf("title reply = %v", got)
	}
	var got []API
	for _, r := range s.Requests() {
		got = append(got, r.API)
	}
	want := []API{APIModels, APIOther, APIOther, APICountTokens, APIResponses}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("logged APIs (-want +got):\n%s", diff)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != len(want) {
		t.Fatalf("log file has %d lines, want %d", len(lines), len(want))
	}
	var last Request
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last.API != APIResponses || last.Reply != `{"title":"Fake title"}` || !last.Done {
		t.Errorf("last log line = %+v", last)
	}
}

func TestMaxRequestsKeepsNewest(t *testing.T) {
	s := New(t, Options{MaxRequests: 2})
	for range 3 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL()+"/v1/models", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var seqs []int
	for _, r := range s.Requests() {
		seqs = append(seqs, r.Seq)
	}
	if diff := cmp.Diff([]int{2, 3}, seqs); diff != "" {
		t.Errorf("kept seqs (-want +got):\n%s", diff)
	}
}

func BenchmarkStreamedReply(b *testing.B) {
	s, err := Start(b.Context(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body, _ := json.Marshal(map[string]any{"model": "m", "stream": true,
		"messages": []any{map[string]any{"role": "user", "content": "ECHO=bench"}}})
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.Post(s.URL()+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// TestRewrite: Options.Rewrite changes the prompt the triggers are read
// from; the logged prompt stays the one the client sent.
func TestRewrite(t *testing.T) {
	t.Parallel()
	s := New(t, Options{Rewrite: func(p string) string { return strings.ReplaceAll(p, "please", "ECHO=rewritten") }})
	path, body := requestBody(APIMessages, "please", false)
	resp := post(t, t.Context(), s.URL()+path, body)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if text := field(t, string(b), "content").([]any)[0].(map[string]any)["text"]; text != "rewritten" {
		t.Errorf("text = %v, want rewritten", text)
	}
	r := s.MustWaitRequest(t, 10*time.Second, func(r Request) bool { return r.Done })
	if r.Prompt != "please" || r.Reply != "rewritten" {
		t.Errorf("logged request = %+v", r)
	}
}
