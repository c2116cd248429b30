package codex_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
)

// questionDir holds the user-input dialog's recording, apart from the main
// one: each recording test replaces only its own files.
const questionDir = "testdata/question"

// CodexQuestionArgs start the Codex 0.171.0 TUI with request_user_input
// offered outside Plan mode: without the feature the tool answers the
// model "request_user_input is unavailable in Default mode" and no dialog
// is shown.
var CodexQuestionArgs = []string{"--enable", "default_mode_request_user_input"}

// TestRecordRealTUIQuestion drives the real Codex TUI through a
// request_user_input dialog asked by the fake model (QUESTION: …),
// answered by pressing an option's digit; it records the screens and the
// rollout and checks the parsers on them. With -update the recording
// replaces testdata/question/.
func TestRecordRealTUIQuestion(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{Args: []string{"--enable", codex.QuestionFeature}})
	dir := t.TempDir()
	if *update {
		dir = questionDir
		_ = os.RemoveAll(dir)
	}
	base := filepath.Dir(tui.CLI.WorkDir)
	g := &realtui.Golden{Dir: dir, Replace: [][2]string{{base, filepath.Dir(goldenCwd)}}}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	rollout := func() string {
		t.Helper()
		files, err := tui.SessionFiles()
		if err != nil || len(files) != 1 {
			t.Fatalf("rollouts %v (%v), want exactly one", files, err)
		}
		return files[0]
	}
	size := func() int {
		data, _ := os.ReadFile(rollout())
		return len(g.Sanitize(string(data)))
	}
	// A first prompt opens the rollout, so the question's turn has an
	// ordinary anchor.
	if err := tui.Submit(ctx, "ECHO=ready"); err != nil {
		t.Fatal(err)
	}
	if _, err := tui.WaitStable(ctx, "the first reply", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "• ready") && tui.Idle(s)
	}); err != nil {
		t.Fatal(err)
	}
	waitRecord(ctx, t, rollout, `"task_complete"`, 1)
	live := newLive(t, tui)
	m := goldenManifest{Cwd: goldenCwd}

	req := "QUESTION: Which color should the widget be | Red | Blue"
	turn := goldenTurn{Name: "question", Request: req, Offset: size(), Rollout: "rollout-question.jsonl", Pending: "rollout-question-pending.jsonl"}
	anchor := live.anchor()
	if err := tui.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	asked, err := tui.WaitStable(ctx, "the question dialog", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "enter to submit answer")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Write("screen-question.txt", []byte(asked)); err != nil {
		t.Fatal(err)
	}
	sc := codex.ParseScreen(asked)
	if sc.Activity != screen.AwaitingAnswer || sc.Question == nil || !sc.Question.Answerable || sc.Question.Options[1].Label != "Blue" {
		t.Fatalf("live question screen parsed as %+v %+v", sc, sc.Question)
	}
	if _, err := g.CopyFile(turn.Pending, rollout()); err != nil {
		t.Fatal(err)
	}
	if err := tui.Keys(ctx, "2"); err != nil {
		t.Fatal(err)
	}
	done, err := tui.WaitStable(ctx, "the reply", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, `"Blue"`) && tui.Idle(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Write("screen-question-answered.txt", []byte(done)); err != nil {
		t.Fatal(err)
	}
	waitRecord(ctx, t, rollout, `"task_complete"`, 2)
	if _, err := g.CopyFile(turn.Rollout, rollout()); err != nil {
		t.Fatal(err)
	}
	for _, r := range model.Requests() {
		if r.IsToolResult {
			turn.Reply = r.Reply
		}
	}
	if !strings.Contains(turn.Reply, `"Blue"`) {
		t.Fatalf("reply %q does not show the answer", turn.Reply)
	}
	live.check(anchor, req, turn.Reply)
	m.Turns = append(m.Turns, turn)
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := g.Write("manifest.json", append(data, '\n')); err != nil {
		t.Fatal(err)
	}
	checkQuestionGoldens(t, dir)
}

// severalDir holds the recording of a dialog of two questions, the first
// answered with a typed note on "None of the above".
const severalDir = "testdata/question-several"

// severalRequest asks two questions in one request_user_input call.
const severalRequest = "QUESTION: Which color | Red | Blue || Which size | Small | Large"

// TestRecordRealTUIQuestionSeveral drives the real Codex TUI through a
// request_user_input dialog of two questions: the first answered by moving
// to "None of the above", opening its note with Tab and typing it, the
// second by a digit. It records each screen and the tool result the model
// received, and checks the parser on them. With -update the recording
// replaces testdata/question-several/.
func TestRecordRealTUIQuestionSeveral(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{Args: []string{"--enable", codex.QuestionFeature}})
	dir := t.TempDir()
	if *update {
		dir = severalDir
		_ = os.RemoveAll(dir)
	}
	base := filepath.Dir(tui.CLI.WorkDir)
	g := &realtui.Golden{Dir: dir, Replace: [][2]string{{base, filepath.Dir(goldenCwd)}}}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	// step presses keys (or types text) and records the screen once it
	// satisfies ok.
	step := func(name string, act func() error, ok func(string, *screen.Question) bool) {
		t.Helper()
		if err := act(); err != nil {
			t.Fatal(err)
		}
		shown, err := tui.WaitStable(ctx, name, 300*time.Millisecond, func(s string) bool { return ok(s, codex.ParseScreen(s).Question) })
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Write(name, []byte(shown)); err != nil {
			t.Fatal(err)
		}
	}
	step("screen-first.txt", func() error { return tui.Submit(ctx, severalRequest) },
		func(_ string, q *screen.Question) bool { return q != nil && q.Position == 1 })
	step("screen-first-other.txt", func() error { return tui.Keys(ctx, "Down", "Down") },
		func(_ string, q *screen.Question) bool { return q != nil && q.Selected == 3 })
	step("screen-first-notes.txt", func() error { return tui.Keys(ctx, "Tab") },
		func(_ string, q *screen.Question) bool { return q != nil && q.Typing })
	step("screen-first-typed.txt", func() error { return tui.Type(ctx, "Green please") },
		func(s string, q *screen.Question) bool {
			return q != nil && q.Typing && strings.Contains(s, "› Green please")
		})
	step("screen-second.txt", func() error { return tui.Keys(ctx, "Enter") },
		func(_ string, q *screen.Question) bool { return q != nil && q.Position == 2 })
	done, err := func() (string, error) {
		if err := tui.Keys(ctx, "2"); err != nil {
			return "", err
		}
		return tui.WaitStable(ctx, "the reply", 300*time.Millisecond, func(s string) bool {
			return strings.Contains(s, "FAKE-TOOL-RESULT") && tui.Idle(s)
		})
	}()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Write("screen-answered.txt", []byte(done)); err != nil {
		t.Fatal(err)
	}
	var reply string
	for _, r := range model.Requests() {
		if r.IsToolResult {
			reply = r.Reply
		}
	}
	if err := g.Write("reply.txt", []byte(reply+"\n")); err != nil {
		t.Fatal(err)
	}
	checkSeveralGoldens(t, dir)
}
