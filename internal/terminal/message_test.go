package terminal

import (
	"fmt"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/ids"
	"github.com/clawconnect/clawconnect/termapi"
)

func TestApplyMessageRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		from, to   string
		typ        string
		start      termapi.TurnStatus
		want       termapi.TurnStatus
		wantRounds int
	}{
		{"task from openclaw waits for the agent", ActorOpenClaw, "codex", MsgTask, termapi.TurnCreated, termapi.TurnWaitingForAgent, 1},
		{"answer from openclaw waits for the agent", ActorOpenClaw, "codex", MsgAnswer, termapi.TurnWaitingForOpenClaw, termapi.TurnWaitingForAgent, 1},
		{"question to openclaw waits for openclaw", "codex", ActorOpenClaw, MsgQuestion, termapi.TurnWaitingForAgent, termapi.TurnWaitingForOpenClaw, 1},
		{"blocked waits for openclaw", "claude-code", ActorOpenClaw, MsgBlocked, termapi.TurnWaitingForAgent, termapi.TurnWaitingForOpenClaw, 1},
		{"done is idle", "codex", ActorOpenClaw, MsgDone, termapi.TurnWaitingForAgent, termapi.TurnIdle, 0},
		{"error fails", "codex", ActorOpenClaw, MsgError, termapi.TurnWaitingForAgent, termapi.TurnFailed, 0},
		{"progress starts a created turn", "codex", ActorOpenClaw, MsgProgress, termapi.TurnCreated, termapi.TurnRunning, 0},
		{"progress keeps a waiting turn", "codex", ActorOpenClaw, MsgProgress, termapi.TurnWaitingForAgent, termapi.TurnWaitingForAgent, 0},
		{"control from openclaw starts a created turn", ActorOpenClaw, "codex", MsgControl, termapi.TurnCreated, termapi.TurnRunning, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			turn := &store.Turn{TurnID: "turn-1", SessionID: "session-1", Status: tt.start}
			m, err := newMessage(turn, tt.from, tt.to, tt.typ, "body", 42)
			if err != nil {
				t.Fatal(err)
			}
			ApplyMessage(turn, m)
			if turn.Status != tt.want || turn.ResponseRoundsUsed != tt.wantRounds || turn.UpdatedAt != 42 {
				t.Fatalf("status %s rounds %d updated %d, want %s %d 42", turn.Status, turn.ResponseRoundsUsed, turn.UpdatedAt, tt.want, tt.wantRounds)
			}
			if tt.typ == MsgDone && turn.IdleSince != 42 {
				t.Fatalf("idle_since = %d", turn.IdleSince)
			}
		})
	}
}

func TestMessageRoutesAndIDs(t *testing.T) {
	t.Parallel()
	turn := &store.Turn{TurnID: "turn-1", SessionID: "session-1"}
	for _, bad := range []struct{ from, to, typ, body string }{
		{ActorOpenClaw, "codex", MsgDone, "x"},     // openclaw never says done
		{"codex", ActorOpenClaw, MsgTask, "x"},     // the agent never sends a task
		{"codex", "claude-code", MsgQuestion, "x"}, // no route between agents
		{ActorOpenClaw, "codex", MsgTask, ""},      // empty body
	} {
		if _, err := newMessage(turn, bad.from, bad.to, bad.typ, bad.body, 1); err == nil {
			t.Errorf("message %+v accepted", bad)
		}
	}
	for _, tc := range []struct {
		kind, prefix, id string
		ok               bool
	}{
		{"turn id", "turn-", "turn-20260101T000000-abcdef12", true},
		{"turn id", "turn-", "turn-", false},
		{"turn id", "turn-", "TURN-1", false},
		{"session id", "session-", "session-1 2", false},
	} {
		if err := ids.Check(tc.kind, tc.prefix, tc.id); (err == nil) != tc.ok {
			t.Errorf("ids.Check(%q) = %v", tc.id, err)
		}
	}
	if err := ids.CheckTerminal("terminal:v2:tmux:codex:work:0.0:42"); err != nil {
		t.Errorf("valid terminal id refused: %v", err)
	}
	for _, bad := range []string{"", "terminal:v2:tmux:vim:w:0.0:1", "terminal:v2:tmux:codex:w:0.0:x", "turn-1"} {
		if err := ids.CheckTerminal(bad); err == nil {
			t.Errorf("terminal id %q accepted", bad)
		}
	}
}

func TestMalformedIDErrorsStayShortAndSayWhy(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 100_000)
	for _, tc := range []struct {
		name, want string
		err        error
	}{
		{"a 100 kB watch id", "longer than 100 characters", ids.Check("watch id", "watch-", "watch-"+long)},
		{"a 100 kB terminal id", "longer than", ids.CheckTerminal("terminal:v2:tmux:codex:" + long + ":0.0:1")},
	} {
		if tc.err == nil || len(tc.err.Error()) > 600 || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error (%d bytes) %.200q; want at most 600 bytes saying %q", tc.name, len(fmt.Sprint(tc.err)), fmt.Sprint(tc.err), tc.want)
		}
	}
}

func FuzzSubmissionPayload(f *testing.F) {
	for _, s := range []string{"hello", "/model x", "\n\n  /exit", "a\nb\n", " ", "ok /not-first", "  lead and trail  "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		text, hash, err := submissionPayload(s)
		if err != nil {
			return
		}
		if text == "" || hashOf(text) != hash || !strings.Contains(s, text) {
			t.Fatalf("payload %q hash %q for %q", text, hash, s)
		}
		if text2, _, err := submissionPayload(text); err != nil || text2 != text {
			t.Fatalf("payload not stable: %q -> %q, %v", text, text2, err)
		}
	})
}
