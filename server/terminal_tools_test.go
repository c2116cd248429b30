package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
	"github.com/clawconnect/clawconnect/termapi"
)

// fakeTerminals is an in-memory Turn service: one pane, Turns that run
// until the test ends them; a pane with an open Turn is busy.
type fakeTerminals struct {
	mu      sync.Mutex
	turns   map[string]termapi.TurnView
	current string // the latest Turn's id
	changed chan struct{}
	sent    []termapi.SendRequest
	prompts int64 // approval prompts shown so far: each has its own detected_at
}

func newFakeTerminals() *fakeTerminals {
	return &fakeTerminals{turns: map[string]termapi.TurnView{}, changed: make(chan struct{})}
}

const fakeTerminalID = "terminal:v2:tmux:codex:work:0.0:4242"

func (f *fakeTerminals) List(context.Context) (termapi.ListResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	row := termapi.TerminalRow{
		ID: fakeTerminalID, Agent: "codex", PID: 4242, Cwd: "/src", ActivityState: "idle", ManagementState: "unmanaged",
		AvailableActions: []termapi.Action{{Action: "send", Scope: terminal.ScopeTerminalFollowCurrent,
			Arguments: map[string]string{"terminal_id": fakeTerminalID}, MissingRequired: []string{"request"}}},
	}
	if v, ok := f.turns[f.current]; ok {
		row.ManagementState, row.SessionID = "managed", v.SessionID
		row.CurrentTurn = &termapi.TurnRef{TurnID: v.TurnID, Status: v.Status}
		if v.Status.SendBlocking() {
			row.ActivityState, row.AvailableActions = "working", nil
			row.Reason = "the agent is working; turn " + v.TurnID + " is " + string(v.Status)
		}
	}
	return termapi.ListResult{Terminals: []termapi.TerminalRow{row}}, nil
}

