package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// TermSession returns a valid bound Session for tests.
func TermSession(id, thread, terminalKey string) *store.TermSession {
	return &store.TermSession{
		SessionID: id, Agent: "codex", Workspace: "/w", Status: store.SessionBound,
		Lineage: store.Lineage{CreatedBy: "attach"}, CreatedAt: 1000, UpdatedAt: 1000,
		Binding: &store.Binding{
			BindingID: "binding-" + id, Generation: 1, TerminalID: "terminal:v2:tmux:codex:s:0.0:42",
			TerminalKey: terminalKey, NativeThreadID: thread,
			NativeProcess: store.NativeProcess{PID: 42, ProcessBirth: "b1"}, BoundAt: 1000, LastVerifiedAt: 1000,
		},
	}
}

// NewTurn returns a Turn and its prepared dispatch entry for s.
func NewTurn(id string, s *store.TermSession, at int64) store.TurnCreate {
	t := &store.Turn{
		TurnID: id, SessionID: s.SessionID, Agent: s.Agent, Workspace: s.Workspace,
		TerminalBindingID: s.Binding.BindingID, TerminalBindingGeneration: s.Binding.Generation,
		UserRequest: "hello " + id, Status: store.TurnCreated, CreatedAt: at, UpdatedAt: at,
		Takeover: store.Takeover{
			TerminalID: s.Binding.TerminalID, TerminalKey: s.Binding.TerminalKey, AgentPID: 42,
			RequestText: "hello " + id, StartedAt: at, InactivityTimeoutMinutes: 60, HardTimeoutMinutes: 720,
			Submission: store.Submission{MessageID: "msg-" + id, MessageType: "task", RequestHash: "h", Status: store.DispatchPrepared, PreparedAt: at},
		},
	}
	d := &store.Dispatch{
		TerminalKey: s.Binding.TerminalKey, GenerationID: "gen-" + id, SessionID: s.SessionID, TurnID: id,
		MessageID: "msg-" + id, MessageType: "task", RequestHash: "h", Status: store.DispatchPrepared,
		BindingID: s.Binding.BindingID, BindingGeneration: s.Binding.Generation, PreparedAt: at,
	}
	return store.TurnCreate{Turn: t, Dispatch: d, Events: []store.TurnEvent{{TS: at, Type: "terminal_message_submit_prepared"}}}
}

// RunTerminal runs the terminal-record suite.
func RunTerminal(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"SessionRoundTripAndCAS", testSessionCAS},
		{"SessionBindingRules", testBindingRules},
		{"OneSessionPerThread", testOneSessionPerThread},
		{"TurnCreateBlocksSecondSend", testTurnBlocks},
		{"DispatchLedger", testDispatchLedger},
		{"TurnWriteCASAndEvents", testTurnWrite},
		{"TurnEveryFieldSurvives", testTurnEveryField},
		{"TurnPrincipalIsFixed", testTurnPrincipal},
		{"TurnWriteFollowsTheLifecycle", testTurnLifecycle},
		{"CompletionClaimOnce", testCompletionClaim},
		{"SessionSaveJoinsTheTurnWrite", testSessionSaveInTurnWrite},
		{"ConcurrentClaimsOneWins", testConcurrentClaims},
		{"DeadOwnerFreesCallbackAttempts", testDeadOwnerFreesCallbackAttempts},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func mustCreateSession(t *testing.T, s store.TerminalStore, ss *store.TermSession) {
	t.Helper()
	if err := s.CreateTermSession(t.Context(), ss); err != nil {
		t.Fatal(err)
	}
}

func testSessionCAS(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := TermSession("session-1", "Thread-A", "k1")
	mustCreateSession(t, s, want)
	if want.Revision != 1 {
		t.Fatalf("revision after create = %d, want 1", want.Revision)
	}
	got, err := s.GetTermSession(ctx, "session-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("session (-want +got):\n%s", diff)
	}
	stale := *got
	got.UpdatedAt = 2000
	got.Binding.LastVerifiedAt = 2000
	if err := s.SaveTermSession(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got.Revision != 2 {
		t.Fatalf("revision after save = %d, want 2", got.Revision)
	}
	if err := s.SaveTermSession(ctx, &stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale save: %v, want ErrConflict", err)
	}
	if _, err := s.GetTermSession(ctx, "session-nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown session: %v", err)
	}
	if err := s.CreateTermSession(ctx, TermSession("session-1", "Thread-B", "k1")); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate session: %v, want ErrExists", err)
	}
	byThread, err := s.SessionByThread(ctx, "codex", "thread-a")
	if err != nil || byThread.SessionID != "session-1" {
		t.Fatalf("SessionByThread (case-insensitive) = %v, %v", byThread, err)
	}
	byTerm, err := s.SessionsByTerminal(ctx, "k1")
	if err != nil || len(byTerm) != 1 || byTerm[0].Revision != 2 {
		t.Fatalf("SessionsByTerminal = %v, %v", byTerm, err)
	}
}

