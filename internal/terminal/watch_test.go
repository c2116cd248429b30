package terminal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/terminal/watch"
	"github.com/clawconnect/clawconnect/termapi"
)

// StartedTask implements TaskFinder for the fake: the first human record
// after the anchor.
func (r fakeReader) StartedTask(_ context.Context, p agents.Pane, anchor json.RawMessage) (*agents.Acceptance, error) {
	var an fakeAnchor
	if err := json.Unmarshal(anchor, &an); err != nil {
		return nil, err
	}
	a := r.agentOf(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, rec := range a.records[min(an.Offset, len(a.records)):] {
		if rec.kind == "human" {
			return &agents.Acceptance{NativeTurnID: rec.turn, ThreadID: a.thread}, nil
		}
	}
	return nil, nil
}

// ActiveTaskAnchor implements TaskFinder for the fake: the last human
// record that has no completion.
func (r fakeReader) ActiveTaskAnchor(_ context.Context, p agents.Pane, id agents.Identity) (json.RawMessage, error) {
	a := r.agentOf(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := len(a.records) - 1; i >= 0; i-- {
		if a.records[i].kind == "complete" {
			break
		}
		if a.records[i].kind == "human" {
			return json.Marshal(fakeAnchor{Offset: i, Thread: id.ThreadID})
		}
	}
	return nil, errors.New("no running task")
}

// humanStarts types a task into the fake pane as a human would.
func (f *fakeAgent) humanStarts(turn string) {
	f.set(func(f *fakeAgent) {
		f.records = append(f.records, fakeRecord{kind: "human", turn: turn, text: "typed by a human"})
		f.activity = "working"
	})
}

// humanTaskEnds writes the completion of the human's task.
func (f *fakeAgent) humanTaskEnds(turn, text string, failed bool) {
	f.set(func(f *fakeAgent) {
		f.records = append(f.records, fakeRecord{kind: "complete", turn: turn, text: text, failed: failed})
		f.activity, f.approval = "idle", nil
	})
}

const watchOrigin = "agent:main:watcher"

func (r *rig) notifications(watchID string) []string {
	r.t.Helper()
	cbs, err := r.st.TurnCallbacks(r.t.Context(), watchID, 50)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for i := len(cbs) - 1; i >= 0; i-- {
		var m outbox.CallbackMessage
		if err := json.Unmarshal(cbs[i].Message, &m); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s/%s/%s", cbs[i].Kind, m.Type, m.Body))
	}
	slices.Sort(out) // rows of one millisecond have no order
	return out
}

func (r *rig) waitWatch(id, status string) watch.View {
	r.t.Helper()
	var v watch.View
	r.until("watch "+id+" is "+status, func() bool {
		var err error
		v, err = r.svc.WatchStatus(r.t.Context(), id)
		if err != nil {
			r.t.Fatal(err)
		}
		return v.Status == status
	})
	return v
}

func TestWatchHumanTaskNotifiesCompletionOnce(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 301)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	v, err := r.svc.Watch(ctx, watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin})
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != store.WatchActive || v.TaskSeen || v.SessionID == "" {
		t.Fatalf("new watch = %+v", v)
	}
	if _, err := r.svc.Watch(ctx, watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin}); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("second watch of the pane: %v, want ErrRefused", err)
	}
	a.humanStarts("h-1")
	r.until("the watch saw the human's task", func() bool {
		got, _ := r.svc.WatchStatus(ctx, v.WatchID)
		return got.NativeTurnID == "h-1"
	})
	a.humanTaskEnds("h-1", "FAKE-REPLY: done by hand", false)
	got := r.waitWatch(v.WatchID, store.WatchCompleted)
	if got.Settlement == nil || got.Settlement.Text != "FAKE-REPLY: done by hand" || got.Settlement.Kind != watch.KindCompleted {
		t.Fatalf("settled watch = %+v", got)
	}
	want := []string{"watch_completed/done/FAKE-REPLY: done by hand"}
	if diff := cmp.Diff(want, r.notifications(v.WatchID)); diff != "" {
		t.Fatalf("notifications (-want +got):\n%s", diff)
	}
	cb := got.Notifications[0]
	if cb.SessionKey != watchOrigin || cb.Status != termapi.CallbackPending || cb.MessageID != wantWatchMessageID(v.WatchID, watch.KindCompleted, "h-1") {
		t.Fatalf("notification = %+v", cb)
	}
	// A later task in the pane notifies nothing more; the pane is free
	// for a new watch.
	a.humanStarts("h-2")
	a.humanTaskEnds("h-2", "second", false)
	if diff := cmp.Diff(want, r.notifications(v.WatchID)); diff != "" {
		t.Fatalf("notifications after a second task (-want +got):\n%s", diff)
	}
	if _, err := r.svc.Watch(ctx, watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin}); err != nil {
		t.Fatalf("watch after the first settled: %v", err)
	}
}

