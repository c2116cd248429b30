package openclaw

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/executor/contract"
	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
	"github.com/google/go-cmp/cmp"
)

// TestMain runs the tests, stops the shared real gateway (started only by
// the end-to-end test, when CLAWCONNECT_E2E=1), then checks for leaks.
func TestMain(m *testing.M) { realgateway.Main(m) }

// fakeEnv is one fake gateway with a connected client.
type fakeEnv struct {
	gw *fakegateway.Server
	c  *gateway.Client
	mu sync.Mutex
	n  int64
}

func ok(context.Context, json.RawMessage) (any, error) { return map[string]any{"ok": true}, nil }

// newFakeEnv starts a fake gateway whose runs stay open (no own text) until
// aborted, so the test's frames are the run's only output.
func newFakeEnv(t *testing.T) *fakeEnv {
	t.Helper()
	gw := fakegateway.New(t, fakegateway.Options{Token: fakegateway.Token, Script: func(fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Hold: true, NoStream: true}
	}})
	gw.Handle("sessions.patch", ok)
	gw.Handle("agents.files.set", ok)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := gateway.Dial(ctx, gateway.Options{URL: gw.URL(), Token: fakegateway.Token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &fakeEnv{gw: gw, c: c}
}

// lastRunID is the idempotency key (= run id) of the latest chat.send.
func (e *fakeEnv) lastRunID(t *testing.T) string {
	t.Helper()
	id := ""
	for _, r := range e.gw.Requests() {
		if r.Method == "chat.send" {
			var p struct {
				IdempotencyKey string `json:"idempotencyKey"`
			}
			_ = json.Unmarshal(r.Params, &p)
			id = p.IdempotencyKey
		}
	}
	if id == "" {
		t.Fatal("no chat.send seen")
	}
	// The fake's own first frames (status, lifecycle start) go out before
	// the run counts as started; wait so test frames come after them.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.gw.AwaitRun(ctx, id); err != nil {
		t.Fatalf("await run %s: %v", id, err)
	}
	return id
}

func (e *fakeEnv) event(t *testing.T, name string, payload map[string]any) {
	t.Helper()
	e.mu.Lock()
	e.n++
	n := e.n
	e.mu.Unlock()
	b, err := json.Marshal(map[string]any{"type": "event", "event": name, "payload": payload, "seq": n + 1000})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.Broadcast(b)
}

func assistantMsg(text string) map[string]any {
	return map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}}
}

func TestContractWithFakeGateway(t *testing.T) {
	t.Parallel()
	var (
		env *fakeEnv
		key = "agent:main:contract"
		cum string
	)
	contract.RunAdapterContract(t, contract.Harness{
		Label: "openclaw fake gateway",
		New: func(t *testing.T) executor.RuntimeAdapter {
			env = newFakeEnv(t)
			return New(env.c, Options{})
		},
		Start: func(t *testing.T, a executor.RuntimeAdapter, _ []contract.Frame) (*executor.RunHandle, error) {
			cum = ""
			return a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: key, Message: "contract prompt"})
		},
		Emit: func(t *testing.T, f contract.Frame) {
			id := env.lastRunID(t)
			base := func(extra map[string]any) map[string]any {
				m := map[string]any{"runId": id, "sessionKey": key}
				for k, v := range extra {
					m[k] = v
				}
				return m
			}
			switch f.Kind {
			case contract.FrameDelta:
				cum += f.Text
				env.event(t, "agent", base(map[string]any{"stream": "assistant", "data": map[string]any{"text": cum, "delta": f.Text}}))
				env.event(t, "chat", base(map[string]any{"state": "delta", "deltaText": f.Text, "message": assistantMsg(cum)}))
			case contract.FrameToolCall:
				env.event(t, "agent", base(map[string]any{"stream": "tool", "data": map[string]any{"phase": "start", "name": f.Tool, "toolCallId": "call-1", "args": f.Input}}))
				env.event(t, "agent", base(map[string]any{"stream": "tool", "data": map[string]any{"phase": "result", "name": f.Tool, "toolCallId": "call-1", "result": f.Text}}))
			case contract.FrameFinal:
				env.event(t, "chat", base(map[string]any{"state": "final", "message": assistantMsg(f.Text)}))
			case contract.FrameError:
				env.event(t, "chat", base(map[string]any{"state": "error", "errorMessage": f.Text}))
			case contract.FrameAborted:
				// The fake gateway answers the abort with its own aborted frames.
			}
		},
		RecordedCalls: func(t *testing.T) []contract.RecordedCall {
			var out []contract.RecordedCall
			for _, r := range env.gw.Requests() {
				var p any
				_ = json.Unmarshal(r.Params, &p)
				out = append(out, contract.RecordedCall{Method: r.Method, Params: p})
			}
			return out
		},
	})
}