func testBindingRules(t *testing.T, s store.Store) {
	ctx := t.Context()
	bad := TermSession("session-g2", "t-g2", "k")
	bad.Binding.Generation = 2
	if err := s.CreateTermSession(ctx, bad); !errors.Is(err, store.ErrBindingRule) {
		t.Fatalf("first binding with generation 2: %v", err)
	}
	base := TermSession("session-r", "", "k")
	mustCreateSession(t, s, base)
	edit := func(name string, f func(x *store.TermSession), want error) {
		t.Helper()
		cur, err := s.GetTermSession(ctx, "session-r")
		if err != nil {
			t.Fatal(err)
		}
		f(cur)
		err = s.SaveTermSession(ctx, cur)
		if !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("%s: %v, want %v", name, err, want)
		}
	}
	edit("refine fills the missing thread", func(x *store.TermSession) { x.Binding.NativeThreadID = "T-R" }, nil)
	edit("same binding may not change the thread", func(x *store.TermSession) { x.Binding.NativeThreadID = "T-X" }, store.ErrBindingRule)
	edit("same binding may not change the pid", func(x *store.TermSession) { x.Binding.NativeProcess.PID = 7 }, store.ErrBindingRule)
	edit("binding may not be removed", func(x *store.TermSession) { x.Binding = nil; x.Status = store.SessionDetached }, store.ErrBindingRule)
	edit("workspace immutable", func(x *store.TermSession) { x.Workspace = "/other" }, store.ErrBindingRule)
	edit("replacement skips a generation", func(x *store.TermSession) {
		x.Binding = &store.Binding{BindingID: "binding-new", Generation: 3, TerminalID: "t", TerminalKey: "k"}
	}, store.ErrBindingRule)
	edit("replacement with same id and next generation", func(x *store.TermSession) { x.Binding.Generation = 2 }, store.ErrBindingRule)
	edit("replacement with new id and generation+1", func(x *store.TermSession) {
		x.Binding = &store.Binding{BindingID: "binding-new", Generation: 2, TerminalID: "t", TerminalKey: "k", NativeThreadID: "T-R2"}
	}, nil)
	got, _ := s.GetTermSession(ctx, "session-r")
	if got.Binding.Generation != 2 || got.Revision != 3 {
		t.Fatalf("after replacement: generation %d revision %d", got.Binding.Generation, got.Revision)
	}
}

func testOneSessionPerThread(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateSession(t, s, TermSession("session-a", "THREAD-1", "k"))
	if err := s.CreateTermSession(ctx, TermSession("session-b", "thread-1", "k")); !errors.Is(err, store.ErrThreadBound) {
		t.Fatalf("second session on the same thread: %v, want ErrThreadBound", err)
	}
	if _, err := s.GetTermSession(ctx, "session-b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused session was stored: %v", err)
	}
	b := TermSession("session-b", "", "k")
	mustCreateSession(t, s, b)
	b.Binding.NativeThreadID = "Thread-1"
	if err := s.SaveTermSession(ctx, b); !errors.Is(err, store.ErrThreadBound) {
		t.Fatalf("refining to a bound thread: %v, want ErrThreadBound", err)
	}
}

