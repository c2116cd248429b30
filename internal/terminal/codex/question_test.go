package codex_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/request"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

func TestQuestionGoldens(t *testing.T) {
	t.Parallel()
	checkQuestionGoldens(t, questionDir)
}

// checkQuestionGoldens checks the user-input dialog's parser and the
// rollout scans against a recording of the real TUI (testdata/question/,
// or a fresh one from TestRecordRealTUIQuestion).
func checkQuestionGoldens(t *testing.T, dir string) {
	t.Helper()
	asked := readGolden(t, dir, "screen-question.txt")
	lines := screen.Lines(asked)
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "Question 1/1") {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("no question dialog in\n%s", asked)
	}
	want := screen.Screen{Activity: screen.AwaitingAnswer, Question: &screen.Question{
		Profile: codex.QuestionProfile, Fingerprint: screen.Fingerprint(lines[start:]),
		Text:     "Which color should the widget be",
		Options:  []screen.Option{{Number: 1, Label: "Red", Description: "Choose Red"}, {Number: 2, Label: "Blue", Description: "Choose Blue"}},
		Selected: 1, Answerable: true}}
	if diff := cmp.Diff(want, codex.ParseScreen(asked)); diff != "" {
		t.Errorf("ParseScreen(screen-question.txt) (-want +got):\n%s", diff)
	}
	if got := codex.ParseScreen(readGolden(t, dir, "screen-question-answered.txt")); got.Activity != screen.Idle || got.Question != nil {
		t.Errorf("ParseScreen(screen-question-answered.txt) = %+v", got)
	}

	var m goldenManifest
	if err := json.Unmarshal([]byte(readGolden(t, dir, "manifest.json")), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Turns) != 1 {
		t.Fatalf("manifest has %d turns, want 1", len(m.Turns))
	}
	turn := m.Turns[0]
	path := copyRollout(t, dir, turn.Rollout)
	meta, err := codex.ReadSessionMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	a := anchorAt(t, path, meta.ID, int64(turn.Offset))
	p, err := request.Prepare(turn.Request)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := codex.ScanAcceptance(a, p.Hash)
	if err != nil || !acc.Accepted {
		t.Fatalf("acceptance %+v, %v", acc, err)
	}
	c, err := codex.ScanCompletion(a, acc.TurnID)
	if err != nil {
		t.Fatal(err)
	}
	wantC := native.Completion{State: native.Completed, Code: native.CodeCompletionFound, TurnID: acc.TurnID, Text: turn.Reply}
	if diff := cmp.Diff(wantC, c, cmpIgnoreTimes); diff != "" {
		t.Errorf("completion (-want +got):\n%s", diff)
	}
	pending := copyRollout(t, dir, turn.Pending)
	pa := anchorAt(t, pending, meta.ID, int64(turn.Offset))
	if got, err := codex.ScanCompletion(pa, acc.TurnID); err != nil || got.State != native.Pending {
		t.Errorf("completion while the question waits = %+v, %v; want pending", got, err)
	}
}