// watchRunningTask starts a host over a's pane, where a human started task
// h-1 before the watch was asked for, and returns the watch once it joined
// that task.
func watchRunningTask(t *testing.T, a *fakeAgent) (*rig, watch.View) {
	t.Helper()
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	a.humanStarts("h-1")
	v, err := r.svc.Watch(t.Context(), watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin})
	if err != nil {
		t.Fatal(err)
	}
	r.until("the watch joined the running task", func() bool {
		got, _ := r.svc.WatchStatus(t.Context(), v.WatchID)
		return got.NativeTurnID == "h-1"
	})
	return r, v
}

func TestWatchApprovalThenFailure(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 302)
	r, v := watchRunningTask(t, a)
	a.set(func(f *fakeAgent) {
		f.approval = &agents.ScreenApproval{Fingerprint: "fp-1", Kind: "run_command", Command: "ls", Approvable: true}
	})
	r.until("one approval notification", func() bool { return len(r.notifications(v.WatchID)) == 1 })
	a.poke() // the same prompt seen again notifies nothing
	a.humanTaskEnds("h-1", "interrupted", true)
	r.waitWatch(v.WatchID, store.WatchFailed)
	want := []string{
		"watch_approval/question/The watched codex task asks for approval (run_command); answer it in the terminal.",
		"watch_failed/error/The codex task stopped: interrupted",
	}
	if diff := cmp.Diff(want, r.notifications(v.WatchID)); diff != "" {
		t.Fatalf("notifications (-want +got):\n%s", diff)
	}
}

// TestWatchQuestionIsNotifiedOnce: a question dialog in the watched task
// (Claude Code's AskUserQuestion, Codex's request_user_input) is reported
// once, as an approval prompt is, with the question and its options and
// the word that it is answered in the terminal; the task's end follows.
func TestWatchQuestionIsNotifiedOnce(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 309)
	r, v := watchRunningTask(t, a)
	a.set(func(f *fakeAgent) { f.question = colorQuestion(true) })
	r.until("one question notification", func() bool { return len(r.notifications(v.WatchID)) == 1 })
	a.poke() // the same dialog seen again notifies nothing
	a.humanTaskEnds("h-1", "Blue it is", false)
	r.waitWatch(v.WatchID, store.WatchCompleted)
	want := []string{
		"watch_completed/done/Blue it is",
		"watch_question/question/The watched claude task asks: Which color should the widget be?\n1. Red — Choose Red\n2. Blue (Recommended)\nAnswer it in the terminal.",
	}
	if diff := cmp.Diff(want, r.notifications(v.WatchID)); diff != "" {
		t.Fatalf("notifications (-want +got):\n%s", diff)
	}
	cbs, err := r.st.TurnCallbacks(t.Context(), v.WatchID, 10)
	if err != nil {
		t.Fatal(err)
	}
	var m outbox.CallbackMessage
	for _, cb := range cbs {
		if cb.Kind == "watch_question" {
			if err := json.Unmarshal(cb.Message, &m); err != nil {
				t.Fatal(err)
			}
		}
	}
	q, _ := m.Metadata["question"].(map[string]any)
	if !m.RequiresResponse || m.Metadata["reason"] != "question" || m.Metadata["question_fingerprint"] != "q-1" || q == nil || len(q["options"].([]any)) != 2 {
		t.Fatalf("question notification = %+v", m)
	}
}