func testTurnBlocks(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-1", "t1", "k1")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTurn(ctx, "turn-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tc.Turn, got); diff != "" {
		t.Fatalf("turn (-want +got):\n%s", diff)
	}
	if err := s.CreateTurn(ctx, NewTurn("turn-2", ss, 11)); !errors.Is(err, store.ErrTerminalBusy) {
		t.Fatalf("second send while a turn runs: %v, want ErrTerminalBusy", err)
	}
	if _, err := s.GetTurn(ctx, "turn-2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused turn was stored: %v", err)
	}
	// A turn on a stale binding generation is refused.
	old := NewTurn("turn-3", ss, 12)
	old.Turn.TerminalBindingGeneration = 7
	if err := s.CreateTurn(ctx, old); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("turn on a stale binding: %v, want ErrConflict", err)
	}
	ev, err := s.TurnEvents(ctx, "turn-1", 0, 10)
	if err != nil || len(ev) != 1 || ev[0].Seq != 1 || ev[0].Type != "terminal_message_submit_prepared" {
		t.Fatalf("events = %+v, %v", ev, err)
	}
}

func advance(t *testing.T, s store.TerminalStore, turn *store.Turn, d *store.Dispatch, status store.DispatchStatus) {
	t.Helper()
	nd := *d
	nd.Status = status
	if err := s.WriteTurn(t.Context(), store.TurnWrite{Turn: turn,
		Dispatch: &store.DispatchAdvance{TerminalKey: d.TerminalKey, GenerationID: d.GenerationID, Update: &nd}}); err != nil {
		t.Fatal(err)
	}
	*d = nd
}

func testDispatchLedger(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Two Sessions on one terminal share its ledger.
	a := TermSession("session-a", "ta", "term")
	b := TermSession("session-b", "tb", "term")
	mustCreateSession(t, s, a)
	mustCreateSession(t, s, b)
	tc := NewTurn("turn-a", a, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn, d := tc.Turn, tc.Dispatch
	// Every write of the entry moves its version, as Versions reports it.
	ledgerVersion := func() int64 {
		t.Helper()
		got, err := s.GetDispatch(ctx, "term")
		if err != nil {
			t.Fatal(err)
		}
		vs, err := s.Versions(ctx, store.VersionDispatch, []string{"term", "term-never"})
		if err != nil || !maps.Equal(vs, map[string]int64{"term": got.Version}) {
			t.Fatalf("dispatch Versions = %v, %v; want term at %d", vs, err, got.Version)
		}
		return got.Version
	}
	first := ledgerVersion()
	if first < 1 {
		t.Fatalf("a new ledger entry has version %d, want at least 1", first)
	}
	for _, st := range []store.DispatchStatus{store.DispatchPrepared, store.DispatchTextInjected, store.DispatchUncertain} {
		if st != store.DispatchPrepared {
			advance(t, s, turn, d, st)
		}
		if err := s.CreateTurn(ctx, NewTurn("turn-b", b, 11)); !errors.Is(err, store.ErrTerminalBusy) {
			t.Fatalf("ledger %s: second session's send: %v, want ErrTerminalBusy", st, err)
		}
	}
	// Uncertain blocks even after the owner Turn failed; only an explicit
	// release frees it.
	turn.Status = store.TurnFailed
	advance(t, s, turn, d, store.DispatchUncertain)
	if err := s.CreateTurn(ctx, NewTurn("turn-b", b, 11)); !errors.Is(err, store.ErrTerminalBusy) {
		t.Fatalf("uncertain after failure: %v, want ErrTerminalBusy", err)
	}
	rel := *d
	rel.ReleasedAt = 20
	advance(t, s, turn, &rel, store.DispatchUncertain)
	released := ledgerVersion()
	if released <= first {
		t.Fatalf("ledger version after advances = %d, want above %d", released, first)
	}
	if err := s.CreateTurn(ctx, NewTurn("turn-b", b, 11)); err != nil {
		t.Fatalf("after release: %v", err)
	}
	if v := ledgerVersion(); v != released+1 {
		t.Fatalf("ledger version after a new Turn took it = %d, want %d", v, released+1)
	}
	got, err := s.GetDispatch(ctx, "term")
	if err != nil || got.TurnID != "turn-b" || got.PreviousGenerationID != "gen-turn-a" {
		t.Fatalf("ledger = %+v, %v", got, err)
	}
	// agent_accepted blocks until the owner is released.
	tb, _ := s.GetTurn(ctx, "turn-b")
	db := *got
	tb.Status = store.TurnWaitingForAgent
	advance(t, s, tb, &db, store.DispatchAgentAccepted)
	c := TermSession("session-c", "tc", "term")
	mustCreateSession(t, s, c)
	if err := s.CreateTurn(ctx, NewTurn("turn-c", c, 12)); !errors.Is(err, store.ErrTerminalBusy) {
		t.Fatalf("accepted + running owner: %v", err)
	}
	tb.Status = store.TurnIdle
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: tb}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTurn(ctx, NewTurn("turn-c", c, 12)); err != nil {
		t.Fatalf("accepted + idle owner: %v", err)
	}
	// A stale generation cannot advance the ledger.
	stale := *d
	stale.Status = store.DispatchAgentAccepted
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn,
		Dispatch: &store.DispatchAdvance{TerminalKey: "term", GenerationID: d.GenerationID, Update: &stale}}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale ledger advance: %v, want ErrConflict", err)
	}
}

