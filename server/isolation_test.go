package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/bridge"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
	"github.com/clawconnect/clawconnect/termapi"
)

// isolationBridge is a real Bridge (SQLite store, fake gateway holding
// every run) behind a Server, with one MCP session per identity.
type isolationBridge struct {
	fg  *fakegateway.Server
	srv *server.Server
	b   *bridge.Bridge
}

func openIsolation(t *testing.T, shared bool) *isolationBridge {
	t.Helper()
	fg := fakegateway.New(t, fakegateway.Options{Password: "pw", Script: func(fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: "secret result", Hold: true}
	}})
	home := t.TempDir()
	agents := `{"default":"alpha","agents":[{"id":"alpha","url":"` + fg.URL() + `","password":"pw"}]}`
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CLAWCONNECT_HOME": home}
	b, err := bridge.Open(context.Background(), bridge.Options{Settings: settingsOf(t, env)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	srv, err := server.New(server.Options{Tasks: b, Registry: b.Registry(), SharedTaskView: shared})
	if err != nil {
		t.Fatal(err)
	}
	return &isolationBridge{fg: fg, srv: srv, b: b}
}

func (ib *isolationBridge) as(t *testing.T, id taskapi.Identity) *mcp.ClientSession {
	return connect(t, ib.srv.MCPServer(ib.b.Registry().FullScope(), id), nil)
}

// TestOwnerIsolation is issue 11 item 2: with personal tokens, one user can
// neither see, read, wait on, cancel nor post into another's tasks and
// sessions through any tool; each answer is exactly what a task that does
// not exist gets. The shared password is one identity of its own; a caller
// with no credential, and every caller under the team view, sees all.
func TestOwnerIsolation(t *testing.T) {
	t.Parallel()
	ib := openIsolation(t, false)
	alice := ib.as(t, taskapi.Identity{User: "alice"})
	bob := ib.as(t, taskapi.Identity{User: "bob"})
	legacy := ib.as(t, taskapi.Identity{Legacy: true})
	anon := ib.as(t, taskapi.Identity{})

	run := call(t, alice, "run_task", map[string]any{"task": "alice's private prompt"})
	if run.IsError {
		t.Fatalf("run_task: %s", text(run))
	}
	sc := structured(t, run)
	jobA, keyA := sc["jobId"].(string), sc["sessionKey"].(string)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := ib.fg.AwaitRun(ctx, jobA); err != nil {
		t.Fatal(err)
	}

	// What a task and a session that do not exist answer, per tool.
	const ghostJob, ghostKey = "no-such-job", "agent:main:no-such-session"
	probes := []struct {
		tool       string
		args, miss map[string]any
	}{
		{"get_task", map[string]any{"taskId": jobA}, map[string]any{"taskId": ghostJob}},
		{"get_task", map[string]any{"taskId": jobA, "detail": "prompt"}, map[string]any{"taskId": ghostJob, "detail": "prompt"}},
		{"get_task", map[string]any{"taskId": jobA, "detail": "fullWithDiagnostics"}, map[string]any{"taskId": ghostJob, "detail": "fullWithDiagnostics"}},
		{"check_task", map[string]any{"jobId": jobA, "waitMs": 1000}, map[string]any{"jobId": ghostJob, "waitMs": 1000}},
		{"check_task", map[string]any{"sessionKey": keyA, "waitMs": 1000}, map[string]any{"sessionKey": ghostKey, "waitMs": 1000}},
		{"get_session", map[string]any{"sessionId": keyA, "mode": "tasks"}, map[string]any{"sessionId": ghostKey, "mode": "tasks"}},
		{"get_session", map[string]any{"sessionId": keyA, "mode": "events"}, map[string]any{"sessionId": ghostKey, "mode": "events"}},
		{"cancel_task", map[string]any{"taskId": jobA}, map[string]any{"taskId": ghostJob}},
		{"cancel_task", map[string]any{"sessionKey": keyA}, map[string]any{"sessionKey": ghostKey}},
	}
	for _, intruder := range []struct {
		name string
		cs   *mcp.ClientSession
	}{{"bob", bob}, {"shared password", legacy}} {
		t.Run(intruder.name, func(t *testing.T) {
			for _, p := range probes {
				got := call(t, intruder.cs, p.tool, p.args)
				want := call(t, intruder.cs, p.tool, p.miss)
				if !got.IsError || text(got) != text(want) {
					t.Errorf("%s %v = %v %q, want the not-found answer %q", p.tool, p.args, got.IsError, text(got), text(want))
				}
				if strings.Contains(text(got), "private prompt") {
					t.Errorf("%s leaked alice's task: %s", p.tool, text(got))
				}
			}
			for _, tool := range []string{"list_tasks", "list_sessions"} {
				if r := call(t, intruder.cs, tool, map[string]any{}); strings.Contains(text(r), jobA) || strings.Contains(text(r), keyA) {
					t.Errorf("%s shows alice's task: %s", tool, text(r))
				}
			}
			post := call(t, intruder.cs, "run_task", map[string]any{"task": "hijack", "sessionKey": keyA})
			if !post.IsError || !strings.Contains(text(post), "Session not found") {
				t.Errorf("run_task into alice's session = %v %q", post.IsError, text(post))
			}
		})
	}
	if n := ib.fg.RunCount(); n != 1 {
		t.Errorf("the gateway saw %d runs, want only alice's", n)
	}

	// Alice, and a caller with no credential, still see and control it.
	for _, owner := range []*mcp.ClientSession{alice, anon} {
		if r := call(t, owner, "get_task", map[string]any{"taskId": jobA, "detail": "prompt"}); r.IsError || !strings.Contains(text(r), "private prompt") {
			t.Errorf("owner get_task prompt = %v %q", r.IsError, text(r))
		}
		if r := call(t, owner, "list_tasks", map[string]any{}); !strings.Contains(text(r), jobA) {
			t.Errorf("owner list_tasks lacks the task: %s", text(r))
		}
		if r := call(t, owner, "get_session", map[string]any{"sessionId": keyA}); r.IsError {
			t.Errorf("owner get_session = %q", text(r))
		}
	}
	if r := call(t, alice, "cancel_task", map[string]any{"taskId": jobA}); r.IsError {
		t.Errorf("alice cancel_task = %q", text(r))
	}
	final := call(t, alice, "check_task", map[string]any{"jobId": jobA})
	if got := structured(t, final)["status"]; got != "cancelled" {
		t.Errorf("status after alice's cancel = %v (%s)", got, text(final))
	}
	// Alice may continue her own session.
	if r := call(t, alice, "run_task", map[string]any{"task": "more", "sessionKey": keyA}); r.IsError {
		t.Errorf("alice continuing her session = %q", text(r))
	}
}

// TestOwnerIsolationTeamView: with the shared view on, every credential
// sees and continues every task.
func TestOwnerIsolationTeamView(t *testing.T) {
	t.Parallel()
	ib := openIsolation(t, true)
	alice := ib.as(t, taskapi.Identity{User: "alice"})
	bob := ib.as(t, taskapi.Identity{User: "bob"})
	sc := structured(t, call(t, alice, "run_task", map[string]any{"task": "team work"}))
	jobA := sc["jobId"].(string)
	if r := call(t, bob, "get_task", map[string]any{"taskId": jobA, "detail": "prompt"}); r.IsError || !strings.Contains(text(r), "team work") {
		t.Errorf("team view get_task = %v %q", r.IsError, text(r))
	}
	if r := call(t, bob, "list_tasks", map[string]any{}); !strings.Contains(text(r), jobA) {
		t.Errorf("team view list_tasks lacks alice's task: %s", text(r))
	}
}

// settingsOf is the effective settings of the environment env.
func settingsOf(t testing.TB, env map[string]string) *settings.Values {
	t.Helper()
	v, err := settings.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return &v
}

// TestTerminalOwnerIsolation: with personal tokens a terminal Turn belongs
// to the caller that sent it. Another credential's terminal_status,
// terminal_respond, terminal_approve and terminal_cancel of it answer
// exactly as for a Turn that does not exist and change nothing, and its
// terminal_list shows the pane busy without the turn id. The sender, a
// caller with no credential and (under the team view) everyone reach it.
func TestTerminalOwnerIsolation(t *testing.T) {
	t.Parallel()
	f := newFakeTerminals()
	b := setup(t, func(o *server.Options) { o.Terminals = f })
	as := func(id taskapi.Identity) *mcp.ClientSession {
		return connect(t, b.srv.MCPServer(testRegistry(t).FullScope(), id), nil)
	}
	alice, bob, legacy, anon := as(taskapi.Identity{User: "alice"}), as(taskapi.Identity{User: "bob"}), as(taskapi.Identity{Legacy: true}), as(taskapi.Identity{})

	sent := call(t, alice, "terminal_send", map[string]any{"terminal_id": fakeTerminalID, "request": "alice's private request"})
	if sent.IsError {
		t.Fatalf("alice terminal_send: %s", text(sent))
	}
	turnA := structured(t, sent)["turn_id"].(string)
	f.finish(turnA, termapi.TurnWaitingForOpenClaw, "alice's secret result")
	if got := f.sent[0].Principal; got != "user:alice" {
		t.Fatalf("the service was sent principal %q, want user:alice", got)
	}

	// What a Turn that does not exist answers, per tool.
	const ghost = "turn-20260101T120000-99999999"
	probes := []struct {
		tool string
		args func(id string) map[string]any
	}{
		{"terminal_status", func(id string) map[string]any { return map[string]any{"turn_id": id, "wait_ms": 0} }},
		{"terminal_status", func(id string) map[string]any { return map[string]any{"turn_id": id, "wait_ms": 1000} }},
		{"terminal_respond", func(id string) map[string]any { return map[string]any{"turn_id": id, "request": "hijack"} }},
		{"terminal_approve", func(id string) map[string]any { return map[string]any{"turn_id": id, "fingerprint": "fp-1"} }},
		{"terminal_cancel", func(id string) map[string]any { return map[string]any{"turn_id": id} }},
	}
	for _, intruder := range []struct {
		name string
		cs   *mcp.ClientSession
	}{{"bob", bob}, {"shared password", legacy}} {
		t.Run(intruder.name, func(t *testing.T) {
			for _, p := range probes {
				got := call(t, intruder.cs, p.tool, p.args(turnA))
				want := call(t, intruder.cs, p.tool, p.args(ghost))
				if !got.IsError || strings.ReplaceAll(text(got), turnA, ghost) != text(want) {
					t.Errorf("%s of alice's turn = %v %q, want the unknown-turn answer %q", p.tool, got.IsError, text(got), text(want))
				}
				if strings.Contains(text(got), "secret") || strings.Contains(text(got), "alice") {
					t.Errorf("%s leaked alice's turn: %s", p.tool, text(got))
				}
			}
			list := call(t, intruder.cs, "terminal_list", map[string]any{})
			if strings.Contains(text(list), turnA) {
				t.Errorf("terminal_list shows alice's turn id: %s", text(list))
			}
			row := structured(t, list)["terminals"].([]any)[0].(map[string]any)
			cur, _ := row["current_turn"].(map[string]any)
			if cur == nil || cur["status"] != string(termapi.TurnWaitingForOpenClaw) || cur["turn_id"] != nil || len(row["available_actions"].([]any)) != 0 {
				t.Errorf("terminal_list row = %v, want the pane busy with a turn of no id and no send action", row)
			}
			if reason, _ := row["reason"].(string); !strings.Contains(reason, "another caller's turn is "+string(termapi.TurnWaitingForOpenClaw)) {
				t.Errorf("terminal_list reason %q does not say another caller's turn holds the pane", row["reason"])
			}
			busy := call(t, intruder.cs, "terminal_send", map[string]any{"terminal_id": fakeTerminalID, "request": "me too"})
			if !busy.IsError || strings.Contains(text(busy), turnA) || !strings.Contains(text(busy), "another caller's turn") {
				t.Errorf("terminal_send to the busy pane = %v %q, want a refusal naming no turn id", busy.IsError, text(busy))
			}
		})
	}
	if v, _ := f.Status(t.Context(), turnA); v.Status != termapi.TurnWaitingForOpenClaw || len(f.sent) != 1 {
		t.Fatalf("the intruders changed alice's turn: %+v, %d sends", v, len(f.sent))
	}

	// Alice and a caller with no credential read it whole; alice steers it.
	for name, cs := range map[string]*mcp.ClientSession{"alice": alice, "no credential": anon} {
		st := call(t, cs, "terminal_status", map[string]any{"turn_id": turnA, "wait_ms": 0})
		turn, _ := structured(t, st)["turn"].(map[string]any)
		if st.IsError || turn["principal"] != "user:alice" || !strings.Contains(text(st), "alice's secret result") {
			t.Errorf("%s terminal_status = %v %q", name, st.IsError, text(st))
		}
		if list := call(t, cs, "terminal_list", map[string]any{}); !strings.Contains(text(list), "turn "+turnA) {
			t.Errorf("%s terminal_list lacks the turn id: %s", name, text(list))
		}
	}
	if r := call(t, alice, "terminal_approve", map[string]any{"turn_id": turnA, "fingerprint": "fp-1"}); r.IsError {
		t.Errorf("alice terminal_approve = %q", text(r))
	}
	if r := call(t, alice, "terminal_cancel", map[string]any{"turn_id": turnA}); r.IsError {
		t.Errorf("alice terminal_cancel = %q", text(r))
	}
	// The pane is free again: bob's own Turn is his, and hidden from alice.
	sentB := call(t, bob, "terminal_send", map[string]any{"terminal_id": fakeTerminalID, "request": "bob's request"})
	if sentB.IsError {
		t.Fatalf("bob terminal_send: %s", text(sentB))
	}
	turnB := structured(t, sentB)["turn_id"].(string)
	if r := call(t, bob, "terminal_status", map[string]any{"turn_id": turnB, "wait_ms": 0}); r.IsError {
		t.Errorf("bob's own terminal_status = %q", text(r))
	}
	if r := call(t, alice, "terminal_status", map[string]any{"turn_id": turnB, "wait_ms": 0}); !r.IsError || !strings.Contains(text(r), "no turn "+turnB) {
		t.Errorf("alice terminal_status of bob's turn = %v %q", r.IsError, text(r))
	}
}

// TestTerminalOwnerIsolationTeamView: with the shared view on, every
// credential reads and steers every Turn.
func TestTerminalOwnerIsolationTeamView(t *testing.T) {
	t.Parallel()
	f := newFakeTerminals()
	b := setup(t, func(o *server.Options) { o.Terminals, o.SharedTaskView = f, true })
	alice := connect(t, b.srv.MCPServer(testRegistry(t).FullScope(), taskapi.Identity{User: "alice"}), nil)
	bob := connect(t, b.srv.MCPServer(testRegistry(t).FullScope(), taskapi.Identity{User: "bob"}), nil)
	turnA := structured(t, call(t, alice, "terminal_send", map[string]any{"terminal_id": fakeTerminalID, "request": "team work"}))["turn_id"].(string)
	f.finish(turnA, termapi.TurnIdle, "team result")
	st := call(t, bob, "terminal_status", map[string]any{"turn_id": turnA})
	if st.IsError || !strings.Contains(text(st), "team result") {
		t.Errorf("team view terminal_status = %v %q", st.IsError, text(st))
	}
	if list := call(t, bob, "terminal_list", map[string]any{}); !strings.Contains(text(list), "turn "+turnA) {
		t.Errorf("team view terminal_list lacks alice's turn: %s", text(list))
	}
	if r := call(t, bob, "terminal_cancel", map[string]any{"turn_id": turnA}); r.IsError {
		t.Errorf("team view terminal_cancel = %q", text(r))
	}
	if v, _ := f.Status(t.Context(), turnA); v.Status != termapi.TurnCancelled || v.Principal != "user:alice" {
		t.Errorf("after bob's cancel: %+v", v)
	}
}
