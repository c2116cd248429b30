package claude_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

// dialog is the Bash permission dialog of the real 2.1.332 TUI (see the
// golden), with parts replaceable by the cases below.
const dialog = `❯ TOOLCALL: touch approved.txt

● Fake scripted command
  ⎿  $ touch approved.txt

────────────────────────────────────────────────────────────
 Bash command

   touch approved.txt
   fake scripted command

 Do you want to proceed?
 ❯ 1. Yes
   2. Yes, and always allow access to /srv/work from this project
   3. Yes, and switch to auto mode · auto mode handles these prompts for you
   4. No

 Esc to cancel · Tab to amend
`

func TestParseScreenDialog(t *testing.T) {
	t.Parallel()
	got := claude.ParseScreen(dialog)
	if got.Activity != screen.AwaitingApproval || got.Approval == nil || !got.Approval.Approvable || got.Approval.Kind != screen.RunCommand {
		t.Fatalf("%+v %+v", got, got.Approval)
	}
	if got.Approval.Command != "" || strings.Contains(got.Approval.Reason, "touch") {
		t.Errorf("a Claude approval carries the command: %+v", got.Approval)
	}
	blocked := []struct{ name, old, new string }{
		{"option 2 highlighted", " ❯ 1. Yes\n   2. Yes,", "   1. Yes\n ❯ 2. Yes,"},
		{"no header", " Bash command\n", " Something else\n"},
		{"no footer", " Esc to cancel · Tab to amend\n", ""},
		{"last option not No", "   4. No\n", "   4. Maybe\n"},
		{"numbering gap", "   4. No\n", "   5. No\n"},
		{"text after the footer", "Tab to amend\n", "Tab to amend\nsomething\n"},
		{"two questions", " Bash command\n", " Do you want to proceed?\n Bash command\n"},
	}
	for _, tt := range blocked {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := strings.Replace(dialog, tt.old, tt.new, 1)
			if s == dialog {
				t.Fatal("case does not change the screen")
			}
			got := claude.ParseScreen(s)
			if got.Activity != screen.AwaitingApproval || got.Approval.Approvable || got.Approval.Reason == "" {
				t.Errorf("%+v, want blocked and not approvable", got.Approval)
			}
		})
	}
}

func TestParseScreenDraft(t *testing.T) {
	t.Parallel()
	rule := strings.Repeat("─", 40)
	s := "● FAKE-REPLY: x\n" + rule + "\n❯ first line\n  second line\n" + rule + "\n  ⏸ manual mode on\n"
	if got := claude.ParseScreen(s); got.Activity != screen.Idle || got.Draft != "first line\nsecond line" {
		t.Errorf("%+v", got)
	}
	if got := claude.ParseScreen("nothing here"); got.Activity != screen.Unknown {
		t.Errorf("%+v, want unknown", got)
	}
	if got := claude.ParseScreen("❯ hi\n✶ Simmering… (2s · ↓ 4 tokens)\n"); got.Activity != screen.Working {
		t.Errorf("%+v, want working", got)
	}
}