func testTurnWrite(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-1", "t1", "k1")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn := tc.Turn
	stale := *turn
	turn.Status = store.TurnWaitingForAgent
	ev := []store.TurnEvent{{TS: 11, Type: "a", Data: json.RawMessage(`{"x":1}`)}, {TS: 12, Type: "b"}}
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Events: ev}); err != nil {
		t.Fatal(err)
	}
	if turn.Version != 2 {
		t.Fatalf("version = %d", turn.Version)
	}
	stale.Status = store.TurnFailed
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: &stale, Events: ev}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale write: %v, want ErrConflict", err)
	}
	got, _ := s.TurnEvents(ctx, "turn-1", 0, 100)
	if len(got) != 3 || got[1].Seq != 2 || got[2].Seq != 3 || string(got[1].Data) != `{"x":1}` {
		t.Fatalf("events after a refused write = %+v", got)
	}
	more, _ := s.TurnEvents(ctx, "turn-1", 2, 100)
	if len(more) != 1 || more[0].Type != "b" {
		t.Fatalf("events after 2 = %+v", more)
	}
	open, err := s.OpenTurns(ctx, 10)
	if err != nil || len(open) != 1 || open[0].TurnID != "turn-1" {
		t.Fatalf("OpenTurns = %v, %v", open, err)
	}
	if ids, err := s.OpenTurnIDs(ctx, 10); err != nil || !slices.Equal(ids, []string{"turn-1"}) {
		t.Fatalf("OpenTurnIDs = %v, %v", ids, err)
	}
	before := turn.Version
	if vs, err := s.Versions(ctx, store.VersionTurn, []string{"turn-1", "turn-never"}); err != nil || !maps.Equal(vs, map[string]int64{"turn-1": before}) {
		t.Fatalf("Versions = %v, %v; want turn-1 at %d", vs, err, before)
	}
	turn.Status = store.TurnIdle
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn}); err != nil {
		t.Fatal(err)
	}
	// A write moves the version a follower compares with.
	if vs, err := s.Versions(ctx, store.VersionTurn, []string{"turn-1"}); err != nil || vs["turn-1"] != before+1 {
		t.Fatalf("Versions after a write = %v, %v; want %d", vs, err, before+1)
	}
	if vs, err := s.Versions(ctx, store.VersionSession, []string{"session-1"}); err != nil || len(vs) != 1 {
		t.Fatalf("session Versions = %v, %v", vs, err)
	}
	open, _ = s.OpenTurns(ctx, 10)
	if len(open) != 0 {
		t.Fatalf("idle turn still open: %v", open)
	}
	if ids, err := s.OpenTurnIDs(ctx, 10); err != nil || len(ids) != 0 {
		t.Fatalf("OpenTurnIDs of an idle turn = %v, %v", ids, err)
	}
	list, err := s.SessionTurns(ctx, "session-1", 5)
	if err != nil || len(list) != 1 || list[0].Status != store.TurnIdle {
		t.Fatalf("SessionTurns = %v, %v", list, err)
	}
	if _, err := s.GetTurn(ctx, "turn-nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown turn: %v", err)
	}
}

// turnFixed are the Turn fields a round trip does not fill: the store
// keeps the version, checks the status and the binding against the
// Session, and fixes the principal at creation.
var turnFixed = []string{"TurnID", "SessionID", "Agent", "Workspace", "TerminalBindingID", "TerminalBindingGeneration", "Status", "Version"}

