package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/store/sqlstore"
	"github.com/clawconnect/clawconnect/internal/store/storetest"
	turns "github.com/clawconnect/clawconnect/internal/terminal"
	"github.com/clawconnect/clawconnect/internal/testbed/fakehost"
	"github.com/clawconnect/clawconnect/termapi"
)

// hostBPane is a pane of terminal host hostb, another machine on the store.
const hostBPane = "terminal:v3:hostb:tmux:codex:work:0.0:4242"

func openStore(t *testing.T) *sqlstore.DB {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// TestStartOnAnotherHostsPane: a run started on another machine's pane
// (its version 3 terminal id) is queued for that machine's host, which
// types it; the run follows the Turn that host made.
func TestStartOnAnotherHostsPane(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	hostB := fakehost.Start(t, st, "hostb", fakehost.Accept("turn-on-b", "session-on-b"))
	svc := turns.NewService(turns.Options{Store: st, Host: "hosta", HostKey: make([]byte, 32)})
	a := New(Options{ID: IDCodex, Turns: svc})
	t.Cleanup(func() { _ = a.Dispose(ctx) })
	h, err := a.Start(ctx, executor.Task{}, executor.StartOptions{SessionKey: "agent:main:s1", Message: "Run the tests", AgentID: hostBPane})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := a.lookup(h); err != nil || r.turnID != "turn-on-b" {
		t.Fatalf("run = %+v, %v; want host B's turn-on-b", r, err)
	}
	ops := hostB.Ops()
	if len(ops) != 1 || ops[0].Op != "send" || fakehost.Sent(ops[0]).TerminalID != hostBPane {
		t.Fatalf("host B ran %+v", ops)
	}
}

// decoyText is what the decoy session file says; a stream that shows it
// read a local file.
const decoyText = "DECOY: read from this machine's disk"

// putTurn writes the Turn turnID of a Session bound to pane into st, as
// the pane's host records it: waiting for the agent, its anchor at a
// session file path. At that path on this machine lies a decoy whose
// records would show up as events if the adapter read it.
func putTurn(t *testing.T, st store.Store, pane, turnID string) (decoy string) {
	t.Helper()
	decoy = filepath.Join(t.TempDir(), "rollout.jsonl")
	lines := []string{
		`{"type":"response_item","payload":{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"cat /etc/decoy\"}","call_id":"d1"}}`,
		`{"type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + decoyText + `"}]}}`,
	}
	if err := os.WriteFile(decoy, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sess := storetest.TermSession("session-on-b", "", "key-b")
	sess.Binding.TerminalID = pane
	if err := st.CreateTermSession(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	tc := storetest.NewTurn(turnID, sess, time.Now().UnixMilli())
	anchor, _ := json.Marshal(map[string]any{"path": decoy, "offset_bytes": 0})
	tc.Turn.Takeover.Submission.Anchor = anchor
	if err := st.CreateTurn(t.Context(), tc); err != nil {
		t.Fatal(err)
	}
	advance(t, st, turnID, func(turn *store.Turn) { turn.Status = termapi.TurnWaitingForAgent })
	return decoy
}

// advance rewrites the stored Turn as its host would.
func advance(t *testing.T, st store.Store, turnID string, f func(*store.Turn)) {
	t.Helper()
	turn, err := st.GetTurn(t.Context(), turnID)
	if err != nil {
		t.Fatal(err)
	}
	f(turn)
	if err := st.WriteTurn(t.Context(), store.TurnWrite{Turn: turn}); err != nil {
		t.Fatal(err)
	}
}

// until returns the stream's events up to and including the first one
// ok accepts; with noDecoy, an event carrying the decoy file's records
// fails the test at once.
func until(t *testing.T, s *executor.Stream, noDecoy bool, ok func(executor.Event) bool) []executor.Event {
	t.Helper()
	var got []executor.Event
	for {
		ev := next(t, s)
		got = append(got, ev)
		if b, _ := json.Marshal(ev.Payload); noDecoy && (strings.Contains(string(b), "DECOY") || strings.Contains(string(b), "/etc/decoy")) {
			t.Fatalf("event %s came from the local decoy file: %s", ev.Kind(), b)
		}
		if ok(ev) {
			return got
		}
	}
}

func statusSays(text string) func(executor.Event) bool {
	return func(ev executor.Event) bool {
		st, ok := ev.Payload.(executor.Status)
		return ok && strings.Contains(st.Detail, text)
	}
}

func isDone(ev executor.Event) bool { return ev.Kind() == executor.KindDone }

// TestRunOnAnotherHostsPaneStreamsItsRecord: a run on another machine's
// pane never opens the session file path its Turn names (that path is
// the other machine's; here a decoy lies at it), and still streams the
// Turn's progress from its record: running, the approval prompt, the
// reply and one done carrying it.
func TestRunOnAnotherHostsPaneStreamsItsRecord(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	putTurn(t, st, hostBPane, "turn-on-b")
	fakehost.Start(t, st, "hostb", fakehost.Accept("turn-on-b", "session-on-b"))
	svc := turns.NewService(turns.Options{Store: st, Host: "hosta", HostKey: make([]byte, 32)})
	a := New(Options{ID: IDCodex, Turns: svc, Poll: time.Millisecond})
	t.Cleanup(func() { _ = a.Dispose(ctx) })
	h, err := a.Start(ctx, executor.Task{}, executor.StartOptions{SessionKey: "agent:main:s1", Message: "Run the tests", AgentID: hostBPane})
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Events(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := until(t, s, true, statusSays("runs on another terminal host"))
	advance(t, st, "turn-on-b", func(turn *store.Turn) {
		turn.Status = termapi.TurnWaitingForOpenClaw
		turn.Approval = &termapi.Approval{Fingerprint: "fp1", Kind: "exec", Command: "go test ./..."}
	})
	got = append(got, until(t, s, true, statusSays("approve turn-on-b --fingerprint fp1"))...)
	advance(t, st, "turn-on-b", func(turn *store.Turn) {
		turn.Status, turn.Approval = termapi.TurnIdle, nil
		turn.Result = &termapi.TurnResult{Outcome: "completed", Text: "all tests pass on b", Match: "codex_task_complete"}
	})
	got = append(got, until(t, s, true, isDone)...)

	var kinds []string
	for _, ev := range got {
		kinds = append(kinds, string(ev.Kind()))
	}
	if want := "status status status text-delta done"; strings.Join(kinds, " ") != want {
		t.Errorf("events %v, want %s", kinds, want)
	}
	if td, ok := got[len(got)-2].Payload.(executor.TextDelta); !ok || td.Text != "all tests pass on b" {
		t.Errorf("text %+v, want the Turn's reply", got[len(got)-2].Payload)
	}
	if d := got[len(got)-1].Payload.(executor.Done); d.Reason != executor.DoneSuccess || d.Summary != "all tests pass on b" || d.Usage != nil {
		t.Errorf("done %+v", d)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if ev, err := s.Next(wctx); !errors.Is(err, io.EOF) {
		t.Errorf("after done: %+v, %v; want the end of the stream", ev, err)
	}
}

// TestDecoyShowsForALocalTurn proves the decoy above would be seen: the
// same Turn on this machine's own pane streams the file's records.
func TestDecoyShowsForALocalTurn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	putTurn(t, st, "terminal:v2:tmux:codex:work:0.0:4242", "turn-here")
	svc := turns.NewService(turns.Options{Store: st})
	a := New(Options{ID: IDCodex, Turns: svc, Poll: time.Millisecond})
	t.Cleanup(func() { _ = a.Dispose(ctx) })
	h := executor.NewRunHandle(IDCodex, "k")
	a.runs[h] = &run{turnID: "turn-here", sessionID: "session-on-b"}
	s, err := a.Events(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	until(t, s, false, func(ev executor.Event) bool {
		td, ok := ev.Payload.(executor.TextDelta)
		return ok && td.Text == decoyText
	})
}

// listing is a Turn service whose pane list also carries rows of other
// hosts' panes, as the multi-host listing shows them: their Cwd is the
// other machine's.
type listing struct {
	*turns.Service
	rows []termapi.TerminalRow
}

func (l listing) List(context.Context) (termapi.ListResult, error) {
	return termapi.ListResult{Terminals: l.rows}, nil
}

// TestWriteContextOnAnotherHostsPaneIsRefused: context for a run on
// another machine's pane is refused with the host named, and nothing is
// written here, even where a listed row's Cwd exists on this machine.
func TestWriteContextOnAnotherHostsPaneIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	putTurn(t, st, hostBPane, "turn-on-b")
	dir := t.TempDir()
	svc := turns.NewService(turns.Options{Store: st, Host: "hosta", HostKey: make([]byte, 32)})
	a := New(Options{ID: IDCodex, Turns: listing{svc, []termapi.TerminalRow{{ID: hostBPane, Agent: "codex", Cwd: dir}}}})
	t.Cleanup(func() { _ = a.Dispose(ctx) })
	h := executor.NewRunHandle(IDCodex, "k")
	a.runs[h] = &run{turnID: "turn-on-b", sessionID: "session-on-b"}

	err := a.WriteContext(ctx, h, "AGENTS.md", "be brief")
	if !errors.Is(err, termapi.ErrRefused) || !errors.Is(err, termapi.ErrOtherHost) {
		t.Fatalf("write context: %v; want refused, on another host", err)
	}
	for _, want := range []string{"terminal host hostb", "nothing was written on this machine", "write AGENTS.md there"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "AGENTS.md")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("AGENTS.md in the local directory: %v", err)
	}
	if err := a.WriteContext(ctx, h, "../AGENTS.md", "x"); err == nil || !strings.Contains(err.Error(), "plain file name") {
		t.Errorf("a path as key: %v", err)
	}
}

// TestHealthOfAnotherHostsPane: exec's health check passes for a pane of
// another machine, which this machine's pane list never shows, and says
// which host runs it.
func TestHealthOfAnotherHostsPane(t *testing.T) {
	t.Parallel()
	svc := turns.NewService(turns.Options{Store: openStore(t), Host: "hosta", HostKey: make([]byte, 32)})
	a := New(Options{ID: IDCodex, Turns: svc, TerminalID: hostBPane})
	if h := a.Health(t.Context()); !h.OK || !strings.Contains(h.Message, "runs on terminal host hostb") {
		t.Errorf("health %+v", h)
	}
}
