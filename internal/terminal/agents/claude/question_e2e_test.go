package claude_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
)

// questionDir holds the question dialog's recording, apart from the main
// one: each recording test replaces only its own files.
const questionDir = "testdata/question"

// TestRecordRealTUIQuestion drives the real Claude Code TUI through two
// AskUserQuestion dialogs asked by the fake model (QUESTION: …): one
// answered by pressing an option's digit, one by its "Type something."
// row and typed text; it records the screens and the transcripts and
// checks the parsers on them. With -update the recording replaces
// testdata/question/.
func TestRecordRealTUIQuestion(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.ClaudeCode, model, realtui.Options{Args: []string{"--permission-mode", "default"}})
	dir := t.TempDir()
	if *update {
		dir = questionDir
		_ = os.RemoveAll(dir)
	}
	base := filepath.Dir(tui.CLI.WorkDir)
	g := &realtui.Golden{Dir: dir, Replace: [][2]string{
		{base, goldenBase},
		{claude.ProjectDirName(base), claude.ProjectDirName(goldenBase)},
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	pid, err := tui.AgentPID()
	if err != nil {
		t.Fatal(err)
	}
	live, err := claude.ReadLiveSession(tui.ClaudeConfigDir(), pid)
	if err != nil {
		t.Fatal(err)
	}
	transcript := claude.TranscriptPath(tui.ClaudeConfigDir(), live.Cwd, live.SessionID)
	size := func() int {
		data, _ := os.ReadFile(transcript)
		return len(g.Sanitize(string(data)))
	}
	m := goldenManifest{Cwd: g.Sanitize(live.Cwd), SessionID: live.SessionID}
	screenFile := func(name, s string) {
		t.Helper()
		if err := g.Write("screen-"+name+".txt", []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	dialog := func(what string) (string, *screen.Question) {
		t.Helper()
		s, err := tui.WaitStable(ctx, what, 300*time.Millisecond, func(s string) bool {
			return strings.Contains(s, "Enter to select") && strings.Contains(s, "Esc to cancel")
		})
		if err != nil {
			t.Fatal(err)
		}
		sc := claude.ParseScreen(s)
		if sc.Activity != screen.AwaitingAnswer || sc.Question == nil || !sc.Question.Answerable {
			t.Fatalf("live question screen parsed as %+v %+v", sc, sc.Question)
		}
		return s, sc.Question
	}
	finish := func(turn goldenTurn, anchor claude.Anchor, want string) goldenTurn {
		t.Helper()
		if _, err := tui.WaitStable(ctx, "the reply", 300*time.Millisecond, func(s string) bool {
			return strings.Contains(s, want) && tui.Idle(s)
		}); err != nil {
			t.Fatal(err)
		}
		waitFile(ctx, t, transcript, `"turn_duration"`, len(m.Turns)+1)
		if _, err := g.CopyFile(turn.Transcript, transcript); err != nil {
			t.Fatal(err)
		}
		for _, r := range model.Requests() {
			if r.IsToolResult {
				turn.Reply = r.Reply
			}
		}
		if !strings.Contains(turn.Reply, want) {
			t.Fatalf("reply %q does not show the answer %q", turn.Reply, want)
		}
		liveCheck(t, anchor, turn.Request, native.Completed, turn.Reply)
		return turn
	}

	// 1. A choice, picked by its digit.
	req := "QUESTION: Which color should the widget be? | Red | Blue"
	turn := goldenTurn{Name: "question", Request: req, Offset: size(), Transcript: "transcript-question.jsonl", Pending: "transcript-question-pending.jsonl"}
	anchor := liveAnchor(t, tui.ClaudeConfigDir(), pid)
	if err := tui.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	s, q := dialog("the question dialog")
	screenFile("question", s)
	// The dialog can be drawn before the transcript holds the tool call.
	waitFile(ctx, t, transcript, `"name":"AskUserQuestion","type":"tool_use"`, 1)
	if _, err := g.CopyFile(turn.Pending, transcript); err != nil {
		t.Fatal(err)
	}
	if err := tui.Keys(ctx, "2"); err != nil {
		t.Fatal(err)
	}
	if q.Options[1].Label != "Blue" {
		t.Fatalf("option 2 is %+v", q.Options[1])
	}
	m.Turns = append(m.Turns, finish(turn, anchor, `"Blue"`))
	if s, err = tui.Capture(ctx); err != nil {
		t.Fatal(err)
	}
	screenFile("question-answered", s)

	// 2. A typed answer: the "Type something." row, then text and Enter.
	req = "QUESTION: Which size should it be? | Small | Large"
	turn = goldenTurn{Name: "question_free_text", Request: req, Offset: size(), Transcript: "transcript-question-free-text.jsonl"}
	anchor = liveAnchor(t, tui.ClaudeConfigDir(), pid)
	if err := tui.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	_, q = dialog("the second question dialog")
	if err := tui.Keys(ctx, strconv.Itoa(q.FreeText)); err != nil {
		t.Fatal(err)
	}
	if _, err := tui.WaitStable(ctx, "the free-text row", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "❯ "+strconv.Itoa(q.FreeText)+".")
	}); err != nil {
		t.Fatal(err)
	}
	if err := tui.Type(ctx, "Medium please"); err != nil {
		t.Fatal(err)
	}
	if s, err = tui.WaitStable(ctx, "the typed answer", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "Medium please")
	}); err != nil {
		t.Fatal(err)
	}
	screenFile("question-typed", s)
	if err := tui.Keys(ctx, "Enter"); err != nil {
		t.Fatal(err)
	}
	m.Turns = append(m.Turns, finish(turn, anchor, "Medium please"))

	data, _ := json.MarshalIndent(m, "", "  ")
	if err := g.Write("manifest.json", append(data, '\n')); err != nil {
		t.Fatal(err)
	}
	checkQuestionGoldens(t, dir)
}

// waitFile waits until the file at path holds marker n times.
func waitFile(ctx context.Context, t *testing.T, path, marker string, n int) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		data, _ := os.ReadFile(path)
		if strings.Count(string(data), marker) >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never held %d × %s", path, n, marker)
		case <-tick.C:
		}
	}
}