// testTurnEveryField fills every field of a Turn by reflection (so a field
// added later is covered without touching this test), then checks that
// create and write keep each one.
func testTurnEveryField(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-f", "t-f", "k-f")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-f", ss, 10)
	fill(tc.Turn, 1, turnFixed...)
	if tc.Turn.Principal == "" {
		t.Fatal("fill left the principal empty")
	}
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTurn(ctx, "turn-f")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(tc.Turn, got); diff != "" {
		t.Fatalf("a created turn lost fields (-want +got):\n%s", diff)
	}
	fill(got, 2, append(turnFixed, "Principal")...)
	got.Status = store.TurnIdle
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: got}); err != nil {
		t.Fatal(err)
	}
	again, err := s.GetTurn(ctx, "turn-f")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, again); diff != "" {
		t.Fatalf("a written turn lost fields (-want +got):\n%s", diff)
	}
}

// testTurnPrincipal: the principal that sent a Turn is read back by every
// query, survives writes, and no write can change it.
func testTurnPrincipal(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-p", "t-p", "k-p")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-p", ss, 10)
	tc.Turn.Principal = "user:alice"
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn := tc.Turn
	turn.Status = store.TurnRunning
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTurn(ctx, "turn-p")
	if err != nil || got.Principal != "user:alice" {
		t.Fatalf("GetTurn = %+v, %v; want principal user:alice", got, err)
	}
	open, err := s.OpenTurns(ctx, 10)
	if err != nil || len(open) != 1 || open[0].Principal != "user:alice" {
		t.Fatalf("OpenTurns = %v, %v", open, err)
	}
	for _, p := range []string{"user:bob", ""} {
		steal := *got
		steal.Principal = p
		steal.Status = store.TurnCancelled
		err := s.WriteTurn(ctx, store.TurnWrite{Turn: &steal, Events: []store.TurnEvent{{TS: 20, Type: "stolen"}}})
		if err == nil || errors.Is(err, store.ErrConflict) || !strings.Contains(err.Error(), "principal") {
			t.Fatalf("write handing the turn to %q: %v, want a refusal that names the principal (not a retryable conflict)", p, err)
		}
	}
	after, err := s.GetTurn(ctx, "turn-p")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, after); diff != "" {
		t.Fatalf("a refused write changed the turn (-before +after):\n%s", diff)
	}
	if ev, _ := s.TurnEvents(ctx, "turn-p", 0, 100); len(ev) != 1 {
		t.Fatalf("a refused write appended events: %+v", ev)
	}
	list, err := s.SessionTurns(ctx, "session-p", 5)
	if err != nil || len(list) != 1 || list[0].Principal != "user:alice" || list[0].Version != got.Version {
		t.Fatalf("SessionTurns = %v, %v", list, err)
	}
}

// testTurnLifecycle: WriteTurn takes only the steps termapi's Turn
// lifecycle draws; a refused step changes nothing, and CreateTurn starts
// every Turn created.
func testTurnLifecycle(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-1", "t1", "k1")
	mustCreateSession(t, s, ss)
	early := NewTurn("turn-0", ss, 9)
	early.Turn.Status = store.TurnRunning
	if err := s.CreateTurn(ctx, early); err == nil {
		t.Fatal("CreateTurn took a Turn that starts running")
	}
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn := tc.Turn
	for _, st := range []store.TurnStatus{store.TurnRunning, store.TurnWaitingForOpenClaw, store.TurnWaitingForAgent, store.TurnIdle} {
		turn.Status = st
		if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn}); err != nil {
			t.Fatalf("write %s: %v", st, err)
		}
	}
	for _, bad := range []store.TurnStatus{store.TurnRunning, store.TurnCreated, store.TurnStalled, "done"} {
		next := *turn
		next.Status = bad
		err := s.WriteTurn(ctx, store.TurnWrite{Turn: &next, Events: []store.TurnEvent{{TS: 20, Type: "x"}}})
		if !errors.Is(err, termapi.ErrRefused) {
			t.Fatalf("idle → %s: %v, want a refusal", bad, err)
		}
		if next.Version != turn.Version {
			t.Fatalf("idle → %s bumped the version to %d", bad, next.Version)
		}
	}
	got, err := s.GetTurn(ctx, "turn-1")
	if err != nil || got.Status != store.TurnIdle || got.Version != turn.Version {
		t.Fatalf("after refused steps: %+v, %v", got, err)
	}
	if ev, _ := s.TurnEvents(ctx, "turn-1", 0, 100); len(ev) != 1 {
		t.Fatalf("a refused step appended events: %+v", ev)
	}
	turn.Status = store.TurnClosed
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn}); err != nil {
		t.Fatal(err)
	}
	turn.Status = store.TurnIdle
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn}); !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), "final") {
		t.Fatalf("closed → idle: %v, want a refusal naming closed final", err)
	}
}

