package terminal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestE2ERefusesKeystrokes sends the requests that act on a pane instead
// of asking the agent (keystrokeRequests) to the real Claude Code and Codex
// TUIs, one TUI each: every one is refused as bad input naming the
// character, nothing reaches the pane (the composer stays empty, the same
// agent process runs, no shell command ran), and a plain request still
// goes through. A request the composer does not show as typed ("?" opens
// the shortcuts instead) ends not_accepted with Enter never pressed.
func TestE2ERefusesKeystrokes(t *testing.T) {
	for _, kind := range []realcli.Kind{realcli.ClaudeCode, realcli.Codex} {
		t.Run(string(kind), func(t *testing.T) {
			model := fakemodel.New(t, fakemodel.Options{})
			rp := startRealTUI(t, kind, model)
			svc, _ := newRealService(t, rp)
			runHost(t, svc)
			ctx := t.Context()
			proof := filepath.Join(rp.tui.CLI.WorkDir, "proof.txt")
			untouched := func(t *testing.T) {
				t.Helper()
				panes, err := rp.terms.Discover(ctx)
				if err != nil || len(panes) != 1 || panes[0].PID != rp.pane.PID {
					t.Fatalf("the agent process is not the one that started (panes %+v, %v); screen:\n%s", panes, err, rp.debug())
				}
				if s := rp.agent.Screen(rp.screen()); s.Activity != "idle" || !s.ComposerEmpty {
					t.Fatalf("the pane is not idle with an empty composer: %+v; screen:\n%s", s, rp.debug())
				}
				if _, err := os.Stat(proof); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("a shell command ran in the pane (%s: %v)", proof, err)
				}
			}
			for _, k := range keystrokeRequests {
				t.Run(k.name, func(t *testing.T) {
					res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: k.text})
					if !errors.Is(err, termapi.ErrBadInput) || !strings.Contains(err.Error(), k.says) || res.TurnID != "" {
						t.Errorf("send %q = %+v, %v; want bad input saying %q", k.text, res, err, k.says)
					}
					t.Logf("send %q: %v", k.text, err)
					_, err = svc.Respond(ctx, "turn-20260101T000000-abcdef12", k.text)
					if !errors.Is(err, termapi.ErrBadInput) || !strings.Contains(err.Error(), k.says) {
						t.Errorf("respond %q = %v; want bad input saying %q", k.text, err, k.says)
					}
					untouched(t)
				})
			}
			t.Run("draft not as typed", func(t *testing.T) {
				res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "?"})
				if !errors.Is(err, termapi.ErrRefused) || res.SubmissionOutcome != termapi.OutcomeNotAccepted || !strings.Contains(err.Error(), "so Enter was not pressed") {
					t.Fatalf("send \"?\" = %+v, %v; screen:\n%s", res, err, rp.debug())
				}
				t.Logf("send %q: %+v, %v", "?", res, err)
				if v, err := svc.Status(ctx, res.TurnID); err != nil || v.Status != termapi.TurnFailed {
					t.Fatalf("turn = %+v, %v", v, err)
				}
				untouched(t)
			})
			// Plain requests still go through, the large paste checked by
			// the placeholder the composer draws for it.
			var paste strings.Builder
			for i := range 40 {
				fmt.Fprintf(&paste, "line %02d\tof a large pasted request\n", i)
			}
			paste.WriteString("ECHO=paste-ok")
			for _, req := range []struct{ name, text, reply string }{
				{"plain request", "Reply with ECHO=still-here\n\tplease!", "still-here"},
				{"tab on one line", "Reply with ECHO=tab-ok\tplease", "tab-ok"},
				{"large paste", paste.String(), "paste-ok"},
			} {
				t.Run(req.name, func(t *testing.T) {
					waitSendable(t, svc, rp)
					res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: req.text})
					if err != nil || res.SubmissionOutcome != termapi.OutcomeAccepted {
						t.Fatalf("send = %+v, %v; screen:\n%s", res, err, rp.debug())
					}
					if v := waitTurnStatus(t, svc, res.TurnID, 90*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled); v.Status != termapi.TurnIdle || v.Result.Text != req.reply {
						t.Fatalf("turn = %+v; screen:\n%s", v, rp.debug())
					}
				})
			}
			if _, err := os.Stat(proof); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a shell command ran in the pane (%s: %v)", proof, err)
			}
		})
	}
}
