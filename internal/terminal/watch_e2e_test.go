package terminal

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox/outboxtest"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/termapi"
)

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// TestE2EInspectStatusCard: the real Codex 0.171.0 and Claude Code
// 2.1.332 TUIs show their /status card; Inspect reports version, model and
// native session id, and leaves the pane idle with an empty composer, ready
// for a send.
func TestE2EInspectStatusCard(t *testing.T) {
	for _, tc := range []struct {
		kind    realcli.Kind
		version string
	}{{realcli.Codex, "0.171.0"}, {realcli.ClaudeCode, "2.1.332"}} {
		t.Run(string(tc.kind), func(t *testing.T) {
			model := fakemodel.New(t, fakemodel.Options{})
			rp := startRealTUI(t, tc.kind, model)
			svc, st := newRealService(t, rp)
			runHost(t, svc)
			ctx := t.Context()
			// A managed Session first: inspect must not count as human
			// input, so its exact context stays sendable afterwards.
			first, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "Reply with ECHO=before-inspect"})
			if err != nil {
				t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
			}
			waitTurnStatus(t, svc, first.TurnID, 90*time.Second, termapi.TurnIdle)
			waitCheckpoint(t, st, first.SessionID)
			waitSendable(t, svc, rp)
			res, err := svc.Inspect(ctx, rp.pane.TerminalID)
			if err != nil {
				t.Fatalf("inspect: %v; screen:\n%s", err, rp.debug())
			}
			if res.Version != tc.version || res.Model != "fake-model" || !uuidPattern.MatchString(res.SessionID) ||
				res.Workspace != rp.pane.Cwd || !res.ComposerEmpty {
				t.Fatalf("inspect = %+v (pane cwd %s)", res, rp.pane.Cwd)
			}
			id, err := rp.agent.Identify(ctx, rp.pane)
			if err != nil || !strings.EqualFold(id.ThreadID, res.SessionID) {
				t.Fatalf("card session %s, native identity %+v, %v", res.SessionID, id, err)
			}
			sc := rp.agent.Screen(rp.screen())
			if sc.Activity != "idle" || !sc.ComposerEmpty || sc.Dialog {
				t.Fatalf("pane after inspect = %+v; screen:\n%s", sc, rp.debug())
			}
			t.Logf("%s card: version %s model %s session %s fields %d", tc.kind, res.Version, res.Model, res.SessionID, len(res.Fields))
			// The exact Session still takes a send.
			sent, err := svc.Send(ctx, termapi.SendRequest{SessionID: first.SessionID, Request: "Reply with ECHO=after-inspect"})
			if err != nil || sent.SubmissionOutcome != termapi.OutcomeAccepted {
				t.Fatalf("session_exact send after inspect: %+v, %v; screen:\n%s", sent, err, rp.debug())
			}
			if v := waitTurnStatus(t, svc, sent.TurnID, 90*time.Second, termapi.TurnIdle); v.Result.Text != "after-inspect" {
				t.Fatalf("turn after inspect = %+v", v)
			}
		})
	}
}