func (f *fakeTerminals) Send(_ context.Context, r termapi.SendRequest) (termapi.SendResult, error) {
	if r.TerminalID != fakeTerminalID {
		return termapi.SendResult{}, fmt.Errorf("send: %w: no terminal %s", termapi.ErrNotFound, r.TerminalID)
	}
	if strings.HasPrefix(r.Request, "/") {
		return termapi.SendResult{}, fmt.Errorf("send: %w: a slash command", termapi.ErrBadInput)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.turns[f.current]; ok && v.Status.SendBlocking() {
		return termapi.SendResult{}, fmt.Errorf("send: %w: session %s has turn %s in status %s: %w; wait for it, or cancel/close it first",
			termapi.ErrRefused, v.SessionID, v.TurnID, v.Status, store.ErrTerminalBusy)
	}
	f.sent = append(f.sent, r)
	id := fmt.Sprintf("turn-20260101T120000-%08d", len(f.sent))
	f.turns[id] = termapi.TurnView{TurnID: id, SessionID: "session-1", Agent: "codex", TerminalID: r.TerminalID, Status: termapi.TurnRunning,
		Principal: r.Principal}
	f.current = id
	return termapi.SendResult{SessionID: "session-1", TurnID: id, SubmissionOutcome: termapi.OutcomeAccepted}, nil
}

// finish ends a Turn with status and reply.
func (f *fakeTerminals) finish(id string, status termapi.TurnStatus, reply string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.turns[id]
	v.Status = status
	if reply != "" {
		v.Result = &termapi.TurnResult{Outcome: "completed", Text: reply}
	}
	if status == termapi.TurnWaitingForOpenClaw {
		f.prompts++
		v.Approval = &termapi.Approval{Fingerprint: "fp-1", Kind: "exec", Command: "rm -rf build", DetectedAt: f.prompts}
		// What the service's table lists for an approvable prompt.
		v.NextSteps = []string{"approve", "cancel", "close", "status"}
	}
	f.turns[id] = v
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeTerminals) Status(_ context.Context, id string) (termapi.TurnView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.turns[id]
	if !ok {
		return v, fmt.Errorf("status: %w: no turn %s", termapi.ErrNotFound, id)
	}
	return v, nil
}

func (f *fakeTerminals) Wait(ctx context.Context, id string) (termapi.TurnView, error) {
	return f.WaitFor(ctx, id, func(v termapi.TurnView) bool { return !terminal.Running(v.Status) })
}

func (f *fakeTerminals) WaitFor(ctx context.Context, id string, done func(termapi.TurnView) bool) (termapi.TurnView, error) {
	for {
		f.mu.Lock()
		v, ok := f.turns[id]
		ch := f.changed
		f.mu.Unlock()
		if !ok {
			return v, fmt.Errorf("wait: %w", termapi.ErrNotFound)
		}
		if done(v) {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-ch:
		}
	}
}

func (f *fakeTerminals) Respond(ctx context.Context, id, text string) (termapi.SendResult, error) {
	v, err := f.Status(ctx, id)
	if err != nil {
		return termapi.SendResult{}, err
	}
	if v.Status == termapi.TurnStalled { // a reply is what a stalled Turn waits for
		f.finish(id, termapi.TurnIdle, "")
	}
	return f.Send(ctx, termapi.SendRequest{TerminalID: v.TerminalID, Request: text, Principal: v.Principal})
}

func (f *fakeTerminals) Approve(ctx context.Context, id, fp string) (termapi.TurnView, error) {
	v, err := f.Status(ctx, id)
	if err != nil {
		return v, err
	}
	if v.Approval == nil || v.Approval.Fingerprint != fp {
		return v, fmt.Errorf("approve: %w: the prompt changed", termapi.ErrRefused)
	}
	f.finish(id, termapi.TurnRunning, "")
	return f.Status(ctx, id)
}

func (f *fakeTerminals) Cancel(ctx context.Context, id string) (termapi.TurnView, error) {
	if _, err := f.Status(ctx, id); err != nil {
		return termapi.TurnView{}, err
	}
	f.finish(id, termapi.TurnCancelled, "")
	return f.Status(ctx, id)
}

func TestTerminalToolsGolden(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *server.Options) { o.Terminals = newFakeTerminals() })
	tools := checkToolsGolden(t, b, "testdata/tools_terminal.golden.json", "TestTerminalToolsGolden")
	// The nine task-bridge tools come first, unchanged.
	base, err := setup(t, nil).fullSession(t).ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(jsonOf(t, base.Tools), jsonOf(t, tools[:len(base.Tools)])); diff != "" {
		t.Errorf("task-bridge tools changed with the terminal tools on (-off +on):\n%s", diff)
	}
	if len(tools) != len(base.Tools)+6 {
		t.Errorf("got %d tools, want %d", len(tools), len(base.Tools)+6)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTerminalStatusWaits: a waiting terminal_status reports progress while
// the Turn runs and returns with the reply as soon as it ends.
func TestTerminalStatusWaits(t *testing.T) {
	t.Parallel()
	f := newFakeTerminals()
	b := setup(t, func(o *server.Options) { o.Terminals = f })
	progressed := make(chan string, 16)
	cs := connect(t, b.srv.MCPServer(testRegistry(t).FullScope(), taskapi.Identity{}), &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progressed <- r.Params.Message
		},
	})
	list := structured(t, call(t, cs, "terminal_list", map[string]any{}))
	rows := list["terminals"].([]any)
	args := rows[0].(map[string]any)["available_actions"].([]any)[0].(map[string]any)["arguments"].(map[string]any)
	sent := call(t, cs, "terminal_send", map[string]any{"terminal_id": args["terminal_id"], "request": "Summarise README.md"})
	if sent.IsError {
		t.Fatalf("send: %s", text(sent))
	}
	turnID := structured(t, sent)["turn_id"].(string)

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "terminal_status", Arguments: map[string]any{"turn_id": turnID, "wait_ms": 120000}}
		params.SetProgressToken("p1")
		res, err := cs.CallTool(context.Background(), params)
		if err != nil {
			t.Errorf("terminal_status: %v", err)
		}
		done <- res
	}()
	if msg := <-progressed; !strings.Contains(msg, "running") {
		t.Errorf("progress %q, want the running status", msg)
	}
	f.finish(turnID, termapi.TurnIdle, "README says hello")
	res := <-done
	if res == nil {
		t.FailNow()
	}
	out := structured(t, res)
	turn := out["turn"].(map[string]any)
	if turn["status"] != string(termapi.TurnIdle) || turn["result"].(map[string]any)["text"] != "README says hello" || out["running"] != false {
		t.Errorf("status result = %v", out)
	}
	if !strings.Contains(text(res), "README says hello") {
		t.Errorf("text %q lacks the reply", text(res))
	}
}

// TestTerminalSendWithoutTargetDelegates: terminal_send with neither
// terminal_id nor session_id goes to the one idle pane and says which;
// while no pane is idle it is refused, nothing is sent, and the refusal
// lists the pane with why it cannot take work.
func TestTerminalSendWithoutTargetDelegates(t *testing.T) {
	t.Parallel()
	f := newFakeTerminals()
	b := setup(t, func(o *server.Options) { o.Terminals = f })
	cs := b.fullSession(t)
	res := call(t, cs, "terminal_send", map[string]any{"request": "run the tests"})
	out := structured(t, res)
	if res.IsError || out["terminal_id"] != fakeTerminalID || out["turn_id"] == "" || len(f.sent) != 1 || f.sent[0].TerminalID != fakeTerminalID {
		t.Fatalf("delegate = %v (isError %v), sent %+v", out, res.IsError, f.sent)
	}
	res = call(t, cs, "terminal_send", map[string]any{"request": "and again"})
	if !res.IsError || !strings.Contains(text(res), "no idle agent pane can take it now") || !strings.Contains(text(res), fakeTerminalID+" (codex, /src): the agent is working") ||
		len(f.sent) != 1 {
		t.Fatalf("delegate while busy: isError=%v %q, %d sends", res.IsError, text(res), len(f.sent))
	}
}