func claimFor(turn string, fp string) *store.CompletionClaim {
	return &store.CompletionClaim{TurnID: turn, MessageID: "msg-" + turn, CompletionFingerprint: fp,
		CompletionID: "c-" + fp, CallbackMessageID: "msg-cb-" + fp, Outcome: "completed", ClaimedAt: 50}
}

func testCompletionClaim(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-1", "t1", "k1")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn := tc.Turn
	// A failing Also hook rolls back the claim with everything else.
	turn.Status = store.TurnIdle
	boom := errors.New("outbox full")
	err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp1"),
		Also: func(ctx context.Context, tx store.TerminalTx) error {
			if err := tx.AppendTurnEvents(ctx, "turn-1", []store.TurnEvent{{TS: 1, Type: "outbox"}}); err != nil {
				return err
			}
			return boom
		}})
	if !errors.Is(err, boom) {
		t.Fatalf("write with failing hook: %v", err)
	}
	if _, err := s.GetCompletionClaim(ctx, "turn-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim survived a rolled-back write: %v", err)
	}
	if ev, _ := s.TurnEvents(ctx, "turn-1", 0, 10); len(ev) != 1 {
		t.Fatalf("events of the rolled-back write kept: %+v", ev)
	}
	err = s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp1"),
		Also: func(ctx context.Context, tx store.TerminalTx) error {
			return tx.AppendTurnEvents(ctx, "turn-1", []store.TurnEvent{{TS: 1, Type: "outbox"}})
		}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCompletionClaim(ctx, "turn-1")
	if err != nil || got.CompletionFingerprint != "fp1" {
		t.Fatalf("claim = %+v, %v", got, err)
	}
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp2")}); !errors.Is(err, store.ErrClaimed) {
		t.Fatalf("second different claim: %v, want ErrClaimed", err)
	}
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp1")}); err != nil {
		t.Fatalf("same claim again (a resumed monitor): %v", err)
	}
}

// testSessionSaveInTurnWrite pins the Session write inside a Turn write
// (the completion's checkpoint): it commits with the Turn, rolls back with
// it, and keeps the compare-and-set on the Session's revision.
func testSessionSaveInTurnWrite(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-1", "t1", "k1")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn := tc.Turn
	turn.Status = store.TurnIdle
	checkpoint := func(anchor string, fail error) func(context.Context, store.TerminalTx) error {
		return func(ctx context.Context, tx store.TerminalTx) error {
			sess, err := tx.GetTermSession(ctx, "session-1")
			if err != nil {
				return err
			}
			sess.Binding.Checkpoint, sess.UpdatedAt = json.RawMessage(anchor), 2000
			if err := tx.SaveTermSession(ctx, sess); err != nil {
				return err
			}
			return fail
		}
	}

	// A failure after the Session save rolls back the Session, the claim
	// and the Turn together.
	boom := errors.New("host stopped")
	err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp1"), Also: checkpoint(`{"offset":1}`, boom)})
	if !errors.Is(err, boom) {
		t.Fatalf("write with failing hook: %v", err)
	}
	if got, _ := s.GetTermSession(ctx, "session-1"); got.Revision != 1 || len(got.Binding.Checkpoint) != 0 {
		t.Fatalf("session after a rolled-back write: revision %d, checkpoint %s", got.Revision, got.Binding.Checkpoint)
	}
	if got, _ := s.GetTurn(ctx, "turn-1"); got.Status != store.TurnCreated {
		t.Fatalf("turn after a rolled-back write: %s", got.Status)
	}

	// Committed: the Turn, the claim and the Session's checkpoint are in.
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", "fp1"), Also: checkpoint(`{"offset":2}`, nil)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTermSession(ctx, "session-1")
	if err != nil || got.Revision != 2 || string(got.Binding.Checkpoint) != `{"offset":2}` || got.UpdatedAt != 2000 {
		t.Fatalf("session after the write = %+v (revision %d), %v", got.Binding, got.Revision, err)
	}
	if tr, _ := s.GetTurn(ctx, "turn-1"); tr.Status != store.TurnIdle {
		t.Fatalf("turn after the write: %s", tr.Status)
	}

	// A stale revision inside the transaction is a conflict and rolls the
	// Turn write back.
	stale := *got
	stale.Revision = 1
	turn.Status = store.TurnClosed
	err = s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Also: func(ctx context.Context, tx store.TerminalTx) error {
		return tx.SaveTermSession(ctx, &stale)
	}})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale session save in a turn write: %v, want ErrConflict", err)
	}
	if tr, _ := s.GetTurn(ctx, "turn-1"); tr.Status != store.TurnIdle {
		t.Fatalf("turn after a conflicting write: %s", tr.Status)
	}
}