// TestE2EWatchHumanCodexTurn: a human types into the real Codex TUI (tmux
// send-keys); the watch reports exactly one completion through the outbox,
// delivered to the origin session; a watch joins a task that already runs;
// an approval in a watched task is one question; after unwatch nothing more
// is queued.
func TestE2EWatchHumanCodexTurn(t *testing.T) {
	rp, svc, st, gw, h := startWatchHost(t, realcli.Codex)
	ctx := t.Context()
	const S = "agent:main:watcher"
	cs := st

	waitWatch := func(id string, want ...string) watch.View {
		t.Helper()
		var v watch.View
		if !poll.WithinEveryOn(90*time.Second, 200*time.Millisecond, nextChangeOf(svc), func() bool {
			var err error
			if v, err = svc.WatchStatus(ctx, id); err != nil {
				t.Fatal(err)
			}
			return slices.Contains(want, v.Status)
		}) {
			t.Fatalf("watch %s is %s, want %v: %+v; screen:\n%s", id, v.Status, want, v, rp.debug())
		}
		return v
	}
	delivered := func(id string) *store.Callback {
		t.Helper()
		var cbs []*store.Callback
		if !poll.WithinEvery(30*time.Second, 100*time.Millisecond, func() bool {
			var err error
			if cbs, err = cs.TurnCallbacks(ctx, id, 10); err != nil {
				t.Fatal(err)
			}
			return len(cbs) == 1 && cbs[0].Status == termapi.CallbackDelivered
		}) {
			t.Fatalf("watch %s notifications: %+v", id, cbs)
		}
		return cbs[0]
	}

	// 1. Watch first, then the human types.
	w1, err := svc.Watch(ctx, watch.Request{TerminalID: rp.pane.TerminalID, OriginSession: S})
	if err != nil {
		t.Fatalf("watch: %v; screen:\n%s", err, rp.debug())
	}
	if err := rp.tui.Submit(ctx, "ECHO=typed-by-a-human"); err != nil {
		t.Fatal(err)
	}
	v := waitWatch(w1.WatchID, store.WatchCompleted, store.WatchFailed, store.WatchInvalidated, store.WatchTimedOut)
	if v.Status != store.WatchCompleted || v.Settlement.Text != "typed-by-a-human" || !v.TaskSeen {
		t.Fatalf("watch = %+v", v)
	}
	cb := delivered(w1.WatchID)
	if cb.SessionKey != S || cb.Kind != "watch_completed" || gw.Runs() != 1 {
		t.Fatalf("notification %+v, %d runs", cb, gw.Runs())
	}
	waitIdleAfter(t, rp, "typed-by-a-human")

	// 2. The human's task already runs when the watch is asked for.
	if err := rp.tui.Submit(ctx, "WAIT=2500 ECHO=joined-late"); err != nil {
		t.Fatal(err)
	}
	if _, err := rp.tui.WaitFor(ctx, "the task running", func(s string) bool { return rp.agent.Screen(s).Activity == "working" }); err != nil {
		t.Fatal(err)
	}
	w2, err := svc.Watch(ctx, watch.Request{TerminalID: rp.pane.TerminalID, OriginSession: S})
	if err != nil {
		t.Fatalf("watch a running task: %v; screen:\n%s", err, rp.debug())
	}
	if v := waitWatch(w2.WatchID, store.WatchCompleted, store.WatchFailed, store.WatchInvalidated); v.Status != store.WatchCompleted || v.Settlement.Text != "joined-late" {
		t.Fatalf("joined watch = %+v", v)
	}
	delivered(w2.WatchID)
	waitIdleAfter(t, rp, "joined-late")

	// 3. An approval in a watched task: one question; unwatch; the human
	// approves in the pane and the task ends, nothing more is queued.
	w3, err := svc.Watch(ctx, watch.Request{TerminalID: rp.pane.TerminalID, OriginSession: S})
	if err != nil {
		t.Fatal(err)
	}
	if err := rp.tui.Submit(ctx, "TOOLCALL: ESCALATE touch watched.txt"); err != nil {
		t.Fatal(err)
	}
	q := delivered(w3.WatchID)
	if q.Kind != "watch_approval" {
		t.Fatalf("approval notification = %+v", q)
	}
	if v, err := svc.Unwatch(ctx, rp.pane.TerminalID); err != nil || v.Status != store.WatchCancelled {
		t.Fatalf("unwatch = %+v, %v", v, err)
	}
	if err := rp.tui.Keys(ctx, codex.ApproveKey); err != nil {
		t.Fatal(err)
	}
	if _, err := rp.tui.WaitFor(ctx, "the approved task done", func(s string) bool {
		return strings.Contains(s, strings.TrimSpace(fakemodel.ToolResultPrefix)) && rp.agent.Screen(s).Activity == "idle"
	}); err != nil {
		t.Fatal(err)
	}
	poll.WithinEvery(10*time.Second, 50*time.Millisecond, func() bool { return h.Monitoring() == 0 })
	if cbs, _ := cs.TurnCallbacks(ctx, w3.WatchID, 10); len(cbs) != 1 {
		t.Fatalf("after unwatch the watch has %d notifications", len(cbs))
	}
	if got := gw.Runs(); got != 3 {
		t.Fatalf("origin session got %d runs, want 3 (two completions, one approval)", got)
	}
}