func TestUnwatchStopsNotifications(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 303)
	r := newRig(t, a)
	h := r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	v, err := r.svc.Watch(ctx, watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin})
	if err != nil {
		t.Fatal(err)
	}
	a.humanStarts("h-1")
	r.until("the watch saw the task", func() bool {
		got, _ := r.svc.WatchStatus(ctx, v.WatchID)
		return got.TaskSeen
	})
	u, err := r.svc.Unwatch(ctx, a.pane.TerminalID)
	if err != nil {
		t.Fatal(err)
	}
	if u.WatchID != v.WatchID || u.Status != store.WatchCancelled {
		t.Fatalf("unwatch = %+v", u)
	}
	a.humanTaskEnds("h-1", "done", false)
	r.until("the watch's follower stopped", func() bool { return h.Monitoring() == 0 })
	if got := r.notifications(v.WatchID); len(got) != 0 {
		t.Fatalf("notifications after unwatch: %v", got)
	}
	if again, err := r.svc.Unwatch(ctx, v.WatchID); err != nil || again.Status != store.WatchCancelled {
		t.Fatalf("second unwatch = %+v, %v", again, err)
	}
	if _, err := r.svc.Unwatch(ctx, a.pane.TerminalID); !errors.Is(err, termapi.ErrNotFound) {
		t.Fatalf("unwatch of an unwatched pane: %v, want ErrNotFound", err)
	}
}

func TestWatchRefusals(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 304)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		req  watch.Request
		want error
	}{
		{"no origin", watch.Request{TerminalID: a.pane.TerminalID}, termapi.ErrBadInput},
		{"bad origin", watch.Request{TerminalID: a.pane.TerminalID, OriginSession: "a b"}, termapi.ErrBadInput},
		{"bad terminal", watch.Request{TerminalID: "pane-1", OriginSession: watchOrigin}, termapi.ErrBadInput},
		{"negative timeout", watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin, Timeout: -time.Second}, termapi.ErrBadInput},
	} {
		if _, err := r.svc.Watch(ctx, tc.req); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	a.set(func(f *fakeAgent) { f.draft = "half typed" })
	if _, err := r.svc.Watch(ctx, watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin}); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("watch of a pane with a draft: %v, want ErrRefused", err)
	}
	a.set(func(f *fakeAgent) { f.draft = "" })
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "ours"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Watch(ctx, watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin}); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("watch while Turn %s runs: %v, want ErrRefused", res.TurnID, err)
	}
	active, _ := r.st.ActiveWatches(ctx, 10)
	if len(active) != 0 {
		t.Fatalf("refusals created watches: %v", active)
	}
}

func TestWatchResumedByANewHostAndTimesOut(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 305)
	r := newRig(t, a)
	ctx := t.Context()
	// No host runs: the watch is only a store record.
	v, err := r.svc.Watch(ctx, watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	svc := r.service()
	r.svc = svc
	r.start(svc, hostpkg.Options{Owner: "host-2"})
	got := r.waitWatch(v.WatchID, store.WatchTimedOut)
	if got.Settlement == nil || got.Settlement.Match != "hard_timeout" {
		t.Fatalf("timed out watch = %+v", got)
	}
	if n := r.notifications(v.WatchID); len(n) != 1 || n[0][:24] != "watch_timed_out/error/Th" {
		t.Fatalf("notifications = %v", n)
	}
}

func TestWatchYieldsToATurnOfOursAndBlocksInspect(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 306)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	v, err := r.svc.Watch(ctx, watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Inspect(ctx, a.pane.TerminalID); !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), v.WatchID) {
		t.Fatalf("inspect of a watched pane: %v, want a refusal naming %s", err, v.WatchID)
	}
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "ours"})
	if err != nil {
		t.Fatal(err)
	}
	got := r.waitWatch(v.WatchID, store.WatchInvalidated)
	if got.Settlement.Match != "clawconnect_turn_sent" || got.NativeTurnID != "" {
		t.Fatalf("watch after our send = %+v", got)
	}
	a.finish("our reply", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	if n := r.notifications(v.WatchID); len(n) != 1 || !strings.HasPrefix(n[0], "watch_invalidated/error/A ClawConnect Turn") {
		t.Fatalf("notifications = %v", n)
	}
}