func testConcurrentClaims(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-1", "t1", "k1")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			turn, err := s.GetTurn(ctx, "turn-1")
			if err != nil {
				t.Error(err)
				return
			}
			if turn.Status != store.TurnCreated {
				return
			}
			turn.Status = store.TurnIdle
			err = s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Claim: claimFor("turn-1", fmt.Sprint("fp", i)),
				Events: []store.TurnEvent{{TS: 1, Type: "terminal_bridge_completion_claimed"}}})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrClaimed):
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d completions won, want exactly 1", wins.Load())
	}
	ev, _ := s.TurnEvents(ctx, "turn-1", 0, 100)
	n := 0
	for _, e := range ev {
		if e.Type == "terminal_bridge_completion_claimed" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d completion events, want 1", n)
	}
}

// testDeadOwnerFreesCallbackAttempts: ReleaseLeases(owner, nil), what a
// process that proved owner dead calls, frees owner's callback delivery
// attempts at once; the next claim fences the dead owner out.
func testDeadOwnerFreesCallbackAttempts(t *testing.T, s store.Store) {
	ctx := t.Context()
	ss := TermSession("session-1", "t1", "k1")
	mustCreateSession(t, s, ss)
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn := tc.Turn
	turn.Status = store.TurnIdle
	cb := &store.Callback{MessageID: "msg-cb-1", TurnID: "turn-1", SessionID: "session-1", Kind: "completion",
		SessionKey: "agent:main:s", Message: json.RawMessage(`{"id":"msg-cb-1"}`), Status: store.CallbackPending,
		NextAttemptAt: 10, CreatedAt: 10, UpdatedAt: 10}
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Also: func(ctx context.Context, tx store.TerminalTx) error {
		return tx.PutCallback(ctx, cb)
	}}); err != nil {
		t.Fatal(err)
	}
	held, err := s.ClaimCallback(ctx, "msg-cb-1", "dead", 100, 120_100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimCallback(ctx, "msg-cb-1", "B", 200, 120_200); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("claim of a live attempt lease: %v, want ErrLeaseLost", err)
	}
	if n, err := s.ReleaseLeases(ctx, "someone-else", nil); err != nil || n != 0 {
		t.Fatalf("release of another owner = %d, %v", n, err)
	}
	if n, err := s.ReleaseLeases(ctx, "dead", nil); err != nil || n != 1 {
		t.Fatalf("release of the dead owner = %d, %v, want 1", n, err)
	}
	due, err := s.DueCallbacks(ctx, 200, 10)
	if err != nil || len(due) != 1 || due[0].MessageID != "msg-cb-1" {
		t.Fatalf("due after the release = %+v, %v", due, err)
	}
	b, err := s.ClaimCallback(ctx, "msg-cb-1", "B", 200, 120_200)
	if err != nil || b.LeaseToken <= held.LeaseToken {
		t.Fatalf("claim after the release = %+v, %v", b, err)
	}
	held.Status, held.LastError = store.CallbackFailed, "late"
	if err := s.SaveCallback(ctx, held); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the dead owner settled the callback: %v", err)
	}
	if n, err := s.ReleaseLeases(ctx, "dead", nil); err != nil || n != 0 {
		t.Fatalf("release of the dead owner again = %d, %v (B's lease must stay)", n, err)
	}
	if _, err := s.ClaimCallback(ctx, "msg-cb-1", "C", 300, 120_300); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("claim of B's attempt: %v, want ErrLeaseLost", err)
	}
}
