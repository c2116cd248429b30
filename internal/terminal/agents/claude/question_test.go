package claude_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

func TestQuestionGoldens(t *testing.T) {
	t.Parallel()
	checkQuestionGoldens(t, questionDir)
}

// questionRegion is the dialog as the fingerprint covers it: from the rule
// above the "☐" header to the footer.
func questionRegion(t *testing.T, text string) []string {
	t.Helper()
	lines := screen.Lines(text)
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "☐ ") {
			return unmarkRows(lines[i-1:])
		}
	}
	t.Fatalf("no question dialog in\n%s", text)
	return nil
}

// checkQuestionGoldens checks the question dialog's parser and the
// transcript scans against a recording of the real TUI
// (testdata/question/, or a fresh one from TestRecordRealTUIQuestion).
func checkQuestionGoldens(t *testing.T, dir string) {
	t.Helper()
	asked := readGolden(t, dir, "screen-question.txt")
	want := screen.Screen{Activity: screen.AwaitingAnswer, Question: &screen.Question{
		Profile: claude.QuestionProfile, Fingerprint: screen.Fingerprint(questionRegion(t, asked)),
		Header: "Choice", Text: "Which color should the widget be?",
		Options:  []screen.Option{{Number: 1, Label: "Red", Description: "Choose Red"}, {Number: 2, Label: "Blue", Description: "Choose Blue"}},
		FreeText: 3, FreeTextKeys: []string{"3"}, Selected: 1, Answerable: true}}
	if diff := cmp.Diff(want, claude.ParseScreen(asked)); diff != "" {
		t.Errorf("ParseScreen(screen-question.txt) (-want +got):\n%s", diff)
	}
	if got := claude.ParseScreen(readGolden(t, dir, "screen-question-answered.txt")); got.Activity != screen.Idle || got.Question != nil {
		t.Errorf("ParseScreen(screen-question-answered.txt) = %+v", got)
	}
	// Once typing, the free-text row holds the text: still a question, no
	// longer the one reported (another fingerprint), and not answerable.
	typed := claude.ParseScreen(readGolden(t, dir, "screen-question-typed.txt"))
	if typed.Activity != screen.AwaitingAnswer || typed.Question == nil || typed.Question.Answerable ||
		typed.Question.Fingerprint == want.Question.Fingerprint {
		t.Errorf("ParseScreen(screen-question-typed.txt) = %+v %+v", typed, typed.Question)
	}

	var m goldenManifest
	if err := json.Unmarshal([]byte(readGolden(t, dir, "manifest.json")), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Turns) != 2 {
		t.Fatalf("manifest has %d turns, want 2", len(m.Turns))
	}
	for _, turn := range m.Turns {
		_, path := setup(t, dir, turn.Transcript, m)
		a := anchorAt(t, path, m, int64(turn.Offset))
		acc, err := claude.ScanAcceptance(a, turn.Request)
		if err != nil || !acc.Accepted {
			t.Fatalf("%s: acceptance %+v, %v", turn.Name, acc, err)
		}
		c, err := claude.ScanCompletion(a, acc.TurnID)
		if err != nil {
			t.Fatalf("%s: ScanCompletion: %v", turn.Name, err)
		}
		want := native.Completion{State: native.Completed, Code: native.CodeCompletionFound, TurnID: acc.TurnID, Text: turn.Reply}
		if diff := cmp.Diff(want, c, ignoreTimes); diff != "" {
			t.Errorf("%s: completion (-want +got):\n%s", turn.Name, diff)
		}
		if turn.Pending == "" {
			continue
		}
		_, pending := setup(t, dir, turn.Pending, m)
		pa := anchorAt(t, pending, m, int64(turn.Offset))
		if c, err := claude.ScanCompletion(pa, acc.TurnID); err != nil || c.State != native.Pending {
			t.Errorf("%s: completion while the question waits = %+v, %v; want pending", turn.Name, c, err)
		}
	}
}
