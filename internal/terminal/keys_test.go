package terminal

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/request"
	"github.com/clawconnect/clawconnect/termapi"
)

// keystrokeRequests are requests that, typed as they are, act on the pane
// instead of asking the agent: Claude Code 2.1.332 ran the first as a shell
// command, turned the second into /cost, exited on the third, and a pane
// that trusts the paste-end marker takes the fourth as two submissions.
var keystrokeRequests = []struct{ name, text, says string }{
	{"bang runs a shell", "!id > proof.txt", "starts with '!'"},
	{"DEL rewrites the draft", "x\u007f/cost", "U+007F (DEL, Backspace) at byte offset 1"},
	{"Ctrl-C exits", "bye\u0003\u0003", "U+0003 (ETX, Ctrl-C) at byte offset 3"},
	{"paste-end marker", "a\n\u2026\u001b[201~\r/exit\r", "U+001B (ESC, escape) at byte offset 5 (character offset 3"},
	{"invalid UTF-8", "a\x9b201~", "byte 0x9b at byte offset 1"},
}

// TestSendRefusesKeystrokes checks that Send and Respond refuse requests
// holding keystrokes before anything happens: bad input naming the
// character, no Turn, nothing typed, no key pressed; a plain request still
// goes through.
func TestSendRefusesKeystrokes(t *testing.T) {
	for _, agent := range []string{termapi.AgentCodex, termapi.AgentClaude} {
		t.Run(agent, func(t *testing.T) {
			a := newFakeAgent(agent, 190)
			r := newRig(t, a)
			ctx := t.Context()
			for _, k := range keystrokeRequests {
				refusal(t, r, termapi.ErrBadInput, k.says, func() error {
					_, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: k.text})
					return err
				})
				refusal(t, r, termapi.ErrBadInput, "nothing was typed", func() error {
					_, err := r.svc.Respond(ctx, "turn-20260101T000000-abcdef12", k.text)
					return err
				})
			}
			a.mu.Lock()
			draft, keys := a.draft, slices.Clone(a.keys)
			a.mu.Unlock()
			if draft != "" || len(keys) != 0 {
				t.Fatalf("refused requests reached the pane: draft %q, keys %v", draft, keys)
			}
			if _, err := r.st.SessionByThread(ctx, agent, a.thread); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("a refused send bound a session: %v", err)
			}
			res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "say hi!\n\tthen stop"})
			if err != nil || res.SubmissionOutcome != termapi.OutcomeAccepted {
				t.Fatalf("plain send after the refusals = %+v, %v", res, err)
			}
		})
	}
}

// TestEnterOnlyOnTheTypedDraft checks that Enter is pressed for either
// agent only when its composer shows exactly the typed text: when the
// typed text switched the composer into another mode, or the draft reads
// otherwise, the Turn fails not_accepted, nothing is submitted and the
// text is left where a human can see it.
func TestEnterOnlyOnTheTypedDraft(t *testing.T) {
	shows := map[string]func(typed string) string{
		"composer gone (a mode the text switched on)": func(string) string { return "" },
		"another draft":     func(string) string { return "/cost" },
		"a human typed too": func(typed string) string { return typed + "x" },
	}
	for _, agent := range []string{termapi.AgentCodex, termapi.AgentClaude} {
		for name, show := range shows {
			t.Run(agent+"/"+name, func(t *testing.T) {
				a := newFakeAgent(agent, 191)
				r := newRig(t, a)
				r.svc.o.DraftTimeout = 300 * time.Millisecond
				a.set(func(f *fakeAgent) {
					f.shown = func(typed string) string {
						if typed == "" {
							return ""
						}
						return show(typed)
					}
				})
				res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "do the thing"})
				if !errors.Is(err, termapi.ErrRefused) || res.SubmissionOutcome != termapi.OutcomeNotAccepted || !res.DoNotRetry ||
					!strings.Contains(err.Error(), agentName(agent)+" composer as typed, so Enter was not pressed") {
					t.Fatalf("send = %+v, %v", res, err)
				}
				if keys := a.sentKeys(); slices.Contains(keys, "Enter") {
					t.Fatalf("Enter was pressed on a draft that did not match: keys %v", keys)
				}
				v, err := r.svc.Status(t.Context(), res.TurnID)
				if err != nil || v.Status != termapi.TurnFailed || v.SubmissionOutcome != termapi.OutcomeNotAccepted {
					t.Fatalf("turn = %+v, %v", v, err)
				}
			})
		}
	}
}

// FuzzClaudeDraftCheck drives what a send checks before Enter on Claude
// Code: a request Prepare accepts, typed into a composer that shows some
// text, with the composer drawn as Claude Code's "❯" prompt or replaced
// by another mode's prompt ("!" bash mode). The check may pass only when
// the composer is Claude Code's and shows the payload (up to wrapping, or
// as the placeholder of a large paste of it), and whatever Prepare
// accepted holds no byte a terminal reads as a control.
func FuzzClaudeDraftCheck(f *testing.F) {
	f.Add("say hello", "say hello", false)
	f.Add("say hello", "say  hel lo", false)
	f.Add("!id > proof.txt", "id > proof.txt", true)
	f.Add("x\u007f/cost", "/cost", false)
	f.Add("first\nsecond", "first\nsecond", false)
	f.Add("a\nb\nc", "[Pasted text #1 +2 lines]", false)
	f.Add("echo", "echo", true)
	rule := strings.Repeat("─", 60)
	f.Fuzz(func(t *testing.T, in, shown string, bashMode bool) {
		p, err := request.Prepare(in)
		if err != nil {
			return
		}
		if strings.ContainsAny(shown, "❯─━╌") {
			// The composer's own frame inside its text: the parser reads
			// the last frame it finds, and a composer that already held
			// one is refused before anything is typed.
			return
		}
		for i := 0; i < len(p.Text); i++ {
			if c := p.Text[i]; (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
				t.Fatalf("Prepare(%q) accepted byte 0x%02x", in, c)
			}
		}
		prompt := "❯ "
		if bashMode {
			prompt = "! "
		}
		lines := strings.Split(shown, "\n")
		screen := "● FAKE-REPLY: ok\n\n" + rule + "\n" + prompt + lines[0] + "\n"
		for _, l := range lines[1:] {
			screen += "  " + l + "\n"
		}
		screen += rule + "\n  ⏸ manual mode on\n"
		if !(claude.Agent{}).DraftVisible(screen, p.Text) {
			return
		}
		if bashMode {
			t.Fatalf("the draft check passed on a bash-mode prompt: %q for %q", shown, p.Text)
		}
		squash := func(s string) string { return strings.Join(strings.Fields(s), "") }
		got := strings.TrimSpace(shown)
		if squash(shown) != squash(p.Text) && !strings.HasPrefix(got, "[Pasted text #") {
			t.Fatalf("the draft check passed on %q for the payload %q", shown, p.Text)
		}
	})
}
