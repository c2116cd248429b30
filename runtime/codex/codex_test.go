package codex

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/executor/contract"
	"github.com/clawconnect/clawconnect/runtime/internal/fakecli"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	fakecli.MaybeRun()
	goleak.VerifyTestMain(m)
}

const fakeThread = "01a22bcc-b249-7741-b5d9-973657aa33bc"

var prelude = []fakecli.Directive{
	fakecli.Out(`{"type":"thread.started","thread_id":"` + fakeThread + `"}`),
	fakecli.Out(`{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for ` + "`fake-model`" + ` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}}`),
	fakecli.Out(`{"type":"turn.started"}`),
}

func agentMessage(id, text string) string {
	b, _ := json.Marshal(text)
	return `{"type":"item.completed","item":{"id":"` + id + `","type":"agent_message","text":` + string(b) + `}}`
}

const turnCompleted = `{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":4,"cache_write_input_tokens":0,"output_tokens":6,"reasoning_output_tokens":0}}`

func translate(fr contract.Frame, n int) []fakecli.Directive {
	id := fmt.Sprintf("item_%d", n)
	switch fr.Kind {
	case contract.FrameDelta:
		return []fakecli.Directive{fakecli.Out(agentMessage(id, fr.Text))}
	case contract.FrameToolCall:
		cmd, _ := json.Marshal("/bin/bash -lc 'echo " + fr.Text + "'")
		out, _ := json.Marshal(fr.Text + "\n")
		return []fakecli.Directive{
			fakecli.Out(`{"type":"item.started","item":{"id":"` + id + `","type":"command_execution","command":` + string(cmd) + `,"aggregated_output":"","exit_code":null,"status":"in_progress"}}`),
			fakecli.Out(`{"type":"item.completed","item":{"id":"` + id + `","type":"command_execution","command":` + string(cmd) + `,"aggregated_output":` + string(out) + `,"exit_code":0,"status":"completed"}}`),
		}
	case contract.FrameFinal:
		return []fakecli.Directive{fakecli.Out(turnCompleted), fakecli.Exit(0)}
	case contract.FrameError:
		return []fakecli.Directive{fakecli.Out(`{"type":"turn.failed","error":{"message":"` + fr.Text + `"}}`), fakecli.Exit(1)}
	case contract.FrameAborted:
	}
	return nil
}

// fakeAdapter builds adapters over a fake CLI with o as the base options.
func fakeAdapter(o Options) fakecli.NewAdapter[*Adapter] {
	return func(t *testing.T, f *fakecli.Fake) *Adapter {
		c := o
		c.Binary = f.Binary(t)
		c.Environ = f.Environ(o.Environ...)
		c.Logger = f.Logs.Logger()
		if c.KillGrace == 0 {
			c.KillGrace = 5 * time.Second
		}
		return New(c)
	}
}

func TestContractWithFakeCLI(t *testing.T) {
	t.Parallel()
	contract.RunAdapterContract(t, fakecli.Harness(fakecli.HarnessConfig{
		Label:     "codex fake CLI",
		New:       func(t *testing.T, f *fakecli.Fake) executor.RuntimeAdapter { return fakeAdapter(Options{})(t, f) },
		Prelude:   prelude,
		Translate: translate,
	}))
}