func payloads(evs []executor.Event) []executor.Payload {
	out := make([]executor.Payload, len(evs))
	for i, ev := range evs {
		out[i] = ev.Payload
	}
	return out
}

func collect(t *testing.T, s *executor.Stream) []executor.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	evs, err := executor.CollectUntilDone(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestMappingAndBacklog starts a run, lets frames arrive before Events is
// called, and checks the full mapping: cumulative text to true deltas,
// duplicates and other sessions ignored, tools, reasoning, lifecycle.
func TestMappingAndBacklog(t *testing.T) {
	t.Parallel()
	env := newFakeEnv(t)
	a := New(env.c, Options{})
	defer a.Dispose(context.Background())
	run, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "mapping", Message: "hi", Context: "ctx"})
	if err != nil {
		t.Fatal(err)
	}
	if run.SessionKey != "agent:main:mapping" {
		t.Errorf("session key %q, want the canonical key", run.SessionKey)
	}
	id := env.lastRunID(t)
	base := func(extra map[string]any) map[string]any {
		m := map[string]any{"runId": id, "sessionKey": run.SessionKey}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	env.event(t, "chat", map[string]any{"runId": "other", "sessionKey": "agent:main:elsewhere", "state": "delta", "message": assistantMsg("NOT MINE")})
	env.event(t, "agent", base(map[string]any{"stream": "lifecycle", "data": map[string]any{"phase": "model", "model": "fake-model"}}))
	env.event(t, "chat", base(map[string]any{"state": "delta", "message": assistantMsg("Hel")}))
	env.event(t, "agent", base(map[string]any{"stream": "assistant", "data": map[string]any{"text": "Hel", "delta": "Hel"}}))
	env.event(t, "chat", base(map[string]any{"state": "delta", "message": assistantMsg("Hello")}))
	env.event(t, "chat", base(map[string]any{"state": "delta", "message": assistantMsg("Hello")})) // duplicate
	env.event(t, "agent", base(map[string]any{"stream": "thinking", "data": map[string]any{"text": "hmm", "delta": "hmm"}}))
	env.event(t, "agent", base(map[string]any{"stream": "tool", "data": map[string]any{"phase": "start", "name": "exec", "toolCallId": "t1", "args": map[string]any{"command": "ls"}}}))
	env.event(t, "chat", base(map[string]any{"state": "delta", "message": map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "text", "text": "Hello"}, map[string]any{"type": "toolCall", "id": "t1", "name": "exec", "arguments": map[string]any{"command": "ls"}}}}}))
	env.event(t, "agent", base(map[string]any{"stream": "tool", "data": map[string]any{"phase": "result", "name": "exec", "toolCallId": "t1", "result": "a.txt", "isError": false}}))
	env.event(t, "chat", base(map[string]any{"state": "delta", "message": assistantMsg("Hello, world <think>secret</think>")}))
	env.event(t, "agent", base(map[string]any{"stream": "lifecycle", "data": map[string]any{"phase": "end"}}))
	env.event(t, "chat", base(map[string]any{"state": "final", "message": assistantMsg("Hello, world")}))

	// Nothing is lost although Events is called only now.
	s, err := a.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs := collect(t, s)
	// The fake's own run frames (status, lifecycle start) come first.
	got := payloads(evs)
	want := []executor.Payload{
		executor.Status{Phase: executor.PhaseInit, Detail: "preparing_context"},
		executor.Status{Phase: executor.PhaseRunning},
		executor.Status{Phase: executor.PhaseRunning, Model: "fake-model"},
		executor.TextDelta{Text: "Hel", Channel: executor.ChannelAssistant},
		executor.TextDelta{Text: "lo", Channel: executor.ChannelAssistant},
		executor.TextDelta{Text: "hmm", Channel: executor.ChannelReasoning},
		executor.ToolCall{ToolCallID: "t1", Name: "exec", Input: json.RawMessage(`{"command":"ls"}`)},
		executor.ToolResult{ToolCallID: "t1", Name: "exec", Output: "a.txt"},
		executor.TextDelta{Text: ", world ", Channel: executor.ChannelAssistant},
		executor.Status{Phase: executor.PhaseTurnComplete},
		executor.Done{Reason: executor.DoneSuccess, Summary: "Hello, world"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("payloads (-want +got):\n%s", diff)
	}
	if id2, _ := run.RunID(); id2 != id {
		t.Errorf("run id = %q, want %q", id2, id)
	}
	var sent struct {
		Message    string `json:"message"`
		SessionKey string `json:"sessionKey"`
		Deliver    *bool  `json:"deliver"`
	}
	for _, r := range env.gw.Requests() {
		if r.Method == "chat.send" {
			_ = json.Unmarshal(r.Params, &sent)
		}
	}
	if sent.Message != "ctx\n\nhi" || sent.SessionKey != "agent:main:mapping" || sent.Deliver == nil || *sent.Deliver {
		t.Errorf("chat.send params = %+v", sent)
	}
}