// A thread transition ends a watch of the pane: the watched task belonged
// to the thread the pane left, so the watch is invalidated and its
// requester told once why (whether the watcher sees the transition start
// or only its commit), rather than refusing the transition (a watch
// may wait for hours on a task nobody runs) or stopping silently (the
// requester would wait for a callback that never comes). The next follow
// send then lands in the transition's Session.
func TestNewThreadInvalidatesTheWatchWithOneNotification(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 307)
	a.thread = fakeThreadA
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	first, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "first"})
	if err != nil {
		t.Fatal(err)
	}
	a.finish("first done", false)
	r.waitStatus(first.TurnID, termapi.TurnIdle)
	w, err := r.svc.Watch(ctx, watch.Request{TerminalID: a.pane.TerminalID, OriginSession: watchOrigin})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := r.svc.NewThread(ctx, a.pane.TerminalID)
	if err != nil {
		t.Fatalf("new-thread while a watch is active: %v", err)
	}
	got := r.waitWatch(w.WatchID, store.WatchInvalidated)
	if got.Settlement == nil || (got.Settlement.Match != "thread_transition" && got.Settlement.Match != "binding_superseded") ||
		strings.Contains(got.Settlement.Text, "Turn (") {
		t.Fatalf("watch after the transition = %+v (settlement %+v)", got, got.Settlement)
	}
	a.set(func(f *fakeAgent) { f.lockOnly = true })
	res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "second"})
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID != tr.SessionID {
		t.Fatalf("send after the transition went to %s, want %s", res.SessionID, tr.SessionID)
	}
	a.finish("second done", false)
	r.waitStatus(res.TurnID, termapi.TurnIdle)
	if n := r.notifications(w.WatchID); len(n) != 1 || !strings.HasPrefix(n[0], "watch_invalidated/error/A thread transition") && !strings.HasPrefix(n[0], "watch_invalidated/error/The watched pane's session context changed") {
		t.Fatalf("notifications = %v (watch %+v, settlement %+v)", n, got, got.Settlement)
	}
}

// TestWatchesListsActiveWatches: Watches lists the active watches with the
// pane each follows, and drops a watch once it is unwatched.
func TestWatchesListsActiveWatches(t *testing.T) {
	a, b := newFakeAgent(termapi.AgentCodex, 311), newFakeAgent(termapi.AgentClaude, 312)
	r := newRig(t, a, b)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	if got, err := r.svc.Watches(ctx, 0); err != nil || len(got) != 0 {
		t.Fatalf("watches before any watch = %+v, %v", got, err)
	}
	v, err := r.svc.Watch(ctx, watch.Request{TerminalID: b.pane.TerminalID, OriginSession: watchOrigin})
	if err != nil {
		t.Fatal(err)
	}
	c := r.svc
	type row struct{ WatchID, Status, TerminalID, OriginSession string }
	want := []row{{v.WatchID, store.WatchActive, b.pane.TerminalID, watchOrigin}}
	got, err := c.Watches(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var rows []row
	for _, w := range got {
		rows = append(rows, row{w.WatchID, w.Status, w.TerminalID, w.OriginSession})
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("watches (-want +got):\n%s", diff)
	}
	if _, err := c.Unwatch(ctx, v.WatchID); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Watches(ctx, 10); err != nil || len(got) != 0 {
		t.Fatalf("watches after unwatch = %+v, %v", got, err)
	}
}

// wantWatchMessageID is the message id a watch notification must carry:
// the hash of its schema, watch, kind and evidence, so the same evidence
// always yields the same id (the plugin deduplicates by it).
func wantWatchMessageID(watchID, kind, evidence string) string {
	b, _ := json.Marshal(map[string]any{"schema": "clawconnect/terminal-watch-notification", "version": 1,
		"watch_id": watchID, "kind": kind, "evidence_fingerprint": evidence})
	sum := sha256.Sum256(b)
	return "msg-watch-" + hex.EncodeToString(sum[:])[:32]
}
