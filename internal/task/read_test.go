package task

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/taskapi"
	"github.com/google/go-cmp/cmp"
)

func TestPollModeWakesOnLifecycle(t *testing.T) {
	e := newEnv(t)
	m := e.manager(nil)
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "x", SessionKey: "agent:main:poll"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	got := make(chan *taskapi.Snapshot, 1)
	go func() {
		s, err := m.Check(t.Context(), CheckRequest{JobID: res.JobID, Mode: CheckPoll, WaitMs: waitMs(60000)})
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	e.gw.emit(res.JobID, Event{Kind: EventLifecycle, Phase: "model"})
	s := <-got
	if s.IsTerminal || !s.ContinuePolling || s.LogCursor != 1 || len(s.Logs) != 1 || s.Logs[0].Text != "Agent lifecycle: model" {
		t.Fatalf("poll snapshot %+v", s)
	}
	if s.PollCount != 1 || s.LastPollAt == 0 {
		t.Fatalf("a running task's poll count %d at %d", s.PollCount, s.LastPollAt)
	}
	if s.NextAction == nil || s.NextAction.Tool != "check_task" || CheckText(s) != "Still running. Poll again with knownLogCount=1." {
		t.Fatalf("next action %+v text %q", s.NextAction, CheckText(s))
	}
	// Tool chatter wakes a poll only after the debounce.
	e.gw.emit(res.JobID, Event{Kind: EventToolStart, Tool: "Read", Args: json.RawMessage(`{"file_path":"x"}`)})
	s, err = m.Check(t.Context(), CheckRequest{JobID: res.JobID, Mode: CheckPoll, KnownLogCount: 1, WaitMs: waitMs(60000)})
	if err != nil {
		t.Fatal(err)
	}
	if s.LogCursor != 2 || len(s.Logs) != 1 || s.Logs[0].Text != "Read: x" {
		t.Fatalf("debounced poll %+v", s.Logs)
	}
	// A wait-mode check with a short wait times out non-terminal.
	s, err = m.Check(t.Context(), CheckRequest{JobID: res.JobID, WaitMs: waitMs(1)})
	if err != nil || s.IsTerminal || !s.ContinuePolling {
		t.Fatalf("timed-out wait %+v %v", s, err)
	}
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
	await(t, m, res.JobID)
}

func TestGetTaskPresetsAndSessions(t *testing.T) {
	e := newEnv(t)
	// A clock whose every reading is a later millisecond, so the three
	// tasks' start times differ and "newest first" has one answer.
	var clock atomic.Int64
	m := e.manager(func(o *Options) {
		o.Now = func() time.Time {
			for {
				prev := clock.Load()
				next := max(time.Now().UnixMilli(), prev+1)
				if clock.CompareAndSwap(prev, next) {
					return time.UnixMilli(next)
				}
			}
		}
	})
	key := "agent:main:presets"
	var ids []string
	for i := range 3 {
		res, err := m.Submit(t.Context(), SubmitRequest{Task: fmt.Sprintf("task %d", i), SessionKey: key})
		if err != nil {
			t.Fatal(err)
		}
		e.gw.waitStarted(t, res.JobID)
		for j := range 4 {
			e.gw.emit(res.JobID, Event{Kind: EventLifecycle, Phase: fmt.Sprintf("p%d", j)})
		}
		e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: strings.Repeat("long answer ", 60)})
		await(t, m, res.JobID)
		ids = append(ids, res.JobID)
	}
	last := ids[2]
	tests := []struct {
		detail                   taskapi.Detail
		summary, updates, art, d bool
	}{
		{taskapi.DetailCore, false, false, false, false},
		{"", true, false, false, false},
		{taskapi.DetailSummary, true, false, false, false},
		{taskapi.DetailUpdates, false, true, false, false},
		{taskapi.DetailArtifacts, false, false, true, false},
		{taskapi.DetailDiagnostics, false, false, false, true},
		{taskapi.DetailFull, true, true, true, false},
		{taskapi.DetailFullWithDiagnostics, true, true, true, true},
	}
	for _, tc := range tests {
		t.Run(string(tc.detail), func(t *testing.T) {
			d, err := m.GetTask(t.Context(), last, tc.detail, 0)
			if err != nil {
				t.Fatal(err)
			}
			has := [4]bool{d.Summary != "", d.Updates != nil, d.Artifacts != nil, d.Diagnostics != nil}
			if diff := cmp.Diff([4]bool{tc.summary, tc.updates, tc.art, tc.d}, has); diff != "" {
				t.Fatalf("fields present (-want +got):\n%s", diff)
			}
			if d.TaskID != last || d.Status != "completed" || !d.IsTerminal {
				t.Fatalf("core fields %+v", d)
			}
		})
	}
	// get_task never bumps pollCount.
	d, err := m.GetTask(t.Context(), last, taskapi.DetailCore, 0)
	if err != nil || d.PollCount != 1 {
		t.Fatalf("pollCount %d %v", d.PollCount, err)
	}

	// get_session modes.
	snap, err := m.GetSession(t.Context(), SessionRequest{SessionID: key})
	if err != nil || !snap.Found || snap.JobID != last || snap.Events != nil {
		t.Fatalf("snapshot mode %+v %v", snap, err)
	}
	ev, err := m.GetSession(t.Context(), SessionRequest{SessionID: key, Mode: taskapi.ModeTail, Limit: 3, After: 1})
	if err != nil || len(ev.Events) != 3 || ev.Events[0].Seq != 2 || *ev.NextAfter != 4 {
		t.Fatalf("tail mode %+v %v", ev, err)
	}
	end, err := m.GetSession(t.Context(), SessionRequest{SessionID: key, Mode: taskapi.ModeTail, Limit: 3, After: 4})
	if err != nil || len(end.Events) != 0 || *end.NextAfter != 4 {
		t.Fatalf("exhausted tail %+v %v", end, err)
	}
	tasks, err := m.GetSession(t.Context(), SessionRequest{SessionID: key, Mode: taskapi.ModeTasks})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range tasks.Tasks {
		got = append(got, r.TaskID)
		if r.Status != taskapi.TaskDone || !r.SummaryTruncated || len([]rune(r.Summary)) != SummaryPreviewMax {
			t.Fatalf("row %+v", r)
		}
	}
	if diff := cmp.Diff([]string{ids[2], ids[1], ids[0]}, got); diff != "" {
		t.Fatalf("tasks newest first (-want +got):\n%s", diff)
	}
	list, err := m.ListSessions(t.Context(), 0, nil)
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].LastJobID != last || len([]rune(list.Sessions[0].LastSummary)) != ContinuationSummaryMax {
		t.Fatalf("list sessions %+v %v", list, err)
	}
}