// TestTerminalSendAgentNarrowsTheDelegate: with agent, terminal_send
// without a target counts only that agent's idle panes (the fake's one
// pane is Codex's); agent with a target is refused, and nothing is sent.
func TestTerminalSendAgentNarrowsTheDelegate(t *testing.T) {
	t.Parallel()
	f := newFakeTerminals()
	b := setup(t, func(o *server.Options) { o.Terminals = f })
	cs := b.fullSession(t)
	res := call(t, cs, "terminal_send", map[string]any{"request": "run the tests", "agent": "claude"})
	if !res.IsError || !strings.Contains(text(res), "no claude pane found") || len(f.sent) != 0 {
		t.Fatalf("delegate to claude: isError=%v %q, sent %+v", res.IsError, text(res), f.sent)
	}
	res = call(t, cs, "terminal_send", map[string]any{"request": "run the tests", "agent": "codex", "terminal_id": fakeTerminalID})
	if !res.IsError || !strings.Contains(text(res), "leave it out when you pass terminal_id or session_id") || len(f.sent) != 0 {
		t.Fatalf("agent with a target: isError=%v %q, sent %+v", res.IsError, text(res), f.sent)
	}
	res = call(t, cs, "terminal_send", map[string]any{"request": "run the tests", "agent": "codex"})
	if out := structured(t, res); res.IsError || out["terminal_id"] != fakeTerminalID || len(f.sent) != 1 {
		t.Fatalf("delegate to codex = %v (isError %v), sent %+v", out, res.IsError, f.sent)
	}
}

func TestTerminalToolsActOnResults(t *testing.T) {
	t.Parallel()
	f := newFakeTerminals()
	b := setup(t, func(o *server.Options) { o.Terminals = f })
	cs := b.fullSession(t)
	tests := []struct {
		name, tool string
		args       map[string]any
		wantErr    bool
		wantText   string
	}{
		{"both targets", "terminal_send", map[string]any{"request": "x", "terminal_id": fakeTerminalID, "session_id": "session-1"}, true, "at most one of terminal_id and session_id"},
		{"unknown pane", "terminal_send", map[string]any{"terminal_id": "terminal:v2:tmux:codex:x:0.0:1", "request": "x"}, true, "Call terminal_list"},
		{"slash command", "terminal_send", map[string]any{"terminal_id": fakeTerminalID, "request": "/quit"}, true, "Fix the arguments"},
		{"unknown turn", "terminal_status", map[string]any{"turn_id": "turn-nope", "wait_ms": 0}, true, "Call terminal_list"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, tc.tool, tc.args)
			if res.IsError != tc.wantErr || !strings.Contains(text(res), tc.wantText) {
				t.Errorf("%s: isError=%v text=%q, want isError=%v and %q", tc.tool, res.IsError, text(res), tc.wantErr, tc.wantText)
			}
		})
	}
	if len(f.sent) != 0 {
		t.Errorf("refused sends reached the service: %v", f.sent)
	}

	// An approval: status names the fingerprint, approve with a stale one
	// is refused, with the right one the Turn runs again; cancel ends it.
	sent := structured(t, call(t, cs, "terminal_send", map[string]any{"terminal_id": fakeTerminalID, "request": "clean up"}))
	id := sent["turn_id"].(string)
	f.finish(id, termapi.TurnWaitingForOpenClaw, "")
	st := call(t, cs, "terminal_status", map[string]any{"turn_id": id})
	if !strings.Contains(text(st), "terminal_approve") || !strings.Contains(text(st), "rm -rf build") {
		t.Errorf("status text %q does not say how to approve", text(st))
	}
	if res := call(t, cs, "terminal_approve", map[string]any{"turn_id": id, "fingerprint": "old"}); !res.IsError || !strings.Contains(text(res), "Nothing was typed") {
		t.Errorf("stale approve: isError=%v %q", res.IsError, text(res))
	}
	if res := call(t, cs, "terminal_approve", map[string]any{"turn_id": id, "fingerprint": "fp-1"}); res.IsError || structured(t, res)["running"] != true {
		t.Errorf("approve: isError=%v %q", res.IsError, text(res))
	}
	res := call(t, cs, "terminal_cancel", map[string]any{"turn_id": id})
	if turn := structured(t, res)["turn"].(map[string]any); turn["status"] != string(termapi.TurnCancelled) {
		t.Errorf("cancel: %v", turn)
	}
	resp := call(t, cs, "terminal_respond", map[string]any{"turn_id": id, "request": "try again"})
	if resp.IsError || structured(t, resp)["turn_id"] == id {
		t.Errorf("respond: %q", text(resp))
	}
}
