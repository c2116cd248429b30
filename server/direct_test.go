package server

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/config"
)

// seen is what a client sees of one tools/call.
type seen struct {
	Err        string
	IsError    bool
	ResultType string
	Text       []string
	Structured any
}

// echoPaths serves one tool twice, with a handler that echoes its input:
// through go-sdk's typed wrapper alone, and with the direct calls in front
// of it, to a client of protocol version (empty: go-sdk's latest). direct
// counts the calls the direct path answered.
type echoPaths struct {
	viaSDK, viaDirect *mcp.ClientSession
	direct            atomic.Int64
}

func newEchoPaths[In any](t testing.TB, decl *mcp.Tool, version string) *echoPaths {
	t.Helper()
	echo := typed[In](func(_ context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		return textResult(jsonText(in)), in, nil
	})
	tool := *decl
	// The echo's output is its input, so the tool's output schema would
	// refuse it; any object will do.
	tool.OutputSchema = &jsonschema.Schema{Type: "object"}
	p := &echoPaths{}
	connect := func(ms *mcp.Server) *mcp.ClientSession {
		st, ct := mcp.NewInMemoryTransports()
		ss, err := ms.Connect(t.Context(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close(); _ = ss.Wait() })
		return cs
	}
	sdk := mcp.NewServer(&mcp.Implementation{Name: "sdk"}, nil)
	echo.add(sdk, &tool)
	p.viaSDK = connect(sdk)

	dir := mcp.NewServer(&mcp.Implementation{Name: "direct"}, nil)
	d := &directCalls{}
	declined := func(next mcp.MethodHandler) mcp.MethodHandler { // inside d: sees what d passed on
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				p.direct.Add(-1)
			}
			return next(ctx, method, req)
		}
	}
	counted := func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				p.direct.Add(1)
			}
			return next(ctx, method, req)
		}
	}
	dir.AddReceivingMiddleware(counted, d.middleware, declined)
	echo.add(dir, &tool)
	d.set([]toolDef{{tool: &tool, handler: echo}})
	p.viaDirect = connect(dir)
	return p
}

func see(cs *mcp.ClientSession, name, args string) seen {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		return seen{Err: err.Error()}
	}
	s := seen{IsError: res.IsError}
	var wire struct {
		ResultType string `json:"resultType"`
	}
	data, _ := json.Marshal(res)
	_ = json.Unmarshal(data, &wire)
	s.ResultType = wire.ResultType
	for _, c := range res.Content {
		text := c.(*mcp.TextContent).Text
		var v any
		if json.Unmarshal([]byte(text), &v) == nil {
			// go-sdk re-encodes JSON with sorted keys: compare values.
			data, _ := json.Marshal(v)
			text = string(data)
		}
		s.Text = append(s.Text, text)
	}
	if res.StructuredContent != nil {
		data, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(data, &s.Structured)
	}
	return s
}

// agree calls the tool with args both ways and reports whether the direct
// path answered it. A call it passed on went to go-sdk both ways (whose
// refusals name unexpected properties in map order, so they are not
// compared).
func (p *echoPaths) agree(t *testing.T, name, args string) bool {
	t.Helper()
	before := p.direct.Load()
	want, got := see(p.viaSDK, name, args), see(p.viaDirect, name, args)
	direct := p.direct.Load() > before
	if diff := cmp.Diff(want, got); direct && diff != "" {
		t.Errorf("%s(%s): go-sdk (-) and direct (+) differ:\n%s", name, args, diff)
	}
	return direct
}

