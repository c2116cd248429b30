package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/termapi"
)

func TestMessageIDDependsOnlyOnWatchKindAndEvidence(t *testing.T) {
	t.Parallel()
	id := messageID("watch-1", KindCompleted, "h-1")
	if !strings.HasPrefix(id, "msg-watch-") || len(id) != len("msg-watch-")+32 {
		t.Fatalf("messageID = %q, want msg-watch- and 32 hex digits", id)
	}
	if again := messageID("watch-1", KindCompleted, "h-1"); again != id {
		t.Errorf("the same evidence gave %q, then %q", id, again)
	}
	for _, other := range []string{messageID("watch-2", KindCompleted, "h-1"), messageID("watch-1", KindFailed, "h-1"),
		messageID("watch-1", KindCompleted, "h-2")} {
		if other == id {
			t.Errorf("a different watch, kind or evidence gave the same id %q", id)
		}
	}
}

func TestIDsTellWatchesFromTurns(t *testing.T) {
	t.Parallel()
	id := newID(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	if !IsID(id) || !strings.HasPrefix(id, "watch-20260101T120000-") {
		t.Errorf("newID = %q", id)
	}
	if IsID("turn-20260101T120000-1a2b3c4d") {
		t.Error("a Turn id was taken for a watch id")
	}
}

func TestQuestionBodyListsTheOptionsAndSaysWhereToAnswer(t *testing.T) {
	t.Parallel()
	q := &termapi.Question{Text: "Which file?", Options: []termapi.QuestionOption{{Number: 1, Label: "a.go"}, {Number: 2, Label: "b.go", Description: "the new one"}}}
	want := "The watched codex task asks: Which file?\n1. a.go\n2. b.go — the new one\nAnswer it in the terminal."
	if got := questionBody("codex", q); got != want {
		t.Errorf("questionBody =\n%s\nwant\n%s", got, want)
	}
}
