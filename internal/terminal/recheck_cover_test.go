package terminal

import (
	"context"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/termapi"
)

// closableOutput serves fake panes whose output watch the test ends.
type closableOutput struct {
	*fakeTerminals
	out chan struct{}
}

func (c closableOutput) WatchOutput(context.Context, agents.Pane) (<-chan struct{}, error) {
	return c.out, nil
}

// TestFollowerCoveredWhileBothSourcesLive: a Turn's follower counts as
// covered while its session files and its pane output are watched, and
// falls back to the short re-check once the output watch ends.
func TestFollowerCoveredWhileBothSourcesLive(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 191)
	r := newRig(t, a)
	res, err := r.svc.Send(t.Context(), termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ft := closableOutput{fakeTerminals: r.ft, out: make(chan struct{})}
	svc := NewService(Options{Store: r.st, Terminals: ft, Agents: map[string]agents.Agent{termapi.AgentCodex: fakeReader{r.ft}}})
	h := r.start(svc, hostpkg.Options{})
	if !poll.Within(10*time.Second, func() bool { c, _ := h.Covered(res.TurnID); return c }) {
		t.Fatal("the follower of a pane with watched files and output is not covered")
	}
	close(ft.out)
	if !poll.Within(10*time.Second, func() bool { c, sub := h.Covered(res.TurnID); return sub && !c }) {
		t.Fatal("the follower whose output watch ended is still covered")
	}
}
