package task

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
	"github.com/clawconnect/clawconnect/taskapi"
)

// TestMain runs the tests, stops the shared real gateway (started only by
// the e2e tests, when CLAWCONNECT_E2E=1) and then checks for goroutine leaks.
func TestMain(m *testing.M) {
	if os.Getenv(replicaEnv) != "" {
		os.Exit(replicaMain()) // a replica process of the multi-process tests
	}
	realgateway.Main(m)
}

func TestSubmitFollowComplete(t *testing.T) {
	e := newEnv(t)
	m := e.manager(nil)
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "run the tests", Context: "repo is x", SenderName: " Ana "})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^agent:main:main:thread:mcp-\d+-[0-9a-f]{8}$`).MatchString(res.SessionKey) {
		t.Fatalf("new thread key %q", res.SessionKey)
	}
	want := &taskapi.RunResult{JobID: res.JobID, TaskID: res.JobID, SessionKey: res.SessionKey, Status: "running", Execution: "running",
		Upstream: "connected", Transcript: "detached", Cancellation: "none", Agent: "main",
		NextAction: &taskapi.NextAction{Tool: "check_task", Args: taskapi.NextActionArgs{JobID: res.JobID, SessionKey: res.SessionKey}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Fatalf("run result (-want +got):\n%s", diff)
	}
	e.gw.waitStarted(t, res.JobID)
	msg := e.gw.messages[res.JobID]
	if !strings.HasSuffix(msg, "\n\n---\n\n[Message from: Ana]\n\nrepo is x\n\nrun the tests") {
		t.Fatalf("message sent:\n%s", msg)
	}
	e.gw.emit(res.JobID, Event{Kind: EventLifecycle, Phase: "start", Seq: 1})
	e.gw.emit(res.JobID, Event{Kind: EventToolStart, Tool: "Bash", Args: json.RawMessage(`{"command":"go test ./..."}`), Seq: 2})
	// An echo of the same call is suppressed.
	e.gw.emit(res.JobID, Event{Kind: EventToolStart, Tool: "Bash", Args: json.RawMessage(`{}`), Seq: 3})
	e.gw.emit(res.JobID, Event{Kind: EventToolResult, Tool: "Bash", Seq: 4})
	e.gw.emit(res.JobID, Event{Kind: EventToolStart, Tool: "Edit", Args: json.RawMessage(`{"file_path":"a.go"}`), Seq: 5})
	e.gw.emit(res.JobID, Event{Kind: EventToolResult, Tool: "Edit", IsError: true, Seq: 6})

	// A waiting check returns as soon as the outcome is written.
	got := make(chan *taskapi.Snapshot, 1)
	go func() {
		s, err := m.Check(t.Context(), CheckRequest{JobID: res.JobID, WaitMs: waitMs(60000)})
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "All green. Opened https://github.com/o/r/pull/7"})
	s := <-got
	if s.Status != "completed" || s.TerminalReason != "live-final" || s.ResultSource != "parent" || !s.IsTerminal || s.ContinuePolling || s.NextAction != nil {
		t.Fatalf("snapshot: %+v", s)
	}
	wantLogs := []string{
		"lifecycle:Started new thread session: " + res.SessionKey,
		"lifecycle:Agent lifecycle: start",
		"tool:Bash: go test ./...",
		"tool:Edit: a.go",
		"tool-result:Edit failed",
	}
	var gotLogs []string
	for _, l := range s.Logs {
		gotLogs = append(gotLogs, l.Type+":"+l.Text)
	}
	if diff := cmp.Diff(wantLogs, gotLogs); diff != "" {
		t.Fatalf("projected logs (-want +got):\n%s", diff)
	}
	if s.LogCursor != 6 || s.LogEventCount != 6 {
		t.Fatalf("log cursor %d count %d, want 6 6", s.LogCursor, s.LogEventCount)
	}
	wantArt := taskapi.Artifacts{FilesChanged: []string{"a.go"}, CommandsRun: []string{"go test ./..."}, PRURL: "https://github.com/o/r/pull/7"}
	if diff := cmp.Diff(wantArt, s.Artifacts); diff != "" {
		t.Fatalf("artifacts (-want +got):\n%s", diff)
	}
	if s.ContinuationState == nil || s.ContinuationState.RecommendedNextStep != "Review or merge the PR." {
		t.Fatalf("continuation: %+v", s.ContinuationState)
	}
	// Delta projection after the cursor: nothing new.
	s2, err := m.Check(t.Context(), CheckRequest{JobID: res.JobID, KnownLogCount: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(s2.Logs) != 0 || s2.LogCursor != 6 || s2.PollCount != 2 {
		t.Fatalf("second check: logs %v cursor %d pollCount %d", s2.Logs, s2.LogCursor, s2.PollCount)
	}
	// The prompt is stored stripped and read only through GetPrompt.
	p, err := m.GetPrompt(t.Context(), res.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&taskapi.PromptResult{TaskID: res.JobID, Prompt: taskapi.Prompt{Task: "run the tests", Context: "repo is x", SenderName: "Ana"}}, p); diff != "" {
		t.Fatalf("prompt (-want +got):\n%s", diff)
	}
}

func TestSessionBusyAppliesNothing(t *testing.T) {
	e := newEnv(t)
	m := e.manager(nil)
	first, err := m.Submit(t.Context(), SubmitRequest{Task: "one"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, first.JobID)
	marker := `<agent-session>{"runtime":"rt","sessionId":"s-1"}</agent-session>`
	_, err = m.Submit(t.Context(), SubmitRequest{Task: "two", SessionKey: first.SessionKey, Context: marker})
	var busy *store.SessionBusyError
	if !errors.As(err, &busy) || !errors.Is(err, store.ErrSessionBusy) || busy.JobID != first.JobID {
		t.Fatalf("second submit = %v, want SessionBusyError", err)
	}
	wantMsg := "A task is already running on this session (jobId " + first.JobID + "). Poll check_task until it finishes before sending another message to this session, or omit sessionKey to start a fresh thread."
	if !strings.HasSuffix(err.Error(), wantMsg) {
		t.Fatalf("message %q", err.Error())
	}
	lineage, err := m.book.Lineage(t.Context(), first.SessionKey)
	if err != nil || len(lineage) != 0 {
		t.Fatalf("the refused submit applied its directive: %v %v", lineage, err)
	}
	e.gw.end(first.JobID, Outcome{Status: OutcomeOK, Text: "done"})
	await(t, m, first.JobID)
	// Continuing the thread after it finished works and applies the marker.
	second, err := m.Submit(t.Context(), SubmitRequest{Task: "two", SessionKey: first.SessionKey, Context: "see\n" + marker})
	if err != nil {
		t.Fatal(err)
	}
	if second.SessionKey != first.SessionKey {
		t.Fatalf("continuation used key %q", second.SessionKey)
	}
	e.gw.waitStarted(t, second.JobID)
	if strings.Contains(e.gw.messages[second.JobID], "agent-session") {
		t.Fatal("the marker reached the agent")
	}
	cur, err := m.book.Current(t.Context(), first.SessionKey)
	if err != nil || cur == nil || cur.DelegatedTurnID != second.JobID || cur.Handle != "s-1" {
		t.Fatalf("attachment after submit: %+v %v", cur, err)
	}
	e.gw.end(second.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
	s := await(t, m, second.JobID)
	if s.AgentSession == nil {
		t.Fatal("snapshot lacks agentSession")
	}
}

func TestLegacyKeyMigrates(t *testing.T) {
	e := newEnv(t)
	m := e.manager(nil)
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "x", SessionKey: "agent:chatgpt:abc"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(res.SessionKey, "agent:chatgpt:") {
		t.Fatalf("legacy key kept: %s", res.SessionKey)
	}
	e.gw.waitStarted(t, res.JobID)
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
	await(t, m, res.JobID)
}

func TestPayload(t *testing.T) {
	e := newEnv(t)
	m := e.manager(nil)
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "use it", Payload: "secret blob"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
	s := await(t, m, res.JobID)
	info, err := os.Stat(s.PayloadPath)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("payload file %q: %v %v", s.PayloadPath, info, err)
	}
	msg := e.gw.messages[res.JobID]
	if !strings.Contains(msg, s.PayloadPath) || strings.Contains(msg, "secret blob") {
		t.Fatalf("message must name the path only:\n%s", msg)
	}

	noDir := e.manager(func(o *Options) { o.PayloadDir = ""; o.Agent = "other" })
	_, err = noDir.Submit(t.Context(), SubmitRequest{Task: "use it", Payload: "blob"})
	if !errors.Is(err, ErrPayloadNotStored) || !strings.Contains(err.Error(), "Nothing is running, so retrying is not a duplicate submit") {
		t.Fatalf("submit without payload dir = %v", err)
	}
	if l, err := noDir.ListSessions(t.Context(), 0, nil); err != nil || len(l.Sessions) != 0 {
		t.Fatalf("a refused submit left state: %+v %v", l, err)
	}
}

func TestBadInputWritesNothing(t *testing.T) {
	e := newEnv(t)
	m := e.manager(nil)
	tests := []struct {
		name string
		req  SubmitRequest
	}{
		{"empty task", SubmitRequest{Task: "  \n"}},
		{"oversized task", SubmitRequest{Task: strings.Repeat("x", MaxTaskBytes+1)}},
		{"oversized context", SubmitRequest{Task: "x", Context: strings.Repeat("c", MaxContextBytes+1)}},
		{"oversized payload", SubmitRequest{Task: "x", Payload: strings.Repeat("p", MaxPayloadBytes+1)}},
		{"invalid utf-8 task", SubmitRequest{Task: "bad \xff\xfe"}},
		{"invalid utf-8 context", SubmitRequest{Task: "x", Context: "\xc3\x28"}},
		{"invalid utf-8 sender", SubmitRequest{Task: "x", SenderName: "\xff"}},
		{"NUL in task", SubmitRequest{Task: "a\x00b"}},
		{"session key with newline", SubmitRequest{Task: "x", SessionKey: "agent:main:x\nINJECT"}},
		{"session key with escape", SubmitRequest{Task: "x", SessionKey: "agent:main:\x1b[31m"}},
		{"session key with bidi override", SubmitRequest{Task: "x", SessionKey: "agent:main:\u202e"}},
		{"session key too long", SubmitRequest{Task: "x", SessionKey: strings.Repeat("k", MaxSessionKeyBytes+1)}},
		{"session key padded", SubmitRequest{Task: "x", SessionKey: " agent:main:x "}},
		{"session key invalid utf-8", SubmitRequest{Task: "x", SessionKey: "agent:\xff"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Submit(t.Context(), tc.req)
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("Submit = %v, want ErrInvalidInput", err)
			}
		})
	}
	l, err := m.ListSessions(t.Context(), 0, nil)
	if err != nil || len(l.Sessions) != 0 {
		t.Fatalf("bad input left sessions: %+v %v", l, err)
	}
	ents, _ := os.ReadDir(e.opts.PayloadDir)
	if len(ents) != 0 {
		t.Fatalf("bad input left payload files: %v", ents)
	}
}

func TestUnknownAndForeignIDs(t *testing.T) {
	e := newEnv(t)
	m := e.manager(nil)
	other := e.manager(func(o *Options) { o.Agent = "other" })
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	tests := []struct {
		name string
		call func() error
		msg  string
	}{
		{"check unknown job", func() error {
			_, err := m.Check(t.Context(), CheckRequest{JobID: "nope"})
			return err
		}, taskapi.MsgJobNotFound},
		{"check unknown session", func() error {
			_, err := m.Check(t.Context(), CheckRequest{SessionKey: "agent:main:nope"})
			return err
		}, taskapi.MsgSessionJobMissing},
		{"check other agent's job", func() error {
			_, err := other.Check(t.Context(), CheckRequest{JobID: res.JobID})
			return err
		}, taskapi.MsgJobNotFound},
		{"get unknown task", func() error {
			_, err := m.GetTask(t.Context(), "nope", "", 0)
			return err
		}, taskapi.MsgTaskNotFound},
		{"get other agent's task", func() error {
			_, err := other.GetTask(t.Context(), res.JobID, taskapi.DetailFull, 0)
			return err
		}, taskapi.MsgTaskNotFound},
		{"prompt of other agent's task", func() error {
			_, err := other.GetPrompt(t.Context(), res.JobID)
			return err
		}, taskapi.MsgTaskNotFound},
		{"cancel unknown", func() error {
			_, err := m.Cancel(t.Context(), "nope", "")
			return err
		}, taskapi.MsgCancelNotFound},
		{"cancel other agent's task", func() error {
			_, err := other.Cancel(t.Context(), res.JobID, "")
			return err
		}, taskapi.MsgCancelNotFound},
		{"session unknown", func() error {
			_, err := m.GetSession(t.Context(), SessionRequest{SessionID: "agent:main:nope"})
			return err
		}, taskapi.MsgSessionNotFound},
		{"session of other agent", func() error {
			_, err := other.GetSession(t.Context(), SessionRequest{SessionID: res.SessionKey})
			return err
		}, taskapi.MsgSessionNotFound},
		{"hostile session id", func() error {
			_, err := m.GetSession(t.Context(), SessionRequest{SessionID: "x\x00y"})
			return err
		}, taskapi.MsgSessionNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var nf *taskapi.NotFoundError
			if !errors.As(err, &nf) || nf.Message != tc.msg || !errors.Is(err, taskapi.ErrNotFound) {
				t.Fatalf("got %v, want taskapi.NotFoundError %q", err, tc.msg)
			}
		})
	}
	if _, err := m.Cancel(t.Context(), "", ""); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), taskapi.MsgCancelNeedsTarget) {
		t.Fatalf("cancel without target = %v", err)
	}
	if _, err := m.GetTask(t.Context(), res.JobID, "bogus", 0); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("unknown detail = %v", err)
	}
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
	await(t, m, res.JobID)
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		name    string
		outcome Outcome
		status  string
		errText string
		reason  string
		cat     string
	}{
		{"chat error", Outcome{Status: OutcomeError, Error: "LLM request failed: 401 unauthorized"}, "error", "LLM request failed: 401 unauthorized", "chat-error", "auth"},
		{"aborted upstream", Outcome{Status: OutcomeAborted}, "error", "OpenClaw task aborted", "chat-error", "unknown"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			m := e.manager(nil)
			res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
			if err != nil {
				t.Fatal(err)
			}
			e.gw.waitStarted(t, res.JobID)
			e.gw.end(res.JobID, tc.outcome)
			s := await(t, m, res.JobID)
			if s.Status != tc.status || s.Error != tc.errText || s.TerminalReason != tc.reason || !s.IsError || s.Execution != "failed" ||
				s.ErrorInfo == nil || s.ErrorInfo.Category != tc.cat {
				t.Fatalf("snapshot %+v errorInfo %+v", s, s.ErrorInfo)
			}
			if s.ContinuationState.RecommendedNextStep != "Fix the issue and retry." {
				t.Fatalf("next step %q", s.ContinuationState.RecommendedNextStep)
			}
		})
	}
}

func TestCancel(t *testing.T) {
	tests := []struct {
		name      string
		abortOK   bool
		abortErr  error
		status    string
		reason    string
		cancState string
		errPrefix string
	}{
		{"confirmed", true, nil, "cancelled", "cancelled-by-request", "acknowledged", ""},
		{"not confirmed", false, nil, "error", "cancellation-not-confirmed", "reconciled", "Cancellation was requested, but OpenClaw reported no active run for session "},
		{"rpc failure", false, errors.New("Gateway disconnected"), "error", "cancellation-not-confirmed", "reconciled", "Cancellation request failed before OpenClaw confirmed the stop: Gateway disconnected"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.gw.abortOK, e.gw.abortErr = tc.abortOK, tc.abortErr
			m := e.manager(nil)
			res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
			if err != nil {
				t.Fatal(err)
			}
			e.gw.waitStarted(t, res.JobID)
			c, err := m.Cancel(t.Context(), res.JobID, "")
			if err != nil {
				t.Fatal(err)
			}
			if !c.Found || !c.Requested || c.Status != tc.status {
				t.Fatalf("cancel result %+v", c)
			}
			s := await(t, m, res.JobID)
			if s.Status != tc.status || s.TerminalReason != tc.reason || s.Cancellation != tc.cancState || !strings.HasPrefix(s.Error, tc.errPrefix) {
				t.Fatalf("snapshot %+v", s)
			}
			if tc.status == "error" && s.ErrorInfo.Category != "timeout" {
				t.Fatalf("errorInfo %+v", s.ErrorInfo)
			}
			again, err := m.Cancel(t.Context(), "", res.SessionKey)
			if err != nil || !again.AlreadyTerminal || again.Requested || again.Note != `Task already finished with status "`+tc.status+`" — nothing to stop.` {
				t.Fatalf("second cancel %+v %v", again, err)
			}
			e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "late"})
		})
	}
}

func TestLateRecovery(t *testing.T) {
	tests := []struct {
		name    string
		history *History
		status  string
		summary string
		reason  string
	}{
		{"transcript answer", &History{Messages: []HistoryMessage{{Role: "user", Text: "q"}, {Role: "assistant", Text: "from transcript", RunID: "RUN"}}},
			"completed", "from transcript", "late-recovery-transcript"},
		{"exhausted", &History{}, "completed_no_summary", NoSummarySentinel, "late-recovery-exhausted"},
		{"still active", &History{HasActiveRun: true}, "error", "", "late-recovery-upstream-still-active"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			m := e.manager(nil)
			res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
			if err != nil {
				t.Fatal(err)
			}
			h := *tc.history
			h.Messages = append([]HistoryMessage(nil), h.Messages...)
			for i := range h.Messages {
				if h.Messages[i].RunID == "RUN" {
					h.Messages[i].RunID = res.JobID
				}
			}
			e.gw.setHistory(res.SessionKey, &h)
			e.gw.waitStarted(t, res.JobID)
			e.gw.end(res.JobID, Outcome{Status: OutcomeNoText})
			s := await(t, m, res.JobID)
			if s.Status != tc.status || s.TerminalReason != tc.reason || (tc.summary != "" && s.Summary != tc.summary) {
				t.Fatalf("snapshot status %s reason %s summary %q error %q", s.Status, s.TerminalReason, s.Summary, s.Error)
			}
			if s.Recovery == nil || s.Recovery.Reason != "no_live_final_text" {
				t.Fatalf("recovery %+v", s.Recovery)
			}
			if tc.reason == "late-recovery-upstream-still-active" && (!strings.HasPrefix(s.Error, "Stopped watching after 0m: ") || s.ErrorInfo.Category != "timeout") {
				t.Fatalf("error %q %+v", s.Error, s.ErrorInfo)
			}
		})
	}
}

func TestTier3AndBlockedDelegation(t *testing.T) {
	tests := []struct {
		name    string
		obs     func() *agentsession.Observation
		marker  string
		status  string
		source  string
		reason  string
		summary string
		list    taskapi.TaskStatus
	}{
		{
			name: "answered by the attached session",
			obs: func() *agentsession.Observation {
				return &agentsession.Observation{State: "completed", FinalResponse: "answer from the session",
					LastEventAt: agentsession.StampOf(timeNowPlus(1))}
			},
			marker: `<agent-session>{"runtime":"test-rt","sessionId":"sess-1","state":"running"}</agent-session>`,
			status: "completed", source: "agent-session", reason: "agent-session-recovery", summary: "answer from the session", list: taskapi.TaskDone,
		},
		{
			name: "blocked on input",
			obs: func() *agentsession.Observation {
				return &agentsession.Observation{State: "needs_input", LatestResponse: "Which DB?"}
			},
			marker: `<agent-session>{"runtime":"test-rt","sessionId":"sess-2","state":"needs_input","remoteUrl":"https://r/x"}</agent-session>`,
			status: "completed_no_summary", source: "parent", reason: "delegate-blocked:needs_input",
			summary: "This turn produced no result of its own: the delegated session test-rt/sess-2 is waiting for input.",
			list:    taskapi.TaskNeedsHuman,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if err := e.reg.Register(agentsession.Runtime{ID: "test-rt", Inspect: func(ctx contextT, ref agentsession.Ref) (*agentsession.Observation, error) {
				return tc.obs(), nil
			}}); err != nil {
				t.Fatal(err)
			}
			m := e.manager(nil)
			res, err := m.Submit(t.Context(), SubmitRequest{Task: "delegate it", Context: tc.marker})
			if err != nil {
				t.Fatal(err)
			}
			e.gw.waitStarted(t, res.JobID)
			e.gw.end(res.JobID, Outcome{Status: OutcomeNoText})
			s := await(t, m, res.JobID)
			if s.Status != tc.status || s.ResultSource != tc.source || s.TerminalReason != tc.reason || !strings.HasPrefix(s.Summary, tc.summary) {
				t.Fatalf("snapshot status %s source %s reason %s summary %q", s.Status, s.ResultSource, s.TerminalReason, s.Summary)
			}
			if s.AgentSession == nil {
				t.Fatal("no agentSession on the snapshot")
			}
			rows, err := m.ListTasks(t.Context(), taskapi.ViewAll, 0, nil)
			if err != nil || len(rows) != 1 || rows[0].Status != tc.list {
				t.Fatalf("list rows %+v %v", rows, err)
			}
			if tc.list == taskapi.TaskNeedsHuman {
				if rows[0].BlockedDelegation == nil || !strings.Contains(CheckText(s), "waiting for input") {
					t.Fatalf("blocked row %+v text %q", rows[0], CheckText(s))
				}
				active, err := m.ListTasks(t.Context(), taskapi.ViewActive, 0, nil)
				if err != nil || len(active) != 1 {
					t.Fatalf("active view %+v %v", active, err)
				}
			}
		})
	}
}

func TestQuietWatchdogThenLateFinal(t *testing.T) {
	e := newEnv(t)
	m := e.manager(func(o *Options) { o.ReconcileQuiet = 30 * millis })
	res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, res.JobID)
	e.gw.setHistory(res.SessionKey, &History{Messages: []HistoryMessage{{Role: "user", Text: "x"}, {Role: "assistant", Text: "quiet answer", RunID: res.JobID}}})
	s := await(t, m, res.JobID)
	if s.Status != "completed" || s.TerminalReason != "reconciled-transcript-match" || s.Summary != "quiet answer" {
		t.Fatalf("watchdog snapshot: %s %s %q", s.Status, s.TerminalReason, s.Summary)
	}
	// A late real final replaces the provisional result.
	l := m.getLive(res.JobID)
	if l == nil {
		t.Fatal("the follower stopped after a provisional outcome")
	}
	e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "the real answer"})
	<-l.exited
	g, err := m.GetTask(t.Context(), res.JobID, taskapi.DetailSummary, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.TerminalReason != "live-final-late" || g.Summary != "the real answer" || g.ResultSource != "parent" {
		t.Fatalf("after the late final: %s %q", g.TerminalReason, g.Summary)
	}
}