func TestErrorAndLifecycleError(t *testing.T) {
	t.Parallel()
	env := newFakeEnv(t)
	a := New(env.c, Options{})
	defer a.Dispose(context.Background())
	run, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "agent:main:err", Message: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	id := env.lastRunID(t)
	env.event(t, "agent", map[string]any{"runId": id, "sessionKey": run.SessionKey, "stream": "lifecycle", "data": map[string]any{"phase": "error", "error": map[string]any{"message": "provider down"}, "code": "E_PROVIDER"}})
	env.event(t, "chat", map[string]any{"runId": id, "sessionKey": run.SessionKey, "state": "error", "errorMessage": "LLM request failed", "errorKind": "unknown"})
	evs := collect(t, s)
	got := payloads(evs)[2:] // after the fake's status and lifecycle start
	want := []executor.Payload{
		executor.Error{Code: "E_PROVIDER", Message: "provider down", Fatal: true},
		executor.Error{Code: "unknown", Message: "LLM request failed", Fatal: true},
		executor.Done{Reason: executor.DoneError, Summary: "LLM request failed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("payloads (-want +got):\n%s", diff)
	}
}

func TestAbortIsTwoTier(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		bound   bool
		methods []string
	}{
		{"run id bound", true, []string{"chat.abort", "sessions.abort"}},
		{"run id not bound yet", false, []string{"sessions.abort"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newFakeEnv(t)
			a := New(env.c, Options{})
			defer a.Dispose(context.Background())
			run, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "agent:main:abort", Message: "hi"})
			if err != nil {
				t.Fatal(err)
			}
			if tt.bound {
				run.BindRunID(env.lastRunID(t))
			}
			if err := a.Abort(t.Context(), run); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range env.gw.Requests() {
				if strings.HasSuffix(r.Method, ".abort") {
					got = append(got, r.Method)
				}
			}
			if diff := cmp.Diff(tt.methods, got); diff != "" {
				t.Errorf("abort calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStartRefusals(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"no-active-run", "rejected", "no_session"} {
		t.Run(status, func(t *testing.T) {
			env := newFakeEnv(t)
			env.gw.Handle("chat.send", func(context.Context, json.RawMessage) (any, error) {
				return map[string]any{"status": status}, nil
			})
			a := New(env.c, Options{})
			_, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "m"})
			if !errorsIs(err, ErrNoRun) || !strings.Contains(err.Error(), status) {
				t.Errorf("Start = %v, want ErrNoRun naming %s", err, status)
			}
		})
	}
	env := newFakeEnv(t)
	env.gw.Handle("chat.send", func(context.Context, json.RawMessage) (any, error) {
		return nil, &fakegateway.Error{Code: "INVALID_REQUEST", Message: "bad"}
	})
	if _, err := New(env.c, Options{}).Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "m"}); err == nil {
		t.Error("Start with a refused chat.send succeeded")
	}
}

func TestSideEffectParams(t *testing.T) {
	t.Parallel()
	env := newFakeEnv(t)
	a := New(env.c, Options{})
	run := executor.NewRunHandle(ID, "agent:ops:team:7")
	if err := a.SetModel(t.Context(), run, "fake/fast"); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteContext(t.Context(), run, "AGENTS.md", "be brief"); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range env.gw.Requests() {
		got[r.Method] = string(r.Params)
	}
	want := map[string]string{
		"sessions.patch":   `{"key":"agent:ops:team:7","model":"fake/fast"}`,
		"agents.files.set": `{"agentId":"ops","content":"be brief","name":"AGENTS.md"}`,
	}
	for m, w := range want {
		if got[m] != w {
			t.Errorf("%s params = %s, want %s", m, got[m], w)
		}
	}
	if h := a.Health(t.Context()); !h.OK {
		t.Errorf("Health = %+v", h)
	}
}

