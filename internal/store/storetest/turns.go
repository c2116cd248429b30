package storetest

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

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
	turn.Status = termapi.TurnWaitingForAgent
	ev := []store.TurnEvent{{TS: 11, Type: "a", Data: json.RawMessage(`{"x":1}`)}, {TS: 12, Type: "b"}}
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn, Events: ev}); err != nil {
		t.Fatal(err)
	}
	if turn.Version != 2 {
		t.Fatalf("version = %d", turn.Version)
	}
	stale.Status = termapi.TurnFailed
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
	turn.Status = termapi.TurnIdle
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
	if err != nil || len(list) != 1 || list[0].Status != termapi.TurnIdle {
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
	got.Status = termapi.TurnIdle
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
	turn.Status = termapi.TurnRunning
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
		steal.Status = termapi.TurnCancelled
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
	early.Turn.Status = termapi.TurnRunning
	if err := s.CreateTurn(ctx, early); err == nil {
		t.Fatal("CreateTurn took a Turn that starts running")
	}
	tc := NewTurn("turn-1", ss, 10)
	if err := s.CreateTurn(ctx, tc); err != nil {
		t.Fatal(err)
	}
	turn := tc.Turn
	for _, st := range []termapi.TurnStatus{termapi.TurnRunning, termapi.TurnWaitingForOpenClaw, termapi.TurnWaitingForAgent, termapi.TurnIdle} {
		turn.Status = st
		if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn}); err != nil {
			t.Fatalf("write %s: %v", st, err)
		}
	}
	for _, bad := range []termapi.TurnStatus{termapi.TurnRunning, termapi.TurnCreated, termapi.TurnStalled, "done"} {
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
	if err != nil || got.Status != termapi.TurnIdle || got.Version != turn.Version {
		t.Fatalf("after refused steps: %+v, %v", got, err)
	}
	if ev, _ := s.TurnEvents(ctx, "turn-1", 0, 100); len(ev) != 1 {
		t.Fatalf("a refused step appended events: %+v", ev)
	}
	turn.Status = termapi.TurnClosed
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn}); err != nil {
		t.Fatal(err)
	}
	turn.Status = termapi.TurnIdle
	if err := s.WriteTurn(ctx, store.TurnWrite{Turn: turn}); !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), "final") {
		t.Fatalf("closed → idle: %v, want a refusal naming closed final", err)
	}
}
