package claude_test

import (
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

// TestParseScreenProceedInReply: a reply that says "Do you want to
// proceed?", with the composer under it, is no dialog.
func TestParseScreenProceedInReply(t *testing.T) {
	t.Parallel()
	rule := strings.Repeat("─", 40)
	composer := rule + "\n❯ \n" + rule + "\n  esc to interrupt\n"
	for _, reply := range []string{
		"❯ plan it\n\n● Here is the plan.\n\n Do you want to proceed?\n\n",
		"❯ plan it\n\n● It will ask:\n\n Do you want to proceed?\n ❯ 1. Yes\n   2. No\n\n Esc to cancel\n\n",
	} {
		got := claude.ParseScreen(reply + composer)
		if got.Approval != nil || got.Activity != screen.Working {
			t.Errorf("%+v %+v, want working and no approval", got, got.Approval)
		}
	}
	// The line alone, with neither a dialog nor a composer under it, is
	// not a dialog either.
	if got := claude.ParseScreen("● Do you want to proceed?\n"); got.Approval != nil {
		t.Errorf("%+v", got.Approval)
	}
}

// TestFingerprintHighlight: moving the highlight keeps a dialog's
// fingerprint (a permission dialog with another row highlighted is still
// not approvable); other text changes it.
func TestFingerprintHighlight(t *testing.T) {
	t.Parallel()
	moved := strings.Replace(dialog, " ❯ 1. Yes\n   2. Yes,", "   1. Yes\n ❯ 2. Yes,", 1)
	a, b := claude.ParseScreen(dialog).Approval, claude.ParseScreen(moved).Approval
	if a == nil || b == nil || a.Fingerprint != b.Fingerprint || !a.Approvable || b.Approvable {
		t.Errorf("approval %+v, highlight moved %+v: want one fingerprint, only the first approvable", a, b)
	}
	if o := claude.ParseScreen(strings.Replace(dialog, "   4. No", "   4. No way", 1)).Approval; o == nil || o.Fingerprint == a.Fingerprint {
		t.Errorf("other option text kept the fingerprint: %+v", o)
	}

	asked := readGolden(t, "testdata", "question/screen-question.txt")
	down := strings.Replace(asked, "❯ 1. Red\n     Choose Red\n  2. Blue", "  1. Red\n     Choose Red\n❯ 2. Blue", 1)
	q, d := claude.ParseScreen(asked).Question, claude.ParseScreen(down).Question
	if down == asked || q == nil || d == nil || q.Selected == d.Selected || q.Fingerprint != d.Fingerprint {
		t.Errorf("question %+v, highlight moved %+v: want one fingerprint", q, d)
	}
	for _, other := range []string{
		strings.Replace(asked, "  2. Blue", "  2. Green", 1),
		strings.Replace(asked, "Choose Blue", "Choose Teal", 1),
	} {
		if o := claude.ParseScreen(other).Question; other == asked || o == nil || o.Fingerprint == q.Fingerprint {
			t.Errorf("a changed question kept the fingerprint: %+v", o)
		}
	}
}
