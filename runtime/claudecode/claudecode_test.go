package claudecode

import (
	"encoding/json"
	"fmt"
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

const fakeSession = "a3ecc4a9-0000-4000-8000-000000000001"

func initLine() string {
	return `{"type":"system","subtype":"init","cwd":"/w","session_id":"` + fakeSession + `","tools":["Bash"],"model":"claude-opus-5-5","permissionMode":"default","claude_code_version":"2.1.332"}`
}

func assistantText(text string) string {
	b, _ := json.Marshal(text)
	return `{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":` + string(b) + `}],"stop_reason":null},"parent_tool_use_id":null,"session_id":"` + fakeSession + `"}`
}

func resultLine(subtype, result string, isError bool) string {
	b, _ := json.Marshal(result)
	return fmt.Sprintf(`{"type":"result","subtype":%q,"is_error":%v,"num_turns":1,"result":%s,"stop_reason":"end_turn","session_id":%q,"total_cost_usd":0.00016,"usage":{"input_tokens":10,"output_tokens":6,"cache_read_input_tokens":2}}`, subtype, isError, b, fakeSession)
}

// translate renders abstract contract frames as the stream-json lines
// Claude Code prints.
func translate(fr contract.Frame, n int) []fakecli.Directive {
	switch fr.Kind {
	case contract.FrameDelta:
		return []fakecli.Directive{fakecli.Out(assistantText(fr.Text))}
	case contract.FrameToolCall:
		id := fmt.Sprintf("toolu_fake_%d", n)
		input, _ := json.Marshal(fr.Input)
		out, _ := json.Marshal(fr.Text)
		return []fakecli.Directive{
			fakecli.Out(`{"type":"assistant","message":{"id":"msg_t","content":[{"type":"tool_use","id":"` + id + `","name":"` + fr.Tool + `","input":` + string(input) + `}]},"session_id":"` + fakeSession + `"}`),
			fakecli.Out(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"` + id + `","type":"tool_result","content":` + string(out) + `,"is_error":false}]},"session_id":"` + fakeSession + `"}`),
		}
	case contract.FrameFinal:
		return []fakecli.Directive{fakecli.Out(resultLine("success", fr.Text, false)), fakecli.Exit(0)}
	case contract.FrameError:
		return []fakecli.Directive{fakecli.Out(`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["` + fr.Text + `"]}`), fakecli.Exit(1)}
	case contract.FrameAborted:
		// The abort signal already ended the process; Claude prints nothing.
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
		Label:     "claude-code fake CLI",
		New:       func(t *testing.T, f *fakecli.Fake) executor.RuntimeAdapter { return fakeAdapter(Options{})(t, f) },
		Prelude:   []fakecli.Directive{fakecli.Out(initLine())},
		Translate: translate,
	}))
}

func ptr[T any](v T) *T { return &v }

func TestArgvStdinAndScrubbedEnv(t *testing.T) {
	t.Parallel()
	f, _, _, s := fakecli.Start(t, fakeAdapter(Options{
		Environ:        []string{"OPENCLAW_PASSWORD=pw", "OPENCLAW_GATEWAY_TOKEN=tok", "MCP_USER_TOKENS=a:b", "PUBLIC_MCP_PASS=p", "CLAWCONNECT_HTTP_TOKEN=t", "ANTHROPIC_BASE_URL=http://127.0.0.1:1", "ANTHROPIC_API_KEY=dummy", "CLAWCONNECT_TIMEOUT_MS=5"},
		ExtraEnv:       []string{"ANTHROPIC_MODEL=granted"},
		PermissionMode: "bypassPermissions",
		MaxTurns:       3,
	}), executor.StartOptions{Message: "--not-a-flag", Context: "ctx", Model: "fake-model", Resume: "sess-1", ChildToolBlocklist: []string{"Task", "WebFetch"}})
	f.Send(t, fakecli.Out(initLine()), fakecli.Out(resultLine("success", "ok", false)), fakecli.Exit(0))
	fakecli.Drain(t, s)
	rec := f.Recorded(t)
	want := []string{"-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages", "--model", "fake-model", "--resume", "sess-1", "--permission-mode", "bypassPermissions", "--max-turns", "3", "--disallowedTools", "Task,WebFetch"}
	if diff := cmp.Diff(want, rec.Args); diff != "" {
		t.Errorf("argv (-want +got):\n%s", diff)
	}
	if rec.Stdin != "ctx\n\n--not-a-flag" {
		t.Errorf("stdin = %q, want the prompt", rec.Stdin)
	}
	env := strings.Join(rec.Env, "\n")
	for _, gone := range []string{"OPENCLAW_PASSWORD=", "OPENCLAW_GATEWAY_TOKEN=", "MCP_USER_TOKENS=", "PUBLIC_MCP_PASS=", "CLAWCONNECT_HTTP_TOKEN="} {
		if strings.Contains(env, gone) {
			t.Errorf("child environment kept %s", gone)
		}
	}
	for _, kept := range []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:1", "ANTHROPIC_API_KEY=dummy", "ANTHROPIC_MODEL=granted", "CLAWCONNECT_TIMEOUT_MS=5", "PATH="} {
		if !strings.Contains(env, kept) {
			t.Errorf("child environment lost %s", kept)
		}
	}
	if rec.Dir != f.Work {
		t.Errorf("cwd = %q, want %q", rec.Dir, f.Work)
	}
}

func TestFullStreamMapping(t *testing.T) {
	t.Parallel()
	f, a, run, s := fakecli.Start(t, fakeAdapter(Options{}), executor.StartOptions{})
	f.Send(t,
		fakecli.Out(initLine()),
		fakecli.Out(`{"type":"system","subtype":"status","status":"requesting"}`),
		fakecli.Out(`{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_2"}},"session_id":"`+fakeSession+`"}`),
		fakecli.Out(`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}}`),
		fakecli.Out(`{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"FAKE-"}}}`),
		fakecli.Out(`{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"REPLY"}}}`),
		fakecli.Out(`{"type":"assistant","message":{"id":"msg_2","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"FAKE-REPLY"},{"type":"tool_use","id":"toolu_5","name":"Bash","input":{"command":"echo hi"}}]},"session_id":"`+fakeSession+`"}`),
		fakecli.Out(`{"type":"system","subtype":"permission_denied","tool_name":"Write"}`),
		fakecli.Out(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_5","type":"tool_result","content":[{"type":"text","text":"hi"},{"type":"text","text":"!"}],"is_error":false}]},"tool_use_result":{"stdout":"hi"}}`),
		fakecli.Out(`{"type":"assistant","message":{"id":"msg_3","content":[{"type":"text","text":"done"}]}}`),
		fakecli.Out(`{"type":"rate_limit_event","info":{}}`),
		fakecli.Out(resultLine("success", "done", false)),
		fakecli.Exit(0),
	)
	evs := fakecli.Drain(t, s)
	want := []executor.Payload{
		executor.Status{Phase: executor.PhaseInit, Model: "claude-opus-5-5"},
		executor.Status{Phase: executor.PhaseRunning, Detail: "requesting"},
		executor.TextDelta{Text: "hmm", Channel: executor.ChannelReasoning},
		executor.TextDelta{Text: "FAKE-", Channel: executor.ChannelAssistant},
		executor.TextDelta{Text: "REPLY", Channel: executor.ChannelAssistant},
		executor.ToolCall{ToolCallID: "toolu_5", Name: "Bash", Input: json.RawMessage(`{"command":"echo hi"}`)},
		executor.Error{Code: "permission_denied", Message: "claude: permission denied for Write"},
		executor.ToolResult{ToolCallID: "toolu_5", Name: "Bash", Output: "hi!"},
		executor.TextDelta{Text: "done", Channel: executor.ChannelAssistant},
		executor.Cost{CostUSD: ptr(0.00016), Usage: executor.Usage{InputTokens: 10, OutputTokens: 6, CachedInputTokens: 2}},
		executor.Done{Reason: executor.DoneSuccess, Summary: "done", Usage: &executor.Usage{InputTokens: 10, OutputTokens: 6, CachedInputTokens: 2}, CostUSD: ptr(0.00016)},
	}
	if diff := cmp.Diff(want, fakecli.Payloads(evs)); diff != "" {
		t.Errorf("payloads (-want +got):\n%s", diff)
	}
	for _, ev := range evs {
		if ev.RunID != fakeSession || ev.SessionID != "k" {
			t.Fatalf("envelope runId=%q sessionId=%q, want %q and k", ev.RunID, ev.SessionID, fakeSession)
		}
	}
	blob, err := a.SerializeSession(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	back, err := a.RestoreSession(t.Context(), blob)
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := back.RunID(); id != fakeSession || back.SessionKey != "k" {
		t.Errorf("restored handle %q/%q from %s", back.SessionKey, id, blob)
	}
}

func TestTerminalRules(t *testing.T) {
	t.Parallel()
	fakecli.RunScripts(t, fakeAdapter(Options{}), []fakecli.Script{
		{Name: "max turns", Lines: []fakecli.Directive{fakecli.Out(`{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"s"}`), fakecli.Exit(0)},
			Want: []executor.Payload{executor.Done{Reason: executor.DoneMaxTurns}}},
		{Name: "error result then nonzero exit gives one terminal", Lines: []fakecli.Directive{fakecli.Out(`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["overloaded"]}`), {Err: "boom\n"}, fakecli.Exit(1)},
			Want: []executor.Payload{executor.Error{Code: "error_during_execution", Message: "overloaded", Fatal: true}, executor.Done{Reason: executor.DoneError, Summary: "overloaded"}}},
		{Name: "success subtype flagged as error", Lines: []fakecli.Directive{fakecli.Out(`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 500"}`), fakecli.Exit(1)},
			Want: []executor.Payload{executor.Error{Code: "success", Message: "API Error: 500", Fatal: true}, executor.Done{Reason: executor.DoneError, Summary: "API Error: 500"}}},
		{Name: "clean exit without result", Lines: []fakecli.Directive{fakecli.Out(assistantText("partial answer")), fakecli.Exit(0)},
			Want: []executor.Payload{executor.TextDelta{Text: "partial answer", Channel: executor.ChannelAssistant}, executor.Done{Reason: executor.DoneSuccess, Summary: "partial answer"}}},
		{Name: "crash with stderr", Lines: []fakecli.Directive{{Err: "fatal: cannot reach model\n"}, fakecli.Exit(2)},
			Want: []executor.Payload{executor.Error{Code: "exit_2", Message: "fatal: cannot reach model", Fatal: true}, executor.Done{Reason: executor.DoneError, Summary: "fatal: cannot reach model"}}},
		{Name: "second result ignored", Lines: []fakecli.Directive{fakecli.Out(`{"type":"result","subtype":"success","result":"one"}`), fakecli.Out(`{"type":"result","subtype":"success","result":"two"}`), fakecli.Exit(0)},
			Want: []executor.Payload{executor.Done{Reason: executor.DoneSuccess, Summary: "one"}}},
	})
}

func TestBadLines(t *testing.T) {
	t.Parallel()
	f, _, _, s := fakecli.Start(t, fakeAdapter(Options{MaxLineBytes: 1024}), executor.StartOptions{})
	huge := `{"type":"assistant","message":{"content":[{"type":"text","text":"` + strings.Repeat("x", 200_000) + `"}]}}`
	f.Send(t,
		fakecli.Out(`{"type":"assistant","message":{"content":[{"type":"te`), // truncated
		fakecli.Out(`{"type":"hologram","payload":1}`),                       // unknown type
		fakecli.Out(`not json at all`),
		fakecli.Out(huge),
		fakecli.Out(""),
		fakecli.Out(assistantText("still alive")),
		fakecli.Directive{Raw: resultLine("success", "tail without newline", false)},
		fakecli.Exit(0),
	)
	got := fakecli.Payloads(fakecli.Drain(t, s))
	want := []executor.Payload{
		executor.Error{Code: "bad_line", Message: "claude: unparseable stdout line: " + fmt.Sprintf("%q", `{"type":"assistant","message":{"content":[{"type":"te`)},
		executor.Error{Code: "bad_line", Message: `claude: unparseable stdout line: "not json at all"`},
		executor.Error{Code: "line_too_long", Message: "claude: skipped a stdout line longer than 1024 bytes"},
		executor.TextDelta{Text: "still alive", Channel: executor.ChannelAssistant},
		executor.Cost{CostUSD: ptr(0.00016), Usage: executor.Usage{InputTokens: 10, OutputTokens: 6, CachedInputTokens: 2}},
		executor.Done{Reason: executor.DoneSuccess, Summary: "tail without newline", Usage: &executor.Usage{InputTokens: 10, OutputTokens: 6, CachedInputTokens: 2}, CostUSD: ptr(0.00016)},
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
		[]fakecli.Directive{fakecli.Out(initLine()), fakecli.Out(assistantText("working"))}, "working")
}

func TestLateSubscriberGetsBacklogAndSecondGetsLive(t *testing.T) {
	t.Parallel()
	fakecli.CheckLateSubscriber(t, fakeAdapter(Options{}),
		[]fakecli.Directive{fakecli.Out(initLine()), fakecli.Out(resultLine("success", "early", false)), fakecli.Exit(0)},
		[]executor.Payload{
			executor.Status{Phase: executor.PhaseInit, Model: "claude-opus-5-5"},
			executor.Cost{CostUSD: ptr(0.00016), Usage: executor.Usage{InputTokens: 10, OutputTokens: 6, CachedInputTokens: 2}},
			executor.Done{Reason: executor.DoneSuccess, Summary: "early", Usage: &executor.Usage{InputTokens: 10, OutputTokens: 6, CachedInputTokens: 2}, CostUSD: ptr(0.00016)},
		})
}

func TestUnknownSession(t *testing.T) {
	t.Parallel()
	fakecli.CheckUnknownSession(t, New(Options{}))
}

func TestSetModelAppliesToNextRunAndWriteContextStaysLocal(t *testing.T) {
	t.Parallel()
	f, a, run, s := fakecli.Start(t, fakeAdapter(Options{}), executor.StartOptions{})
	if err := a.SetModel(t.Context(), run, "opus"); err != nil {
		t.Fatal(err)
	}
	if err := a.WriteContext(t.Context(), run, "../escape.md", "x"); err == nil {
		t.Error("WriteContext outside the working directory succeeded")
	}
	f.Send(t, fakecli.Out(initLine()), fakecli.Out(resultLine("success", "ok", false)), fakecli.Exit(0))
	fakecli.Drain(t, s)
	got := Args(executor.StartOptions{}, "opus", Options{WholeMessages: true})
	if diff := cmp.Diff([]string{"-p", "--output-format", "stream-json", "--verbose", "--model", "opus"}, got); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	// The next run of the session uses the model set on it.
	run2, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "again", Cwd: f.Work, Resume: fakeSession})
	if err != nil {
		t.Fatal(err)
	}
	s2, err := a.Events(t.Context(), run2)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	f.Send(t, fakecli.Out(resultLine("success", "ok", false)), fakecli.Exit(0))
	fakecli.Drain(t, s2)
	if args := strings.Join(f.Recorded(t).Args, " "); !strings.Contains(args, "--model opus --resume "+fakeSession) {
		t.Errorf("next run args %q lack the set model", args)
	}
}

func TestRunIDRebindsFromFallback(t *testing.T) {
	t.Parallel()
	f, _, run, s := fakecli.Start(t, fakeAdapter(Options{}), executor.StartOptions{SessionKey: "fallback"})
	f.Send(t, fakecli.Out(`garbage before init`), fakecli.Out(initLine()), fakecli.Out(resultLine("success", "ok", false)), fakecli.Exit(0))
	evs := fakecli.Drain(t, s)
	if evs[0].RunID != "fallback" {
		t.Errorf("first event runId = %q, want the session key stand-in", evs[0].RunID)
	}
	if last := evs[len(evs)-1]; last.RunID != fakeSession {
		t.Errorf("last event runId = %q, want the native session id", last.RunID)
	}
	if id, _ := run.RunID(); id != fakeSession {
		t.Errorf("handle run id = %q, want %q", id, fakeSession)
	}
}