func TestAgentID(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"agent:main:main": "main", "agent:ops:team:1": "ops", "plain": "plain", "agent::x": "agent::x"} {
		if got := AgentID(in); got != want {
			t.Errorf("AgentID(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzMapFrame feeds arbitrary payloads to the frame mapper: no panic, every
// payload marshals, at most one terminal per frame.
func FuzzMapFrame(f *testing.F) {
	for _, s := range []string{
		`{"runId":"r","sessionKey":"k","state":"delta","message":{"role":"assistant","content":[{"type":"text","text":"hi"},{"type":"thinking","thinking":"t"}]}}`,
		`{"runId":"r","sessionKey":"k","state":"final","message":{"role":"assistant","content":"<think>x</think>[[reply_to_current]] ok"}}`,
		`{"runId":"r","sessionKey":"k","state":"error","errorMessage":"e","errorKind":"timeout"}`,
		`{"runId":"r","sessionKey":"k","stream":"tool","data":{"phase":"start","name":"exec","args":"notobj"}}`,
		`{"runId":"r","sessionKey":"k","state":"delta","message":{"role":"toolResult","toolCallId":"c","content":[{"type":"text","text":"o"}]}}`,
		`{"runId":"r","stream":"lifecycle","data":{"phase":"error","code":5}}`,
	} {
		f.Add("chat", []byte(s))
		f.Add("agent", []byte(s))
	}
	f.Fuzz(func(t *testing.T, name string, payload []byte) {
		fr, ok := parseFrame(payload)
		if !ok {
			return
		}
		m := newMapper()
		terminals := 0
		m.mapEvent(name, &fr, func(p executor.Payload) {
			if p.Kind() == executor.KindDone {
				terminals++
			}
			if _, err := json.Marshal(executor.Event{RunID: "r", Seq: 1, Payload: p}); err != nil {
				t.Fatalf("payload %#v does not marshal: %v", p, err)
			}
		})
		if terminals > 1 {
			t.Fatalf("one frame gave %d terminals", terminals)
		}
	})
}

// BenchmarkFrameToEvent is the gateway frame → normalized event pipeline:
// decode the payload, map cumulative text to a delta, stamp and queue.
func BenchmarkFrameToEvent(b *testing.B) {
	frames := make([][]byte, 64)
	cum := ""
	for i := range frames {
		cum += fmt.Sprintf("word%d ", i)
		frames[i], _ = json.Marshal(map[string]any{"runId": "r", "sessionKey": "agent:main:main", "seq": i + 1, "state": "delta",
			"deltaText": fmt.Sprintf("word%d ", i), "message": assistantMsg(cum)})
	}
	m := newMapper()
	s := executor.NewStream(executor.StreamOptions{})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	events := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if i%len(frames) == 0 {
			m.resetRun(fmt.Sprint(i)) // a new run restarts the cumulative text
		}
		f, ok := parseFrame(frames[i%len(frames)])
		if !ok {
			b.Fatal("bad frame")
		}
		m.mapEvent("chat", &f, func(p executor.Payload) { s.Emit(f.RunID, f.SessionKey, p) })
		for {
			if _, err := s.Next(done); err != nil {
				break
			}
			events++
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

func errorsIs(err, target error) bool {
	for err != nil {
		if err == target {
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// TestContinuousObserverAcrossRuns keeps one stream open over two runs of a
// session: the second run's events reach it with the new run id, and the
// second Start buffers nothing on the side (no second subscription).
func TestContinuousObserverAcrossRuns(t *testing.T) {
	t.Parallel()
	env := newFakeEnv(t)
	env.gw.SetScript(nil) // Echo: each run answers at once
	a := New(env.c, Options{})
	defer a.Dispose(context.Background())
	run, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "agent:main:long", Message: "one"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := collect(t, s)
	id1, _ := run.RunID()
	if d := first[len(first)-1].Payload.(executor.Done); d.Summary != "FAKE-REPLY: one" {
		t.Errorf("first run summary %q", d.Summary)
	}
	// The gateway folds a message into a still-running turn (steer); wait
	// until the first run is over on the gateway side.
	if _, err := env.c.WaitRun(t.Context(), id1, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "agent:main:long", Message: "two"}); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	pending := len(a.pending)
	a.mu.Unlock()
	if pending != 0 {
		t.Errorf("second Start buffered on the side although a stream is open")
	}
	second := collect(t, s)
	id2, _ := run.RunID()
	if d := second[len(second)-1].Payload.(executor.Done); d.Summary != "FAKE-REPLY: two" {
		t.Errorf("second run summary %q", d.Summary)
	}
	if id1 == id2 || second[len(second)-1].RunID != id2 {
		t.Errorf("run ids %q then %q; the handle must track the latest run", id1, id2)
	}
	if second[0].Seq != first[len(first)-1].Seq+1 {
		t.Errorf("seq restarted across runs: %d after %d", second[0].Seq, first[len(first)-1].Seq)
	}
}
