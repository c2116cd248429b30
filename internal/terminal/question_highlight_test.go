package terminal

import (
	"os"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestQuestionHighlightMovedIsTheSameQuestion: a person moving the
// highlight over the recorded Codex dialog does not make it a new
// question: one question callback, and a respond made for it still
// answers it.
func TestQuestionHighlightMovedIsTheSameQuestion(t *testing.T) {
	t.Parallel()
	var shown []string
	for _, name := range []string{"screen-first.txt", "screen-first-other.txt"} {
		text, err := os.ReadFile("agents/codex/testdata/question-several/" + name)
		if err != nil {
			t.Fatal(err)
		}
		shown = append(shown, string(text))
	}
	a := newFakeAgent(termapi.AgentCodex, 1750)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	id := sendFrom(t, r, a, termapi.SendRequest{})
	a.set(func(f *fakeAgent) { f.question = codex.ParseScreen(shown[0]).Question })
	r.waitStatus(id, termapi.TurnWaitingForOpenClaw)
	for _, text := range []string{shown[1], shown[0], shown[1]} {
		a.mu.Lock()
		seen := a.captures
		a.question = codex.ParseScreen(text).Question
		a.mu.Unlock()
		a.poke()
		poll.Until(t, 10*time.Second, "the monitor's next look", func() bool {
			a.mu.Lock()
			defer a.mu.Unlock()
			return a.captures > seen+1
		})
	}
	if cbs := callbacksOf(t, r, id); len(cbs) != 1 || cbs[0].Metadata["kind"] != KindQuestion {
		t.Fatalf("callbacks = %+v, want one question", cbs)
	}
	if _, err := r.svc.Respond(t.Context(), id, "Red"); err != nil {
		t.Fatalf("respond to the question as first reported: %v", err)
	}
}
