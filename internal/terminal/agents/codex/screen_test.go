package codex_test

import (
	"os"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

// approvalScreen is the prompt of the real 0.171 TUI (see the golden),
// with parts replaceable by the cases below.
const approvalScreen = `› TOOLCALL: ESCALATE touch approved.txt

• Running touch approved.txt

  Would you like to run the following command?

  Environment: local

  Reason: Fake model wants to run this unsandboxed

  $ touch approved.txt GITHUB_TOKEN=abc

› 1. Yes, proceed (y)
  2. Yes, and don't ask again for commands that start with ` + "`touch approved.txt`" + ` (p)
  3. No, and tell Codex what to do differently (esc)

  Press enter to confirm or esc to cancel
`

func TestParseScreenApproval(t *testing.T) {
	t.Parallel()
	got := codex.ParseScreen(approvalScreen)
	if got.Activity != screen.AwaitingApproval || got.Approval == nil || !got.Approval.Approvable {
		t.Fatalf("%+v", got)
	}
	if got.Approval.Command != "touch approved.txt GITHUB_TOKEN=[REDACTED]" {
		t.Errorf("command %q is not the redacted command", got.Approval.Command)
	}
	ansi := strings.ReplaceAll(approvalScreen, "Would you like", "\x1b[1mWould you like\x1b[0m")
	if fp := codex.ParseScreen(strings.ReplaceAll(ansi, "\n", "\r\n")).Approval.Fingerprint; fp != got.Approval.Fingerprint {
		t.Error("ANSI attributes or CRLF changed the fingerprint")
	}
	blocked := []struct{ name, old, new string }{
		{"two prompts", "  Environment: local", "  Would you like to make the following edits?"},
		{"option 1 is not yes", "1. Yes, proceed (y)", "1. Sure (y)"},
		{"option 1 shortcut is not y", "1. Yes, proceed (y)", "1. Yes, proceed (a)"},
		{"options skip a number", "3. No, and", "4. No, and"},
		{"last option is not no", "3. No, and tell Codex what to do differently (esc)", "3. Maybe later (m)"},
		{"text after the footer", "esc to cancel\n", "esc to cancel\nsomething else\n"},
	}
	for _, tt := range blocked {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := strings.Replace(approvalScreen, tt.old, tt.new, 1)
			if s == approvalScreen {
				t.Fatalf("case does not change the screen")
			}
			got := codex.ParseScreen(s)
			if got.Activity != screen.AwaitingApproval || got.Approval == nil || got.Approval.Approvable || got.Approval.Reason == "" {
				t.Errorf("%+v, want a blocking prompt that is not approvable", got.Approval)
			}
		})
	}
	t.Run("answered prompt is history", func(t *testing.T) {
		t.Parallel()
		s := approvalScreen + "\n✔ You approved codex to run touch approved.txt this time\n\n› Ask Codex to do anything\n\n  fake-model default · /srv\n"
		if got := codex.ParseScreen(s); got.Activity == screen.AwaitingApproval {
			t.Errorf("%+v", got)
		}
	})
}

func TestParseScreenUnknown(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "random output\nwith no composer", "› looks like a prompt\nbut a non-indented line follows"} {
		if got := codex.ParseScreen(s); got.Activity != screen.Unknown {
			t.Errorf("ParseScreen(%q) = %+v, want unknown", s, got)
		}
	}
}

func FuzzParseScreen(f *testing.F) {
	f.Add(approvalScreen)
	f.Add("› Ask Codex to do anything\n\n  ? for shortcuts\n")
	f.Add("› say hi\n\n• Working (0s • esc to interrupt)\n\n› Ask Codex to do anything\n")
	for _, name := range []string{"question/screen-question.txt", "question-several/screen-first.txt", "question-several/screen-first-typed.txt", "question-several/screen-second.txt"} {
		if q, err := os.ReadFile("testdata/" + name); err == nil {
			f.Add(string(q))
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := codex.ParseScreen(s)
		if q := got.Question; (got.Activity == screen.AwaitingAnswer) != (q != nil) ||
			q != nil && (len(q.Fingerprint) != 64 || q.Answerable != (q.Reason == "") || q.Answerable && len(q.Options) < 2) {
			t.Fatalf("inconsistent question %+v %+v", got, q)
		}
		if q := got.Question; q != nil && q.Answerable && (q.FreeText != len(q.Options)+1 || q.Selected < 1 || q.Selected > q.FreeText ||
			len(q.FreeTextKeys) != abs(q.FreeText-q.Selected)+1 || q.Position < 1 || q.Position > q.Count || q.Typing) {
			t.Fatalf("answerable question with inconsistent rows %+v", q)
		}
		switch got.Activity {
		case screen.AwaitingAnswer:
		case screen.AwaitingApproval:
			if got.Approval == nil || len(got.Approval.Fingerprint) != 64 || got.Approval.Approvable != (got.Approval.Reason == "") {
				t.Fatalf("inconsistent approval %+v", got.Approval)
			}
		case screen.Idle, screen.Working, screen.Unknown:
			if got.Approval != nil {
				t.Fatalf("approval without awaiting_approval: %+v", got)
			}
		default:
			t.Fatalf("activity %q", got.Activity)
		}
	})
}

func abs(n int) int { return max(n, -n) }
