package terminal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/termapi"
)

// fakeTurns is one pane whose Turn and session file the test drives.
type fakeTurns struct {
	mu        sync.Mutex
	view      termapi.TurnView
	file      string
	sent      []termapi.SendRequest
	cancelled bool
}

func (f *fakeTurns) List(context.Context) (termapi.ListResult, error) {
	return termapi.ListResult{Terminals: []termapi.TerminalRow{{ID: "terminal:x", Agent: "codex", Cwd: filepath.Dir(f.file), ActivityState: "idle"}}}, nil
}

func (f *fakeTurns) Send(_ context.Context, r termapi.SendRequest) (termapi.SendResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.TerminalID == "terminal:busy" {
		return termapi.SendResult{}, errors.New("send: refused: the agent is working")
	}
	f.sent = append(f.sent, r)
	f.view = termapi.TurnView{TurnID: "turn-1", SessionID: "session-1", TerminalID: "terminal:x", Status: termapi.TurnWaitingForAgent}
	return termapi.SendResult{TurnID: "turn-1", SessionID: "session-1", SubmissionOutcome: termapi.OutcomeAccepted}, nil
}

func (f *fakeTurns) Status(context.Context, string) (termapi.TurnView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.view, nil
}

func (f *fakeTurns) set(fn func(v *termapi.TurnView)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.view)
}

func (f *fakeTurns) Cancel(context.Context, string) (termapi.TurnView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = true
	f.view.Status = termapi.TurnCancelled
	return f.view, nil
}

func (f *fakeTurns) SessionFile(context.Context, string) (termapi.SessionFile, error) {
	return termapi.SessionFile{TurnID: "turn-1", Agent: "codex", Path: f.file, Offset: 4}, nil
}

func (f *fakeTurns) appendLine(t *testing.T, line string) {
	t.Helper()
	fh, err := os.OpenFile(f.file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

func newFake(t *testing.T) (*fakeTurns, *Adapter) {
	t.Helper()
	f := &fakeTurns{file: filepath.Join(t.TempDir(), "rollout.jsonl")}
	// Before the anchor: a record of an earlier turn that must not show.
	if err := os.WriteFile(f.file, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := New(Options{ID: IDCodex, Turns: f, TerminalID: "terminal:x", Poll: time.Millisecond})
	t.Cleanup(func() { _ = a.Dispose(context.Background()) })
	return f, a
}

func next(t *testing.T, s *executor.Stream) executor.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ev, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("next event: %v", err)
	}
	return ev
}

// TestStreamFollowsTheTurn: the stream reports the accepted Turn, the
// session file's records after the anchor, an approval prompt once, and
// ends with one done carrying the reply and the usage.
func TestStreamFollowsTheTurn(t *testing.T) {
	t.Parallel()
	f, a := newFake(t)
	run, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "do it", Context: "background"})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.sent) != 1 || f.sent[0].TerminalID != "terminal:x" || f.sent[0].Request != "background\n\ndo it" {
		t.Fatalf("sent %+v", f.sent)
	}
	s, err := a.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ev := next(t, s); ev.Kind() != executor.KindStatus || ev.RunID != "turn-1" {
		t.Fatalf("first event %+v", ev)
	}
	if id, ok := run.RunID(); !ok || id != "turn-1" {
		t.Fatalf("run id %q %v", id, ok)
	}
	f.appendLine(t, `{"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"}}`)
	if c, ok := next(t, s).Payload.(executor.ToolCall); !ok || c.Name != "exec_command" || string(c.Input) != `{"cmd":"ls"}` {
		t.Fatalf("tool call %+v", c)
	}
	f.set(func(v *termapi.TurnView) {
		v.Status = termapi.TurnWaitingForOpenClaw
		v.Approval = &termapi.Approval{Fingerprint: "fp1", Kind: "exec", Command: "ls"}
	})
	if st, ok := next(t, s).Payload.(executor.Status); !ok || !strings.Contains(st.Detail, "approve turn-1 --fingerprint fp1") {
		t.Fatalf("approval status %+v", st)
	}
	f.appendLine(t, `{"type":"response_item","payload":{"type":"function_call_output","call_id":"c1","output":"a.txt"}}`)
	f.appendLine(t, `{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"listed"}]}}`)
	f.appendLine(t, `{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":7,"output_tokens":2}}}}`)
	f.set(func(v *termapi.TurnView) {
		v.Status, v.Approval, v.Result = termapi.TurnIdle, nil, &termapi.TurnResult{Outcome: "completed", Text: "listed"}
	})
	var kinds []string
	var done executor.Done
	for {
		ev := next(t, s)
		kinds = append(kinds, string(ev.Kind()))
		if d, ok := ev.Payload.(executor.Done); ok {
			done = d
			break
		}
	}
	if strings.Join(kinds, " ") != "tool-result text-delta cost done" || done.Reason != executor.DoneSuccess || done.Summary != "listed" ||
		done.Usage == nil || done.Usage.InputTokens != 7 {
		t.Fatalf("events %v, done %+v", kinds, done)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := s.Next(ctx); err == nil {
		t.Fatal("an event after done")
	}
}

func TestAbortEndsAborted(t *testing.T) {
	t.Parallel()
	f, a := newFake(t)
	run, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	next(t, s)
	if err := a.Abort(t.Context(), run); err != nil || !f.cancelled {
		t.Fatalf("abort: %v, cancelled %v", err, f.cancelled)
	}
	for {
		if d, ok := next(t, s).Payload.(executor.Done); ok {
			if d.Reason != executor.DoneAborted {
				t.Fatalf("done %+v", d)
			}
			return
		}
	}
}

func TestStartRefusesWithoutAPaneAndChangesNothing(t *testing.T) {
	t.Parallel()
	f := &fakeTurns{}
	a := New(Options{ID: IDClaudeCode, Turns: f})
	tests := []struct {
		name string
		opts executor.StartOptions
		want string
	}{
		{"no pane", executor.StartOptions{SessionKey: "k", Message: "m"}, "--terminal ID"},
		{"resume not a session", executor.StartOptions{SessionKey: "k", Message: "m", Resume: "thread-1"}, "not a terminal session_id"},
		{"no message", executor.StartOptions{SessionKey: "k", AgentID: "terminal:x"}, "Message are required"},
		{"busy pane", executor.StartOptions{SessionKey: "k", Message: "m", AgentID: "terminal:busy"}, "the agent is working"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := a.Start(t.Context(), executor.Task{}, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("start: %v, want %q", err, tc.want)
			}
		})
	}
	if len(f.sent) != 0 {
		t.Errorf("sent %+v", f.sent)
	}
	if _, err := New(Options{ID: IDCodex}).Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "m"}); err == nil {
		t.Error("an adapter without Turns started a run")
	}
	if _, err := a.Events(t.Context(), executor.NewRunHandle(IDClaudeCode, "k")); !errors.Is(err, executor.ErrNoSession) {
		t.Errorf("events of an unknown run: %v", err)
	}
}