// TestDialogCommand: the command box of the recorded dialog reads back
// as its command; a dialog without exactly one box of text, or one that
// cannot be approved, shows no command to compare.
func TestDialogCommand(t *testing.T) {
	t.Parallel()
	golden, err := os.ReadFile("testdata/screen-approval.txt")
	if err != nil {
		t.Fatal(err)
	}
	g := string(golden)
	dashes := strings.Repeat("╌", 40)
	for _, tt := range []struct {
		name, screen, want string
		ok                 bool
	}{
		{"recorded dialog", g, "touch approved.txt", true},
		{"wrapped at a space", strings.Replace(g, " touch approved.txt\n╌", " touch\n approved.txt\n╌", 1), "touch approved.txt", true},
		{"no command box", dialog, "", false},
		{"empty box", strings.Replace(g, " touch approved.txt\n╌", "╌", 1), "", false},
		{"blank line in the box", strings.Replace(g, " touch approved.txt\n╌", " touch\n\n approved.txt\n╌", 1), "", false},
		{"three rules", strings.Replace(g, " touch approved.txt\n╌", " touch\n"+dashes+"\n approved.txt\n╌", 1), "", false},
		{"not approvable", strings.Replace(g, " ❯ 1. Yes\n   2. Yes,", "   1. Yes\n ❯ 2. Yes,", 1), "", false},
		{"no dialog", "────\n❯ \n────\n", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.screen == g && tt.name != "recorded dialog" {
				t.Fatal("case does not change the screen")
			}
			got, ok := claude.DialogCommand(tt.screen)
			if got != tt.want || ok != tt.ok {
				t.Errorf("DialogCommand = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzParseScreen(f *testing.F) {
	f.Add(dialog)
	if g, err := os.ReadFile("testdata/screen-approval.txt"); err == nil {
		f.Add(string(g))
	}
	f.Add("────\n❯ \n────\n  ⏸ manual mode on · esc to interrupt\n")
	if q, err := os.ReadFile("testdata/question/screen-question.txt"); err == nil {
		f.Add(string(q))
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := claude.ParseScreen(s)
		if (got.Activity == screen.AwaitingApproval) != (got.Approval != nil) {
			t.Fatalf("%+v", got)
		}
		if q := got.Question; (got.Activity == screen.AwaitingAnswer) != (q != nil) ||
			q != nil && (len(q.Fingerprint) != 64 || q.Answerable != (q.Reason == "") || q.Answerable && (len(q.Options) < 2 || q.FreeText == 0)) {
			t.Fatalf("inconsistent question %+v %+v", got, q)
		}
		if got.Approval != nil && (got.Approval.Command != "" || len(got.Approval.Fingerprint) != 64 || got.Approval.Approvable != (got.Approval.Reason == "")) {
			t.Fatalf("%+v", got.Approval)
		}
		if cmd, ok := claude.DialogCommand(s); ok && (got.Approval == nil || !got.Approval.Approvable || cmd == "" || strings.Contains(cmd, "\n")) {
			t.Fatalf("a dialog command %q from a screen without an approvable dialog: %+v", cmd, got.Approval)
		}
	})
}

// FuzzScanTranscript scans arbitrary bytes after an anchor: a result or a
// *native.ScanError, never a panic, never evidence the bytes do not hold.
func FuzzScanTranscript(f *testing.F) {
	f.Add(prompt("p1", "d0", "do it") + assistant("a1", "p1", "m1", "end_turn", text("ok")) + duration("d1", "a1"))
	f.Add(prompt("p1", "", "do it") + `{"uuid":"x","parentUuid":"p1","type":"system","subtype":"turn_duration"}` + "\n")
	f.Add("{\n}\n")
	a := claude.Anchor{SessionID: session, Cwd: cwd, PID: 7, StartedAtMs: 1, Path: "/x/t.jsonl", FileExisted: true, Dev: 1, Ino: 1, Offset: 100}
	f.Fuzz(func(t *testing.T, tail string) {
		acc, err := claude.ScanAcceptanceBytes(a, []byte(tail), "do it")
		if err != nil && !errors.Is(err, native.ErrScan) {
			t.Fatalf("acceptance error %v is not a scan error", err)
		}
		if err == nil && acc.Accepted && !strings.Contains(tail, acc.TurnID) {
			t.Fatalf("accepted %+v from records without its uuid", acc)
		}
		c, err := claude.ScanCompletionBytes(a, []byte(tail), "p1")
		if err != nil {
			if !errors.Is(err, native.ErrScan) {
				t.Fatalf("completion error %v is not a scan error", err)
			}
			return
		}
		if c.State != native.Pending && !strings.Contains(tail, `"p1"`) {
			t.Fatalf("completion %+v without the prompt record", c)
		}
		if len([]rune(c.Text)) > native.MaxText {
			t.Fatalf("text of %d characters", len([]rune(c.Text)))
		}
	})
}