// taskTools returns the task tools' declarations of a full-scope
// connection of the test registry.
func taskTools(t testing.TB) map[string]*mcp.Tool {
	t.Helper()
	reg, err := config.ParseRegistry([]byte(`{"default":"alpha","agents":[{"id":"alpha","url":"ws://127.0.0.1:1","password":"p"},{"id":"beta","url":"ws://127.0.0.1:2","password":"p"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{registry: reg}
	out := map[string]*mcp.Tool{}
	for _, d := range (&conn{s: s, scope: reg.FullScope()}).tools() {
		out[d.tool.Name] = d.tool
	}
	return out
}

// TestDirectCallsAgree holds the direct path to go-sdk's: for every case
// both give the handler the same input and the client the same result or
// refusal, and the plain cases (and only they) take the direct path.
func TestDirectCallsAgree(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-11-25", tasksProtocol} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			directCallsAgree(t, version)
		})
	}
}

func directCallsAgree(t *testing.T, version string) {
	tools := taskTools(t)
	paths := map[string]*echoPaths{
		"run_task":    newEchoPaths[RunTaskInput](t, tools["run_task"], version),
		"check_task":  newEchoPaths[CheckTaskInput](t, tools["check_task"], version),
		"get_task":    newEchoPaths[GetTaskInput](t, tools["get_task"], version),
		"get_session": newEchoPaths[GetSessionInput](t, tools["get_session"], version),
		"list_agents": newEchoPaths[EmptyInput](t, tools["list_agents"], version),
	}
	for _, c := range []struct {
		tool, args string
		direct     bool
	}{
		{"run_task", `{"task":"ECHO=ok bench"}`, true},
		{"run_task", `{"task":"x","agent":"beta","context":"c","sessionKey":"k","senderName":"Ann","payload":"p"}`, true},
		{"run_task", `{"task":"é \u00e9 \ud83d\ude00 <b>&"}`, true},
		{"run_task", `{"task":"x","task":"y"}`, true},
		{"run_task", `{"task":null,"task":"y"}`, true},
		{"run_task", `{"task":"x","agent":"gamma"}`, false},
		{"run_task", `{"task":"x","agent":null}`, false},
		{"run_task", `{"Task":"x"}`, false},
		{"run_task", `{"task":"x","extra":1}`, false},
		{"run_task", `{"task":1}`, false},
		{"run_task", `{"task":"\ud800"}`, true},
		{"run_task", "{\"task\":\"\xff\"}", false},
		{"run_task", `{}`, false},
		{"run_task", `[]`, false},
		{"run_task", `"task"`, false},
		{"run_task", `null`, false},
		{"check_task", `{"jobId":"j","waitMs":10000}`, true},
		{"check_task", `{"jobId":"j","waitMs":1.5e3,"knownLogCount":7,"mode":"poll","agent":"alpha"}`, true},
		{"check_task", `{"sessionKey":"k","waitMs":-0.0,"knownLogCount":-3}`, true},
		{"check_task", `{}`, true},
		{"check_task", `{"jobId":"j","mode":"later"}`, false},
		{"check_task", `{"jobId":"j","waitMs":null}`, false},
		{"check_task", `{"jobId":"j","waitMs":"10"}`, false},
		{"check_task", `{"jobId":"j","waitMs":1e400}`, false},
		{"check_task", `{"jobId":"j","knownLogCount":5.0}`, false},
		{"check_task", `{"jobId":"j","knownLogCount":1e2}`, false},
		{"check_task", `{"jobId":"j","knownLogCount":-0}`, false},
		{"check_task", `{"jobId":"j","knownLogCount":123456789012345}`, true},
		{"check_task", `{"jobId":"j","knownLogCount":9007199254740993}`, false},
		{"check_task", `{"jobId":"j","knownLogCount":99999999999999999999999}`, false},
		{"check_task", `{"jobId":"j","knownLogCount":true}`, false},
		{"get_task", `{"taskId":"t","detail":"full","knownLogCount":0}`, true},
		{"get_task", `{"taskId":"t","detail":"everything"}`, false},
		{"get_session", `{"sessionId":"s","mode":"tail","limit":500,"after":0}`, true},
		{"get_session", `{"sessionId":"s","limit":2.5}`, false},
		{"list_agents", `{}`, true},
		{"list_agents", `{"x":1}`, false},
	} {
		if got := paths[c.tool].agree(t, c.tool, c.args); got != c.direct {
			t.Errorf("%s(%s): direct %v, want %v", c.tool, c.args, got, c.direct)
		}
	}
}

// FuzzDirectArgs: whatever the arguments, the direct path and go-sdk's
// typed wrapper agree (see TestDirectCallsAgree).
func FuzzDirectArgs(f *testing.F) {
	for _, s := range []string{
		`{"jobId":"j","waitMs":10000}`, `{"jobId":"j","knownLogCount":12,"mode":"wait"}`,
		`{"task":"x","agent":"alpha"}`, `{"sessionId":"s","limit":3,"after":-1}`, `{"jobId":"\u0000"}`,
	} {
		f.Add(s)
	}
	tools := taskTools(f)
	paths := map[string]*echoPaths{
		"run_task":    newEchoPaths[RunTaskInput](f, tools["run_task"], ""),
		"check_task":  newEchoPaths[CheckTaskInput](f, tools["check_task"], "2025-11-25"),
		"get_session": newEchoPaths[GetSessionInput](f, tools["get_session"], ""),
	}
	f.Fuzz(func(t *testing.T, args string) {
		if !json.Valid([]byte(args)) {
			return // the transports refuse it before any tool sees it
		}
		for name, p := range paths {
			p.agree(t, name, args)
		}
	})
}

// TestAsGoSDKKeepsEveryField: asGoSDK copies every exported field of a
// tool result onto the marked one; a field a later go-sdk adds fails here
// until asGoSDK copies it too.
func TestAsGoSDKKeepsEveryField(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[mcp.CallToolResult]()
	var copied []string
	for f := range typ.Fields() {
		if f.IsExported() {
			copied = append(copied, f.Name)
		}
	}
	want := []string{"Meta", "Content", "StructuredContent", "IsError", "InputRequests", "RequestState"}
	if diff := cmp.Diff(want, copied); diff != "" {
		t.Errorf("exported fields of mcp.CallToolResult (-asGoSDK copies +has):\n%s", diff)
	}
	res := &mcp.CallToolResult{Meta: mcp.Meta{"k": "v"}, Content: []mcp.Content{&mcp.TextContent{Text: "t"}},
		StructuredContent: map[string]any{"a": 1}, RequestState: "s"}
	res.SetError(errors.New("boom"))
	got := asGoSDK(&mcp.CallToolRequest{}, res)
	if got.GetError() == nil || !got.IsError || got.RequestState != "s" || got.Meta["k"] != "v" || len(got.Content) != 1 {
		t.Errorf("asGoSDK = %+v, want res marked complete", got)
	}
	data, _ := json.Marshal(got)
	if !strings.Contains(string(data), `"resultType":"complete"`) {
		t.Errorf("asGoSDK without a session: %s, want resultType complete", data)
	}
}