func TestArgvHomeAndScrubbedEnv(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	f, _, _, s := fakecli.Start(t, fakeAdapter(Options{
		Environ: []string{"OPENCLAW_PASSWORD=pw", "OPENCLAW_GATEWAY_TOKEN=tok", "MCP_USER_TOKENS=a:b", "PUBLIC_MCP_PASS=p", "CLAWCONNECT_BEARER_TOKEN=t", "OPENAI_API_KEY=sk-x", "FAKE_API_KEY=dummy"},
		Home:    home,
		Bypass:  true,
	}), executor.StartOptions{Message: "-rf /", Model: "fake-model", Resume: fakeThread})
	f.Send(t, prelude[0], fakecli.Out(turnCompleted), fakecli.Exit(0))
	fakecli.Drain(t, s)
	rec := f.Recorded(t)
	want := []string{"exec", "--json", "--skip-git-repo-check", "--model", "fake-model", "--dangerously-bypass-approvals-and-sandbox", "resume", fakeThread, "--", "-rf /"}
	if diff := cmp.Diff(want, rec.Args); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
	if rec.Stdin != "" {
		t.Errorf("stdin = %q, want /dev/null", rec.Stdin)
	}
	env := strings.Join(rec.Env, "\n")
	for _, gone := range []string{"OPENCLAW_PASSWORD=", "OPENCLAW_GATEWAY_TOKEN=", "MCP_USER_TOKENS=", "PUBLIC_MCP_PASS=", "CLAWCONNECT_BEARER_TOKEN="} {
		if strings.Contains(env, gone) {
			t.Errorf("child environment kept %s", gone)
		}
	}
	for _, kept := range []string{"OPENAI_API_KEY=sk-x", "FAKE_API_KEY=dummy", "CODEX_HOME=" + home} {
		if !strings.Contains(env, kept) {
			t.Errorf("child environment lost %s", kept)
		}
	}
	if got := Args(executor.StartOptions{Message: "m"}, "", Options{Sandbox: "workspace-write"}); !cmp.Equal(got, []string{"exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "--", "m"}) {
		t.Errorf("sandbox args = %q", got)
	}
}

func TestFullStreamMapping(t *testing.T) {
	t.Parallel()
	f, _, _, s := fakecli.Start(t, fakeAdapter(Options{}), executor.StartOptions{Model: "fake-model"})
	f.Send(t, prelude...)
	f.Send(t,
		fakecli.Out(`{"type":"item.completed","item":{"id":"item_1","type":"reasoning","text":"**Planning**"}}`),
		fakecli.Out(`{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'echo hi-from-codex-tool'","aggregated_output":"","exit_code":null,"status":"in_progress"}}`),
		fakecli.Out(`{"type":"item.updated","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'echo hi-from-codex-tool'","aggregated_output":"hi","exit_code":null,"status":"in_progress"}}`),
		fakecli.Out(`{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'echo hi-from-codex-tool'","aggregated_output":"hi-from-codex-tool\n","exit_code":0,"status":"completed"}}`),
		fakecli.Out(`{"type":"item.completed","item":{"id":"item_3","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"failed"}}`),
		fakecli.Out(`{"type":"item.started","item":{"id":"item_4","type":"file_change","changes":[{"path":"x.go","kind":"update"}],"status":"in_progress"}}`),
		fakecli.Out(`{"type":"item.completed","item":{"id":"item_4","type":"file_change","changes":[{"path":"x.go","kind":"update"}],"status":"completed"}}`),
		fakecli.Out(`{"type":"item.started","item":{"id":"item_5","type":"mcp_tool_call","server":"clawconnect","tool":"run_task","arguments":{"task":"t"},"status":"in_progress"}}`),
		fakecli.Out(`{"type":"item.completed","item":{"id":"item_5","type":"mcp_tool_call","server":"clawconnect","tool":"run_task","arguments":{"task":"t"},"result":{"content":[]},"error":null,"status":"completed"}}`),
		fakecli.Out(`{"type":"item.completed","item":{"id":"item_6","type":"web_search","query":"go fuzzing"}}`),
		fakecli.Out(`{"type":"item.updated","item":{"id":"item_7","type":"todo_list","items":[]}}`),
		fakecli.Out(`{"type":"error","message":"Reconnecting... 1/5"}`),
		fakecli.Out(agentMessage("item_8", "FAKE-REPLY 4: you said: say hello")),
		fakecli.Out(`{"type":"future.event","x":1}`),
		fakecli.Out(turnCompleted),
		fakecli.Exit(0),
	)
	evs := fakecli.Drain(t, s)
	u := executor.Usage{InputTokens: 10, OutputTokens: 6, CachedInputTokens: 4}
	want := []executor.Payload{
		executor.Status{Phase: executor.PhaseInit, Model: "fake-model"},
		executor.Error{Code: "codex_warning", Message: "Model metadata for `fake-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."},
		executor.Status{Phase: executor.PhaseRunning},
		executor.TextDelta{Text: "**Planning**", Channel: executor.ChannelReasoning},
		executor.ToolCall{ToolCallID: "item_2", Name: "command_execution", Input: json.RawMessage(`{"command":"/bin/bash -lc 'echo hi-from-codex-tool'"}`)},
		executor.ToolResult{ToolCallID: "item_2", Name: "command_execution", Output: "hi-from-codex-tool\n"},
		executor.ToolCall{ToolCallID: "item_3", Name: "command_execution", Input: json.RawMessage(`{"command":"false"}`)},
		executor.ToolResult{ToolCallID: "item_3", Name: "command_execution", IsError: true},
		executor.ToolCall{ToolCallID: "item_4", Name: "file_change", Input: json.RawMessage(`{"changes":[{"path":"x.go","kind":"update"}]}`)},
		executor.ToolResult{ToolCallID: "item_4", Name: "file_change", Output: "update x.go"},
		executor.ToolCall{ToolCallID: "item_5", Name: "clawconnect.run_task", Input: json.RawMessage(`{"task":"t"}`)},
		executor.ToolResult{ToolCallID: "item_5", Name: "clawconnect.run_task", Output: `{"content":[]}`},
		executor.ToolCall{ToolCallID: "item_6", Name: "web_search", Input: json.RawMessage(`{"query":"go fuzzing"}`)},
		executor.ToolResult{ToolCallID: "item_6", Name: "web_search", Output: "go fuzzing"},
		executor.Status{Phase: executor.PhaseThinking, Detail: "todo list updated"},
		executor.Error{Code: "stream_error", Message: "Reconnecting... 1/5"},
		executor.TextDelta{Text: "FAKE-REPLY 4: you said: say hello", Channel: executor.ChannelAssistant},
		executor.Cost{Usage: u, Model: "fake-model", Estimated: true},
		executor.Done{Reason: executor.DoneSuccess, Summary: "FAKE-REPLY 4: you said: say hello", Usage: &u},
	}
	if diff := cmp.Diff(want, fakecli.Payloads(evs)); diff != "" {
		t.Errorf("payloads (-want +got):\n%s", diff)
	}
	for _, ev := range evs {
		if ev.RunID != fakeThread {
			t.Fatalf("runId = %q, want the thread id", ev.RunID)
		}
	}
}

func TestTerminalRules(t *testing.T) {
	t.Parallel()
	fakecli.RunScripts(t, fakeAdapter(Options{}), []fakecli.Script{
		{Name: "turn failed then exit 1 gives one terminal", Lines: []fakecli.Directive{fakecli.Out(`{"type":"turn.failed","error":{"message":"stream closed before response.completed"}}`), {Err: "error\n"}, fakecli.Exit(1)},
			Want: []executor.Payload{executor.Error{Code: "turn_failed", Message: "stream closed before response.completed", Fatal: true}, executor.Done{Reason: executor.DoneError, Summary: "stream closed before response.completed"}}},
		{Name: "exit 0 without turn.completed", Lines: []fakecli.Directive{fakecli.Out(agentMessage("i", "half")), fakecli.Exit(0)},
			Want: []executor.Payload{executor.TextDelta{Text: "half", Channel: executor.ChannelAssistant}, executor.Done{Reason: executor.DoneSuccess, Summary: "half"}}},
		{Name: "crash with stderr", Lines: []fakecli.Directive{{Err: "Error: no provider configured\n"}, fakecli.Exit(1)},
			Want: []executor.Payload{executor.Error{Code: "exit_1", Message: "Error: no provider configured", Fatal: true}, executor.Done{Reason: executor.DoneError, Summary: "Error: no provider configured"}}},
		{Name: "turn completed without usage", Lines: []fakecli.Directive{fakecli.Out(`{"type":"turn.completed"}`), fakecli.Out(`{"type":"turn.completed"}`), fakecli.Exit(0)},
			Want: []executor.Payload{executor.Done{Reason: executor.DoneSuccess}}},
	})
}

func TestBadLines(t *testing.T) {
	t.Parallel()
	f, _, _, s := fakecli.Start(t, fakeAdapter(Options{MaxLineBytes: 512}), executor.StartOptions{})
	f.Send(t,
		fakecli.Out(`{"type":"item.completed","item":{"id":"i","type":"agent_mes`),
		fakecli.Out(`{"type":"turn.teleported"}`),
		fakecli.Out(agentMessage("big", strings.Repeat("y", 100_000))),
		fakecli.Out(`{"type":"item.completed","item":"not an object"}`),
		fakecli.Out(agentMessage("ok", "still alive")),
		fakecli.Directive{Raw: turnCompleted},
		fakecli.Exit(0),
	)
	got := fakecli.Payloads(fakecli.Drain(t, s))
	u := executor.Usage{InputTokens: 10, OutputTokens: 6, CachedInputTokens: 4}
	want := []executor.Payload{
		executor.Error{Code: "bad_line", Message: "codex: unparseable stdout line: " + fmt.Sprintf("%q", `{"type":"item.completed","item":{"id":"i","type":"agent_mes`)},
		executor.Error{Code: "line_too_long", Message: "codex: skipped a stdout line longer than 512 bytes"},
		executor.TextDelta{Text: "still alive", Channel: executor.ChannelAssistant},
		executor.Cost{Usage: u, Estimated: true},
		executor.Done{Reason: executor.DoneSuccess, Summary: "still alive", Usage: &u},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("payloads (-want +got):\n%s", diff)
	}
}

func TestMissingBinary(t *testing.T) {
	t.Parallel()
	fakecli.CheckMissingBinary(t, func(binary string, environ []string) executor.RuntimeAdapter {
		return New(Options{Binary: binary, Environ: environ})
	})
}

func TestAbortEscalatesWhenSIGTERMIgnored(t *testing.T) {
	t.Parallel()
	fakecli.CheckAbortEscalates(t, fakeAdapter(Options{Environ: []string{fakecli.IgnoreTerm}, KillGrace: 200 * time.Millisecond}),
		slices.Concat(prelude, []fakecli.Directive{fakecli.Out(agentMessage("i", "working"))}), "working")
}

func TestLateSubscriberGetsBacklogAndSecondGetsLive(t *testing.T) {
	t.Parallel()
	u := executor.Usage{InputTokens: 10, OutputTokens: 6, CachedInputTokens: 4}
	fakecli.CheckLateSubscriber(t, fakeAdapter(Options{}),
		[]fakecli.Directive{prelude[0], fakecli.Out(agentMessage("i", "early")), fakecli.Out(turnCompleted), fakecli.Exit(0)},
		[]executor.Payload{
			executor.Status{Phase: executor.PhaseInit},
			executor.TextDelta{Text: "early", Channel: executor.ChannelAssistant},
			executor.Cost{Usage: u, Estimated: true},
			executor.Done{Reason: executor.DoneSuccess, Summary: "early", Usage: &u},
		})
}

func TestUnknownSession(t *testing.T) {
	t.Parallel()
	fakecli.CheckUnknownSession(t, New(Options{}))
}

// FuzzDecode feeds arbitrary lines to the exec-json decoder: it must never
// panic, every payload must marshal, and one line gives at most one
// terminal.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		prelude[0].Out, prelude[1].Out, prelude[2].Out, turnCompleted,
		agentMessage("i", "hello"),
		`{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"ls","exit_code":null}}`,
		`{"type":"item.completed","item":{"id":"m","type":"mcp_tool_call","server":"s","tool":"t","arguments":"oops","error":{"message":"x"},"status":"failed"}}`,
		`{"type":"item.completed","item":{"id":"f","type":"file_change","changes":"bad"}}`,
		`{"type":"turn.failed","error":"plain"}`, `{"type":"error"}`, `{"type":`, `null`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d := newDecoder("m")
		terminals := 0
		d.Decode(line, func(p executor.Payload) {
			if p.Kind() == executor.KindDone {
				terminals++
			}
			if _, err := json.Marshal(executor.Event{RunID: "r", Seq: 1, Payload: p}); err != nil {
				t.Fatalf("payload %#v does not marshal: %v", p, err)
			}
		})
		if terminals > 1 {
			t.Fatalf("one line gave %d terminals", terminals)
		}
	})
}

