package terminal

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
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
	for _, agent := range []string{AgentCodex, AgentClaude} {
		t.Run(agent, func(t *testing.T) {
			a := newFakeAgent(agent, 190)
			r := newRig(t, a)
			ctx := t.Context()
			for _, k := range keystrokeRequests {
				refusal(t, r, ErrBadInput, k.says, func() error {
					_, err := r.svc.Send(ctx, SendRequest{TerminalID: a.pane.TerminalID, Request: k.text})
					return err
				})
				refusal(t, r, ErrBadInput, "nothing was typed", func() error {
					_, err := r.svc.Respond(ctx, "turn-20260101T000000-abcdef12", k.text)
					return err
				})
				if err := CheckRequest(k.text); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), k.says) {
					t.Errorf("CheckRequest(%q) = %v", k.text, err)
				}
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
			res, err := r.svc.Send(ctx, SendRequest{TerminalID: a.pane.TerminalID, Request: "say hi!\n\tthen stop"})
			if err != nil || res.SubmissionOutcome != OutcomeAccepted {
				t.Fatalf("plain send after the refusals = %+v, %v", res, err)
			}
		})
	}
}