// startWatchHost starts kind's real TUI (with args) on the fake model and a monitor
// host over it whose outbox delivers to a fake OpenClaw.
func startWatchHost(t *testing.T, kind realcli.Kind, args ...string) (*realPane, *Service, store.Store, *outboxtest.Gateway, *hostpkg.Host) {
	t.Helper()
	rp := startRealTUI(t, kind, fakemodel.New(t, fakemodel.Options{}), args...)
	svc, st := newRealService(t, rp)
	gw := outboxtest.NewGateway()
	h := hostpkg.New(svc, hostpkg.Options{Store: svc.o.Store, Recheck: 2 * time.Second, Outbox: newTestOutbox(st, gw, "e2e", time.Now)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return rp, svc, st, gw, h
}

// TestE2EWatchJoinsRunningClaudeTask: a human's task already runs in the
// real Claude Code 2.1.332 TUI (typed after an earlier, finished one) when
// the watch is asked for; the watch joins it at its prompt record and
// reports exactly one completion, with the reply, to the origin session.
func TestE2EWatchJoinsRunningClaudeTask(t *testing.T) {
	rp, svc, st, gw, _ := startWatchHost(t, realcli.ClaudeCode)
	ctx := t.Context()
	const S = "agent:main:claude-watcher"

	// A finished human turn first: the join must not take its prompt.
	if err := rp.tui.Submit(ctx, "ECHO=claude-before"); err != nil {
		t.Fatal(err)
	}
	waitIdleAfter(t, rp, "claude-before")

	if err := rp.tui.Submit(ctx, "WAIT=2500 ECHO=claude-joined-late"); err != nil {
		t.Fatal(err)
	}
	if _, err := rp.tui.WaitFor(ctx, "the task running", func(s string) bool { return rp.agent.Screen(s).Activity == "working" }); err != nil {
		t.Fatal(err)
	}
	w, err := svc.Watch(ctx, watch.Request{TerminalID: rp.pane.TerminalID, OriginSession: S})
	if err != nil {
		t.Fatalf("watch a running Claude task: %v; screen:\n%s", err, rp.debug())
	}
	// The watch's anchor sits at the running task's prompt record.
	rec, err := st.GetWatch(ctx, w.WatchID)
	if err != nil {
		t.Fatal(err)
	}
	var anchor claude.Anchor
	if err := json.Unmarshal(rec.Anchor, &anchor); err != nil || anchor.Offset == 0 {
		t.Fatalf("watch anchor %s: %v", rec.Anchor, err)
	}
	joined, err := claude.ScanAcceptance(anchor, "WAIT=2500 ECHO=claude-joined-late")
	if err != nil || !joined.Accepted {
		t.Fatalf("the joined task's prompt after the watch's anchor: %+v, %v", joined, err)
	}
	if prompts, err := claude.PromptsAfter(anchor); err != nil || len(prompts) == 0 || prompts[0] != joined.TurnID {
		t.Fatalf("prompts after the watch's anchor = %v, %v; want %s first", prompts, err, joined.TurnID)
	}
	var v watch.View
	if !poll.WithinEveryOn(90*time.Second, 200*time.Millisecond, nextChangeOf(svc), func() bool {
		if v, err = svc.WatchStatus(ctx, w.WatchID); err != nil {
			t.Fatal(err)
		}
		return v.Status != store.WatchActive
	}) {
		t.Fatalf("watch still active: %+v; screen:\n%s", v, rp.debug())
	}
	if v.Status != store.WatchCompleted || v.Settlement.Text != "claude-joined-late" || !v.TaskSeen || v.NativeTurnID != joined.TurnID {
		t.Fatalf("joined watch = %+v; screen:\n%s", v, rp.debug())
	}
	cs := st
	var cbs []*store.Callback
	if !poll.WithinEvery(30*time.Second, 100*time.Millisecond, func() bool {
		if cbs, err = cs.TurnCallbacks(ctx, w.WatchID, 10); err != nil {
			t.Fatal(err)
		}
		if len(cbs) > 1 {
			t.Fatalf("watch %s notifications: %+v", w.WatchID, cbs)
		}
		return len(cbs) == 1 && cbs[0].Status == termapi.CallbackDelivered
	}) {
		t.Fatalf("watch %s notifications: %+v", w.WatchID, cbs)
	}
	if cb := cbs[0]; cb.SessionKey != S || cb.Kind != "watch_completed" || gw.Runs() != 1 {
		t.Fatalf("notification %+v, %d runs of the origin session", cb, gw.Runs())
	}
	waitIdleAfter(t, rp, "claude-joined-late")
}

// TestE2EWatchClaudeQuestion: a human's task in the real Claude Code
// 2.1.332 TUI asks a question in its dialog (AskUserQuestion); the watch
// reports it once, with the question and its options, to the origin
// session; the human picks Blue in the pane and the watch reports the
// task's completion, whose reply shows the choice.
func TestE2EWatchClaudeQuestion(t *testing.T) {
	watchQuestionE2E(t, realcli.ClaudeCode, "Which color should the widget be?", "--permission-mode", "default")
}

// TestE2EWatchCodexQuestion: the same for the real Codex 0.171.0 TUI's
// request_user_input dialog (started with the feature that offers it
// outside Plan mode).
func TestE2EWatchCodexQuestion(t *testing.T) {
	watchQuestionE2E(t, realcli.Codex, "Which color should the widget be", "--enable", codex.QuestionFeature)
}

// watchQuestionE2E watches a pane of kind whose human asks the fake model
// for question (options Red and Blue), then answers Blue in the pane.
func watchQuestionE2E(t *testing.T, kind realcli.Kind, question string, args ...string) {
	rp, svc, st, gw, _ := startWatchHost(t, kind, args...)
	ctx := t.Context()
	const S = "agent:main:question-watcher"
	w, err := svc.Watch(ctx, watch.Request{TerminalID: rp.pane.TerminalID, OriginSession: S})
	if err != nil {
		t.Fatalf("watch: %v; screen:\n%s", err, rp.debug())
	}
	if err := rp.tui.Submit(ctx, "QUESTION: "+question+" | Red | Blue"); err != nil {
		t.Fatal(err)
	}
	cs := st
	// notified waits until the watch's notifications of kinds are all
	// delivered, and returns their messages, oldest first.
	notified := func(kinds ...string) []outbox.CallbackMessage {
		t.Helper()
		var cbs []*store.Callback
		if !poll.WithinEvery(90*time.Second, 100*time.Millisecond, func() bool {
			var err error
			if cbs, err = cs.TurnCallbacks(ctx, w.WatchID, 10); err != nil {
				t.Fatal(err)
			}
			var got []string
			for i := len(cbs) - 1; i >= 0; i-- {
				if cbs[i].Status == termapi.CallbackDelivered {
					got = append(got, cbs[i].Kind)
				}
			}
			if strings.Join(got, ",") == strings.Join(kinds, ",") {
				return true
			}
			if len(cbs) > len(kinds) {
				t.Fatalf("watch %s notifications: %+v, want %v; screen:\n%s", w.WatchID, cbs, kinds, rp.debug())
			}
			return false
		}) {
			t.Fatalf("watch %s notifications: %+v, want %v; screen:\n%s", w.WatchID, cbs, kinds, rp.debug())
		}
		return queuedCallbacks(t, st, w.WatchID)
	}
	msgs := notified("watch_question")
	if m := msgs[0]; m.Type != MsgQuestion || !strings.Contains(m.Body, "The watched "+rp.pane.Agent+" task asks: "+question) ||
		!strings.Contains(m.Body, "2. Blue") || !strings.HasSuffix(m.Body, "Answer it in the terminal.") || m.Metadata["reason"] != "question" {
		t.Fatalf("question notification = %+v", m)
	}
	t.Logf("question notification: %s", msgs[0].Body)
	// The human answers in the pane (the dialog's second row). The TUI
	// ignores keys for a moment after it draws a dialog, so a key pressed
	// as soon as the notification arrived may be lost: press again while
	// the dialog stays, as a person would.
	for i := 0; ; i++ {
		if err := rp.tui.Keys(ctx, "2"); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := rp.tui.WaitFor(wctx, "the dialog answered", func(s string) bool { return rp.agent.Screen(s).Question == nil })
		cancel()
		if err == nil {
			break
		}
		if i == 4 {
			t.Fatalf("the question dialog stays after pressing 2: %v; screen:\n%s", err, rp.debug())
		}
	}
	msgs = notified("watch_question", "watch_completed")
	if m := msgs[1]; m.Type != MsgDone || !strings.Contains(m.Body, `"Blue"`) {
		t.Fatalf("completion notification = %+v", m)
	}
	if v, err := svc.WatchStatus(ctx, w.WatchID); err != nil || v.Status != store.WatchCompleted {
		t.Fatalf("watch = %+v, %v", v, err)
	}
	if got := gw.Runs(); got != 2 {
		t.Fatalf("origin session got %d runs, want 2 (the question, the completion)", got)
	}
}