var benchLines = [][]byte{
	[]byte(agentMessage("item_1", "FAKE-REPLY 4: you said: say hello")),
	[]byte(`{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'echo hi-from-codex-tool'","aggregated_output":"","exit_code":null,"status":"in_progress"}}`),
	[]byte(`{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'echo hi-from-codex-tool'","aggregated_output":"hi-from-codex-tool\n","exit_code":0,"status":"completed"}}`),
	[]byte(`{"type":"item.completed","item":{"id":"item_3","type":"reasoning","text":"**Planning the reply**"}}`),
}

// BenchmarkLineToEvent is the native line → normalized event pipeline of
// one run on one goroutine: decode an exec-json line, stamp and queue the
// event, with the consumer popping. Reports events/s.
func BenchmarkLineToEvent(b *testing.B) {
	d := newDecoder("fake-model")
	s := executor.NewStream(executor.StreamOptions{})
	emit := func(p executor.Payload) { s.Emit("run", "session", p) }
	events := 0
	done, cancel := context.WithCancel(context.Background())
	cancel()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		d.Decode(benchLines[i%len(benchLines)], emit)
		for {
			if _, err := s.Next(done); err != nil {
				break
			}
			events++
		}
		if i%len(benchLines) == len(benchLines)-1 {
			clear(d.called) // a fresh item id set per round, as in a real run
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.N)/float64(events), "lines/event")
}

// TestTextArrivesWholeAsDeclared: the adapter says it does not stream, and
// it does not: an agent message in progress emits nothing, its completion
// emits the whole text once.
func TestTextArrivesWholeAsDeclared(t *testing.T) {
	t.Parallel()
	if New(Options{}).Capabilities().Streaming {
		t.Fatal("the Codex adapter declares streaming, but exec-json reports each message whole")
	}
	d := newDecoder("m")
	var texts []string
	emit := func(p executor.Payload) {
		if td, ok := p.(executor.TextDelta); ok {
			texts = append(texts, td.Text)
		}
	}
	d.Decode([]byte(`{"type":"item.started","item":{"id":"a","type":"agent_message","text":""}}`), emit)
	d.Decode([]byte(`{"type":"item.updated","item":{"id":"a","type":"agent_message","text":"hel"}}`), emit)
	d.Decode([]byte(agentMessage("a", "hello")), emit)
	if diff := cmp.Diff([]string{"hello"}, texts); diff != "" {
		t.Errorf("text events (-want +got):\n%s", diff)
	}
}
