package codex_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
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
		Profile: codex.QuestionProfile, Fingerprint: screen.Fingerprint(unmarkRows(lines[start:])),
		Text:     "Which color should the widget be",
		Options:  []screen.Option{{Number: 1, Label: "Red", Description: "Choose Red"}, {Number: 2, Label: "Blue", Description: "Choose Blue"}},
		FreeText: 3, FreeTextKeys: []string{"Down", "Down", "Tab"}, Position: 1, Count: 1, Unanswered: 1,
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

func TestQuestionSeveralGoldens(t *testing.T) {
	t.Parallel()
	checkSeveralGoldens(t, severalDir)
}

// checkSeveralGoldens checks the parser on a recording of a dialog of two
// questions (testdata/question-several/, or a fresh one from
// TestRecordRealTUIQuestionSeveral), and the answers the model received.
func checkSeveralGoldens(t *testing.T, dir string) {
	t.Helper()
	color := []screen.Option{{Number: 1, Label: "Red", Description: "Choose Red"}, {Number: 2, Label: "Blue", Description: "Choose Blue"}}
	size := []screen.Option{{Number: 1, Label: "Small", Description: "Choose Small"}, {Number: 2, Label: "Large", Description: "Choose Large"}}
	for _, c := range []struct {
		file string
		want screen.Question
	}{
		{"screen-first.txt", screen.Question{Text: "Which color", Options: color, FreeText: 3, FreeTextKeys: []string{"Down", "Down", "Tab"},
			Position: 1, Count: 2, Unanswered: 2, Selected: 1, Answerable: true}},
		{"screen-first-other.txt", screen.Question{Text: "Which color", Options: color, FreeText: 3, FreeTextKeys: []string{"Tab"},
			Position: 1, Count: 2, Unanswered: 2, Selected: 3, Answerable: true}},
		{"screen-first-notes.txt", screen.Question{Text: "Which color", Options: color, FreeText: 3, FreeTextKeys: []string{"Tab"},
			Typing: true, Position: 1, Count: 2, Unanswered: 2, Selected: 3, Reason: "a note is being typed in the dialog"}},
		{"screen-first-typed.txt", screen.Question{Text: "Which color", Options: color, FreeText: 3, FreeTextKeys: []string{"Tab"},
			Typing: true, Position: 1, Count: 2, Unanswered: 2, Selected: 3, Reason: "a note is being typed in the dialog"}},
		{"screen-second.txt", screen.Question{Text: "Which size", Options: size, FreeText: 3, FreeTextKeys: []string{"Down", "Down", "Tab"},
			Position: 2, Count: 2, Unanswered: 1, Selected: 1, Answerable: true}},
	} {
		shown := readGolden(t, dir, c.file)
		lines := screen.Lines(shown)
		start := -1
		for i, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), "Question ") {
				start = i
			}
		}
		if start < 0 {
			t.Fatalf("%s: no question dialog in\n%s", c.file, shown)
		}
		want := c.want
		want.Profile, want.Fingerprint = codex.QuestionProfile, screen.Fingerprint(unmarkRows(lines[start:]))
		got := codex.ParseScreen(shown)
		if diff := cmp.Diff(screen.Screen{Activity: screen.AwaitingAnswer, Question: &want}, got); diff != "" {
			t.Errorf("ParseScreen(%s) (-want +got):\n%s", c.file, diff)
		}
	}
	if got := codex.ParseScreen(readGolden(t, dir, "screen-answered.txt")); got.Activity != screen.Idle || got.Question != nil {
		t.Errorf("ParseScreen(screen-answered.txt) = %+v", got)
	}
	// Codex writes the answers of several questions in any order.
	const want = `{"answers":{"choice":{"answers":["None of the above","user_note: Green please"]},"choice2":{"answers":["Large"]}}}`
	got := strings.TrimSpace(readGolden(t, dir, "reply.txt"))
	var g, w any
	body, ok := strings.CutPrefix(got, "FAKE-TOOL-RESULT: ")
	if !ok || json.Unmarshal([]byte(body), &g) != nil || json.Unmarshal([]byte(want), &w) != nil || !cmp.Equal(g, w) {
		t.Errorf("the model received %s, want %s", got, want)
	}
}

// TestQuestionNotesOnALaterQuestion: the notes footer of a question that
// is not the only one also names the arrows (seen on the real TUI when a
// note was typed on the second of two questions).
func TestQuestionNotesOnALaterQuestion(t *testing.T) {
	t.Parallel()
	shown := "› QUESTION: Which color | Red | Blue || Which size | Small | Large\n\n" +
		"  Question 2/2 (1 unanswered)\n  Which size\n\n" +
		"  › 1. Small              Choose Small\n    2. Large              Choose Large\n" +
		"    3. None of the above  Optionally, add details in notes (tab)\n\n" +
		"  › Green please\n\n  tab or esc to clear notes | enter to submit all | ←/→ to navigate questions\n"
	q := codex.ParseScreen(shown).Question
	if q == nil || q.Answerable || q.Typing || q.Reason != "a note is being typed in the dialog" || q.Position != 2 || q.Selected != 1 {
		t.Fatalf("ParseScreen = %+v", q)
	}
}