func TestLazyRecheckFindsLateText(t *testing.T) {
	e := newEnv(t)
	m := e.manager(nil)
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	e.gw.end(res.JobID, Outcome{Status: OutcomeNoText})
	s := await(t, m, res.JobID)
	if s.Status != "completed_no_summary" {
		t.Fatalf("status %s", s.Status)
	}
	e.gw.setHistory(res.SessionKey, &History{Messages: []HistoryMessage{{Role: "assistant", Text: "late text", RunID: res.JobID}}})
	s, err = m.Check(t.Context(), CheckRequest{JobID: res.JobID})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != "completed" || s.Summary != "late text" || s.TerminalReason != "lazy-recheck-transcript" {
		t.Fatalf("after lazy re-check: %s %q %s", s.Status, s.Summary, s.TerminalReason)
	}
}

// TestConcurrentClientsLoseNothing: 10 clients submit and wait on 100
// tasks each (25 under the race detector, where the point is the detector
// watching the 10 at once) against an instant gateway whose events arrive
// before StartRun even returns; every task ends with its own answer.
func TestConcurrentClientsLoseNothing(t *testing.T) {
	e := newEnv(t)
	e.gw.instant = func(req RunRequest) Outcome { return Outcome{Status: OutcomeOK, Text: "answer:" + req.IdempotencyKey} }
	m := e.manager(nil)
	const clients = 10
	each := 100
	if raceEnabled {
		each = 25
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients*each)
	for range clients {
		wg.Go(func() {
			for range each {
				res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
				if err != nil {
					errs <- err
					return
				}
				s, err := m.Check(t.Context(), CheckRequest{JobID: res.JobID, WaitMs: waitMs(10000)})
				if err != nil {
					errs <- err
					return
				}
				if s.Status != "completed" || s.Summary != "answer:"+res.JobID {
					errs <- fmt.Errorf("task %s: %s %q", res.JobID, s.Status, s.Summary)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestFailedTaskKeepsItsReason: the reason a task failed (here the gateway
// refusing the run) is stored and read back in every get_task preset and in
// check_task, and a task submitted while the gateway is down says
// "connecting", not "reconnecting".
func TestFailedTaskKeepsItsReason(t *testing.T) {
	e := newEnv(t)
	e.gw.mu.Lock()
	e.gw.down = true
	e.gw.startErr = fmt.Errorf("dial ws://127.0.0.1:9: connection refused")
	e.gw.mu.Unlock()
	m := e.manager(nil)
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Upstream != "connecting" {
		t.Errorf("new task upstream = %q, want connecting", res.Upstream)
	}
	s := await(t, m, res.JobID)
	const want = "OpenClaw did not accept the task: dial ws://127.0.0.1:9: connection refused"
	if s.Status != "error" || s.Error != want {
		t.Fatalf("check_task: status %q error %q, want error %q", s.Status, s.Error, want)
	}
	for _, d := range []taskapi.Detail{taskapi.DetailCore, taskapi.DetailSummary, taskapi.DetailFull, taskapi.DetailDiagnostics} {
		g, err := m.GetTask(t.Context(), res.JobID, d, 0)
		if err != nil {
			t.Fatal(err)
		}
		if g.Error != want {
			t.Errorf("get_task %s: error %q, want %q", d, g.Error, want)
		}
	}
}

// TestSucceededTaskHasNoError: the error field stays empty for a task that
// did not fail.
func TestSucceededTaskHasNoError(t *testing.T) {
	e := newEnv(t)
	m := e.manager(nil)
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "fine"})
	await(t, m, res.JobID)
	g, err := m.GetTask(t.Context(), res.JobID, taskapi.DetailFull, 0)
	if err != nil || g.Error != "" || g.Status != "completed" {
		t.Fatalf("get_task %+v %v", g, err)
	}
}
