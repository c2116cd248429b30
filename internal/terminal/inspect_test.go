package terminal

import (
	"errors"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/termapi"
)

// Version implements Inspector for the fake: a pane whose cwd is /old runs
// an unproven version.
func (r fakeReader) Version(p agents.Pane) (string, error) {
	if p.Cwd == "/old" {
		return "0.100.0", nil
	}
	return "0.171.0", nil
}

func (r fakeReader) ProvenVersions() []string                     { return []string{"0.171.0"} }
func (r fakeReader) ParseStatus(string) (agents.StatusCard, bool) { return agents.StatusCard{}, false }
func (r fakeReader) DismissKeys() []string                        { return nil }

func TestInspectRefusesBeforeTyping(t *testing.T) {
	old := newFakeAgent(termapi.AgentCodex, 401)
	old.pane.Cwd = "/old"
	busy := newFakeAgent(termapi.AgentCodex, 402)
	busy.activity = "working"
	draft := newFakeAgent(termapi.AgentCodex, 403)
	draft.draft = "half typed"
	ours := newFakeAgent(termapi.AgentCodex, 404)
	r := newRig(t, old, busy, draft, ours)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	if _, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: ours.pane.TerminalID, Request: "ours"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		a    *fakeAgent
		want string
	}{
		{"unproven version", old, "0.100.0 is not a version whose status card was proven"},
		{"busy", busy, "busy"},
		{"draft", draft, "unsent text"},
		{"our Turn runs", ours, "of ClawConnect runs in this pane"},
	} {
		before := len(tc.a.sentKeys())
		_, err := r.svc.Inspect(ctx, tc.a.pane.TerminalID)
		if !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
		if got := tc.a.sentKeys(); len(got) != before {
			t.Errorf("%s: keys were sent: %v", tc.name, got[before:])
		}
		tc.a.mu.Lock()
		d := tc.a.draft
		tc.a.mu.Unlock()
		if strings.Contains(d, statusCommand) {
			t.Errorf("%s: %s was typed", tc.name, statusCommand)
		}
	}
	if _, err := r.svc.Inspect(ctx, "pane-7"); !errors.Is(err, termapi.ErrBadInput) {
		t.Errorf("malformed terminal id: %v, want ErrBadInput", err)
	}
}
