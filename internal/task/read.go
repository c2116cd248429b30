package task

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
)

// CheckMode is check_task's mode.
type CheckMode string

// check_task modes; the default is wait.
const (
	CheckWait CheckMode = "wait"
	CheckPoll CheckMode = "poll"
)

// CheckRequest is check_task's input.
type CheckRequest struct {
	JobID      string
	SessionKey string
	// KnownLogCount is the previous response's logCursor (0 = none).
	KnownLogCount int64
	Mode          CheckMode
	// WaitMs is the requested wait; nil means the default. It is clamped to
	// [1 s, CheckMaxWait].
	WaitMs *float64
}

// resolve finds a task by id (the live record of a task followed here,
// without a store read), else by the session's latest task.
func (m *Manager) resolve(ctx context.Context, jobID, sessionKey, notFoundMsg string) (*store.Task, error) {
	if jobID != "" {
		if l := m.getLive(jobID); l != nil {
			return l.copyTask(), nil
		}
		t, err := m.st.GetTask(ctx, m.o.Agent, jobID)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
	}
	if sessionKey != "" {
		s, err := m.st.GetSession(ctx, m.o.Agent, sessionKey)
		if err == nil {
			t, err := m.st.GetTask(ctx, m.o.Agent, s.LastJobID)
			if err == nil {
				return t, nil
			}
			if !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if jobID == "" {
			return nil, &taskapi.NotFoundError{Message: taskapi.MsgSessionJobMissing}
		}
	}
	return nil, &taskapi.NotFoundError{Message: notFoundMsg}
}

// current returns the task's freshest record: the live copy if followed
// here, else the store's.
func (m *Manager) current(ctx context.Context, id string) (*store.Task, *live, error) {
	if l := m.getLive(id); l != nil {
		return l.copyTask(), l, nil
	}
	t, err := m.st.GetTask(ctx, m.o.Agent, id)
	return t, nil, err
}

// clampWait applies the check_task wait rule.
func (m *Manager) clampWait(waitMs *float64) time.Duration {
	d := m.o.CheckWait
	if waitMs != nil && *waitMs == *waitMs && *waitMs < 1e15 && *waitMs > -1e15 {
		d = time.Duration(*waitMs * float64(time.Millisecond))
	}
	return max(time.Second, min(d, max(m.o.CheckMaxWait, time.Second)))
}

// Check is check_task: it bumps pollCount, then in wait mode blocks until
// the task ends or the wait elapses (returning the moment the outcome is
// written — no polling interval for tasks followed here); in poll mode it
// also returns when new log entries arrive beyond KnownLogCount (a
// lifecycle/recovery entry at once, tool chatter after PollDebounce). A
// terminal completed_no_summary, error or provisional task gets the lazy
// transcript re-check first.
func (m *Manager) Check(ctx context.Context, req CheckRequest) (_ *taskapi.Snapshot, err error) {
	defer m.hideStoreErr(ctx, "check task", &err)
	if req.JobID == "" && req.SessionKey == "" {
		return nil, fmt.Errorf("check task: %w: pass jobId (or sessionKey)", ErrInvalidInput)
	}
	t, err := m.resolve(ctx, req.JobID, req.SessionKey, taskapi.MsgJobNotFound)
	if err != nil {
		return nil, fmt.Errorf("check task: %w", err)
	}
	// The follower as seen before the poll count's read, in which the run
	// may end and the follower leave the map: once it has written the
	// outcome, its record is the store's, and a store read would fetch
	// the same row.
	seen := m.getLive(t.ID)
	polledAt := m.nowMs()
	polls, err := m.st.TouchPoll(ctx, m.o.Agent, t.ID, polledAt)
	if err != nil {
		return nil, fmt.Errorf("check task: %w", err)
	}
	if l := m.getLive(t.ID); l != nil {
		seen = l // claimed meanwhile
	}
	if seen != nil {
		seen.mu.Lock()
		seen.t.PollCount, seen.t.LastPollAt = max(seen.t.PollCount, polls), polledAt
		seen.mu.Unlock()
	}
	if t.Status.Terminal() {
		if m.lazyRecheck(ctx, t) {
			return m.snapshotByID(ctx, t.ID, req.KnownLogCount)
		}
		t.PollCount, t.LastPollAt = polls, polledAt
		return m.snapshot(ctx, t, seen.keptLogs(), req.KnownLogCount)
	}
	deadline := time.NewTimer(m.clampWait(req.WaitMs))
	defer deadline.Stop()
	// The store's change feed is watched only while another process
	// follows the task: a task followed here wakes its waiters itself, and
	// a process with no watcher skips reading the feed (see the SQLite
	// listener), which would otherwise cost every process a read for every
	// commit anywhere.
	var announced <-chan struct{}
	watched := false
	var debounce <-chan time.Time
	id := t.ID
	for {
		var l *live
		t = nil
		from := seen // the follower t is the record of, if any
		if seen != nil {
			// The follower's record: the store's once it is terminal (a
			// follower that stopped short of an outcome left it running).
			t, seen = seen.copyTask(), nil
		}
		if t == nil || !t.Status.Terminal() {
			if t, l, err = m.current(ctx, id); err != nil {
				return nil, fmt.Errorf("check task: %w", err)
			}
			from = l
		}
		if t.Status.Terminal() {
			return m.snapshot(ctx, t, from.keptLogs(), req.KnownLogCount) // just read: no second read
		}
		var changed, done, exited <-chan struct{}
		var poll <-chan time.Time
		if l != nil {
			l.mu.Lock()
			changed, done, exited = l.changed, l.done, l.exited
			if req.Mode == CheckPoll && l.heldSeq > max(req.KnownLogCount, l.t.LogCount) {
				// An entry held for the run id's write (onEvent) that
				// this poll returns for: write it now.
				_ = m.flushLogsLocked(ctx, l)
			}
			urgent, count := l.urgentSeq, l.t.LogCount
			l.mu.Unlock()
			if req.Mode == CheckPoll && count > req.KnownLogCount {
				if urgent > req.KnownLogCount {
					return m.snapshotByID(ctx, t.ID, req.KnownLogCount)
				}
				if debounce == nil {
					debounce = time.After(m.o.PollDebounce)
				}
			}
		} else {
			if !watched {
				// Watch, then read again, so a change written between
				// the read above and the watch is not missed.
				var stop func()
				announced, stop = m.st.WatchTask(t.ID)
				defer stop()
				watched = true
				continue
			}
			// Followed by another replica: re-read the store when it
			// announces a change, or after ForeignPollInterval in case an
			// announcement was lost.
			if req.Mode == CheckPoll && t.LogCount > req.KnownLogCount {
				return m.snapshot(ctx, t, nil, req.KnownLogCount)
			}
			poll = time.After(m.o.ForeignPollInterval)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("check task: %w", ctx.Err())
		case <-deadline.C:
			return m.snapshotByID(ctx, t.ID, req.KnownLogCount)
		case <-debounce:
			return m.snapshotByID(ctx, t.ID, req.KnownLogCount)
		case <-done:
		case <-changed:
		case <-exited: // no longer followed here (lease lost): watch the feed
		case <-announced:
		case <-poll:
		}
		// The outcome closes changed and then done, and the follower may
		// leave the map before the next turn: start from its record.
		seen = l
	}
}

func (m *Manager) snapshotByID(ctx context.Context, id string, cursor int64) (*taskapi.Snapshot, error) {
	t, l, err := m.current(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return m.snapshot(ctx, t, l.keptLogs(), cursor)
}

// logsFor returns the raw entries the projection needs: from kept (the
// entries a follower here wrote, see live.written) when it has them all,
// else from the store.
func (m *Manager) logsFor(ctx context.Context, t *store.Task, kept []store.LogEntry, cursor int64) ([]store.LogEntry, error) {
	if t.LogCount == 0 || (cursor > 0 && cursor >= t.LogCount) {
		return nil, nil
	}
	n := 2 * InitialWindowMax
	if cursor > 0 {
		n = int(min(t.LogCount-cursor+1, 2*DeltaWindowMax+1))
	}
	if es, ok := lastEntries(kept, t.LogCount, n); ok {
		return es, nil
	}
	return m.st.TailLogs(ctx, t.ID, n)
}

// lastEntries returns the last n entries up to seq count from kept (dense
// entries in seq order), and whether kept holds them all.
func lastEntries(kept []store.LogEntry, count int64, n int) ([]store.LogEntry, bool) {
	from := max(count-int64(n), 0) + 1
	if len(kept) == 0 || kept[0].Seq > from || kept[len(kept)-1].Seq < count {
		return nil, false
	}
	first := kept[0].Seq
	return kept[from-first : count-first+1], true
}

func (m *Manager) attachment(ctx context.Context, sessionKey string) *agentsession.Attachment {
	if m.book == nil {
		return nil
	}
	a, err := m.book.Current(ctx, sessionKey)
	if err != nil {
		m.o.Logger.Warn("read attachment failed", "session_key", sessionKey, "err", err)
		return nil
	}
	return a
}

func blocked(t *store.Task, a *agentsession.Attachment) *taskapi.BlockedDelegation {
	b, ok := agentsession.BlockedDelegationFor(t.ID, t.Status == store.StatusRunning, a)
	if !ok {
		return nil
	}
	return &taskapi.BlockedDelegation{Runtime: b.Runtime, Handle: b.Handle, State: string(b.State), RemoteURL: b.RemoteURL, Active: b.Active, Notice: b.Notice}
}

func nextAction(t *store.Task) *taskapi.NextAction {
	if t.Status.Terminal() {
		return nil
	}
	return &taskapi.NextAction{Tool: "check_task", Args: taskapi.NextActionArgs{JobID: t.ID, SessionKey: t.SessionKey}}
}

func retryAfter(t *store.Task) int64 {
	if t.Status == store.StatusRunning && t.Recovery != nil {
		return 10000
	}
	return 0
}

func artifactsOf(t *store.Task) taskapi.Artifacts {
	a := t.Artifacts
	if a.FilesChanged == nil {
		a.FilesChanged = []string{}
	}
	if a.CommandsRun == nil {
		a.CommandsRun = []string{}
	}
	return a
}

// continuation returns the session's continuation state when t is its
// latest task.
func (m *Manager) continuation(ctx context.Context, t *store.Task) *taskapi.ContinuationState {
	s, err := m.st.GetSession(ctx, m.o.Agent, t.SessionKey)
	if err != nil || s.LastJobID != t.ID {
		return nil
	}
	c := continuationOf(t, m.o.Agent)
	return &c
}

func continuationOf(t *store.Task, agent string) taskapi.ContinuationState {
	sum := ""
	if t.Status.Terminal() {
		sum, _ = capRunes(t.Summary, ContinuationSummaryMax)
	}
	return taskapi.ContinuationState{SessionKey: t.SessionKey, LastJobID: t.ID, LastSummary: sum, Artifacts: artifactsOf(t),
		RecommendedNextStep: nextStep(t), Agent: agent, Principal: t.Principal}
}

// snapshot is check_task's answer for t; kept are the entries its
// follower here wrote, if any (logsFor).
func (m *Manager) snapshot(ctx context.Context, t *store.Task, kept []store.LogEntry, cursor int64) (*taskapi.Snapshot, error) {
	raw, err := m.logsFor(ctx, t, kept, cursor)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	logCursor := t.LogCount
	if t.LogCount == 0 {
		logCursor = cursor
	}
	s := &taskapi.Snapshot{
		JobID: t.ID, TaskID: t.ID, SessionKey: t.SessionKey, Status: string(t.Status), Execution: execution(t.Status),
		Upstream: t.Upstream, Transcript: t.Transcript, Cancellation: t.Cancellation, LastSeenSequence: t.LastSeenSequence,
		StartedAt: t.StartedAt, LastEventAt: t.LastEventAt, LastPollAt: t.LastPollAt, Summary: t.Summary, Error: t.Error,
		ErrorInfo: t.ErrorInfo, Logs: project(raw, cursor), LogCursor: logCursor, LogEventCount: t.LogCount,
		Artifacts: artifactsOf(t), Recovery: t.Recovery, Liveness: t.Liveness, ResultSource: t.ResultSource,
		TerminalReason: t.TerminalReason, PayloadPath: t.PayloadPath, ParentRunID: t.ParentRunID, Agent: m.o.Agent,
		PollCount: t.PollCount, ContinuePolling: t.Status == store.StatusRunning, RetryAfterMs: retryAfter(t),
		NextAction: nextAction(t), IsTerminal: t.Status.Terminal(), IsError: t.Status == store.StatusError,
		Principal: t.Principal,
	}
	if t.Status.Terminal() {
		s.ContinuationState = m.continuation(ctx, t)
	}
	if a := m.attachment(ctx, t.SessionKey); a != nil {
		s.AgentSession = a
		s.BlockedDelegation = blocked(t, a)
	}
	return s, nil
}

// CheckText is the model-facing text of a check_task result: the blocked
// notice first, then the summary or error when terminal, or the
// keep-polling instruction.
func CheckText(s *taskapi.Snapshot) string {
	var text string
	switch {
	case s.IsTerminal && s.Error != "":
		text = s.Error
	case s.IsTerminal:
		text = s.Summary
	case s.Recovery != nil:
		text = fmt.Sprintf("Recovering late transcript final text. Poll again with knownLogCount=%d.", s.LogCursor)
	default:
		text = fmt.Sprintf("Still running. Poll again with knownLogCount=%d.", s.LogCursor)
	}
	if s.BlockedDelegation != nil && s.BlockedDelegation.Notice != text {
		text = s.BlockedDelegation.Notice + "\n\n" + text
	}
	return text
}

// ------------------------------------------------------------ get_task

// GetTask is get_task for every preset but "prompt" (use GetPrompt). It
// never waits and does not bump pollCount. An unknown detail is refused.
func (m *Manager) GetTask(ctx context.Context, taskID string, detail taskapi.Detail, knownLogCount int64) (_ *taskapi.TaskDetail, err error) {
	defer m.hideStoreErr(ctx, "get task", &err)
	if detail == "" {
		detail = taskapi.DetailSummary
	}
	sum, upd, art, diag := false, false, false, false
	switch detail {
	case taskapi.DetailCore:
	case taskapi.DetailSummary:
		sum = true
	case taskapi.DetailUpdates:
		upd = true
	case taskapi.DetailArtifacts:
		art = true
	case taskapi.DetailDiagnostics:
		diag = true
	case taskapi.DetailFull:
		sum, upd, art = true, true, true
	case taskapi.DetailFullWithDiagnostics:
		sum, upd, art, diag = true, true, true, true
	default:
		return nil, fmt.Errorf("get task: %w: unknown detail %q", ErrInvalidInput, detail)
	}
	if taskID == "" {
		return nil, fmt.Errorf("get task: %w: taskId is required", ErrInvalidInput)
	}
	t, _, err := m.current(ctx, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("get task: %w", &taskapi.NotFoundError{Message: taskapi.MsgTaskNotFound})
	}
	if err != nil {
		return nil, fmt.Errorf("get task: %w", err)
	}
	d := &taskapi.TaskDetail{
		TaskID: t.ID, JobID: t.ID, SessionKey: t.SessionKey, Agent: m.o.Agent, Status: string(t.Status),
		Execution: execution(t.Status), Upstream: t.Upstream, Transcript: t.Transcript, Cancellation: t.Cancellation,
		LastSeenSequence: t.LastSeenSequence, StartedAt: t.StartedAt, LastEventAt: t.LastEventAt, EndedAt: endedAt(t), Recovery: t.Recovery,
		PollCount: t.PollCount, ContinuePolling: t.Status == store.StatusRunning, RetryAfterMs: retryAfter(t),
		NextAction: nextAction(t), IsTerminal: t.Status.Terminal(), IsError: t.Status == store.StatusError,
		ResultSource: t.ResultSource, TerminalReason: t.TerminalReason, Liveness: t.Liveness, ParentRunID: t.ParentRunID,
		PayloadPath: t.PayloadPath, Principal: t.Principal,
	}
	d.Error = failureReason(t)
	if a := m.attachment(ctx, t.SessionKey); a != nil {
		d.AgentSession = a
		d.Blocked = blocked(t, a)
	}
	if sum {
		d.Summary = t.Summary
	}
	if upd {
		raw, err := m.logsFor(ctx, t, nil, knownLogCount)
		if err != nil {
			return nil, fmt.Errorf("get task: %w", err)
		}
		d.Updates = project(raw, knownLogCount)
		c, n := t.LogCount, t.LogCount
		if c == 0 {
			c = knownLogCount
		}
		d.LogCursor, d.LogEventCount = &c, &n
	}
	if art {
		a := artifactsOf(t)
		d.Artifacts = &a
	}
	if diag {
		d.Diagnostics = &taskapi.Diagnostics{Error: t.Error, ErrorInfo: t.ErrorInfo, Recovery: t.Recovery}
		if t.Status.Terminal() {
			d.Diagnostics.ContinuationState = m.continuation(ctx, t)
		}
	}
	return d, nil
}

// failureReason is the stored reason of a failed task, or "" for any other
// status.
func failureReason(t *store.Task) string {
	if t.Status != store.StatusError {
		return ""
	}
	if t.Error != "" {
		return t.Error
	}
	return "failed (" + t.TerminalReason + ") without a recorded reason"
}

// GetPrompt is get_task's "prompt" preset: the only read path of a task's
// prompt, scoped like every other read.
func (m *Manager) GetPrompt(ctx context.Context, taskID string) (_ *taskapi.PromptResult, err error) {
	defer m.hideStoreErr(ctx, "get prompt", &err)
	t, err := m.st.GetTask(ctx, m.o.Agent, taskID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("get prompt: %w", &taskapi.NotFoundError{Message: taskapi.MsgTaskNotFound})
	}
	if err != nil {
		return nil, fmt.Errorf("get prompt: %w", err)
	}
	return &taskapi.PromptResult{TaskID: t.ID, Prompt: t.Prompt}, nil
}

// ---------------------------------------------------------- list_tasks

// deriveStatus is the status a task reports to its caller.
func deriveStatus(t *store.Task, b *taskapi.BlockedDelegation) taskapi.TaskStatus {
	switch {
	case b != nil:
		return taskapi.TaskNeedsHuman
	case t.Status == store.StatusRunning:
		return taskapi.TaskRunning
	case t.Status == store.StatusCancelled:
		return taskapi.TaskCancelled
	case agentsession.IsDelegateBlockedReason(t.TerminalReason):
		return taskapi.TaskNeedsHuman
	case t.Status == store.StatusCompleted || t.Status == store.StatusCompletedNoSummary:
		return taskapi.TaskDone
	case t.Artifacts.NeedsHumanDecision:
		return taskapi.TaskNeedsHuman
	case strings.Contains(t.Error, "session busy"):
		return taskapi.TaskBlocked
	}
	return taskapi.TaskFailed
}

func (m *Manager) summaryRow(ctx context.Context, t *store.Task) taskapi.TaskSummary {
	var b *taskapi.BlockedDelegation
	if a := m.attachment(ctx, t.SessionKey); a != nil {
		b = blocked(t, a)
	}
	if b != nil {
		b.Notice, _ = capRunes(b.Notice, SummaryPreviewMax)
	}
	sum, trunc := capRunes(t.Summary, SummaryPreviewMax)
	req, _ := capRunes(t.Prompt.Task, SummaryPreviewMax)
	return taskapi.TaskSummary{Request: req, TaskID: t.ID, JobID: t.ID, SessionKey: t.SessionKey, Agent: m.o.Agent, Status: deriveStatus(t, b),
		StartedAt: t.StartedAt, LastEventAt: t.LastEventAt, EndedAt: endedAt(t), Liveness: t.Liveness, Summary: sum, SummaryTruncated: trunc,
		Error: t.Error, BlockedDelegation: b, Principal: t.Principal}
}

// ListTasks is list_tasks: one row per session (its latest task), most
// recently active first, one bounded page (limit ≤ store.MaxPage; 0 means
// 100). The active view keeps queued, running, blocked and needs-human.
// only, when set, keeps the sessions that principal started.
func (m *Manager) ListTasks(ctx context.Context, view taskapi.ListView, limit int, only *string) (_ []taskapi.TaskSummary, err error) {
	defer m.hideStoreErr(ctx, "list tasks", &err)
	if view == "" {
		view = taskapi.ViewAll
	}
	if view != taskapi.ViewAll && view != taskapi.ViewActive {
		return nil, fmt.Errorf("list tasks: %w: unknown view %q", ErrInvalidInput, view)
	}
	rows, _, err := m.st.ListSessions(ctx, m.o.Agent, store.Page{Limit: limit, Principal: only})
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	out := []taskapi.TaskSummary{}
	for _, r := range rows {
		if r.Task == nil {
			continue
		}
		t := r.Task
		if l := m.getLive(t.ID); l != nil {
			t = l.copyTask()
		}
		row := m.summaryRow(ctx, t)
		if view == taskapi.ViewActive {
			switch row.Status {
			case taskapi.TaskQueued, taskapi.TaskRunning, taskapi.TaskBlocked, taskapi.TaskNeedsHuman:
			default:
				continue
			}
		}
		out = append(out, row)
	}
	return out, nil
}

// --------------------------------------------------------- get_session

// SessionRequest is get_session's input.
type SessionRequest struct {
	SessionID string
	Mode      taskapi.SessionMode
	Limit     int   // default 50, clamped to [1, 200]
	After     int64 // default 0
}

// GetSession is get_session over the session's latest task.
func (m *Manager) GetSession(ctx context.Context, req SessionRequest) (_ *taskapi.SessionResult, err error) {
	defer m.hideStoreErr(ctx, "get session", &err)
	if req.Mode == "" {
		req.Mode = taskapi.ModeSnapshot
	}
	switch req.Mode {
	case taskapi.ModeSnapshot, taskapi.ModeEvents, taskapi.ModeTail, taskapi.ModeTasks:
	default:
		return nil, fmt.Errorf("get session: %w: unknown mode %q", ErrInvalidInput, req.Mode)
	}
	limit := req.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 200)
	after := max(req.After, 0)
	if req.SessionID == "" || ValidateSessionKey(req.SessionID) != nil {
		return nil, fmt.Errorf("get session: %w", &taskapi.NotFoundError{Message: taskapi.MsgSessionNotFound})
	}
	s, err := m.st.GetSession(ctx, m.o.Agent, req.SessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("get session: %w", &taskapi.NotFoundError{Message: taskapi.MsgSessionNotFound})
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	t, _, err := m.current(ctx, s.LastJobID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("get session: %w", &taskapi.NotFoundError{Message: taskapi.MsgSessionNotFound})
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	res := &taskapi.SessionResult{Found: true, SessionKey: t.SessionKey, Agent: m.o.Agent, JobID: t.ID, Status: string(t.Status),
		StartedAt: t.StartedAt, LastEventAt: t.LastEventAt, Summary: t.Summary, Error: t.Error, Principal: s.Principal}
	if a := m.attachment(ctx, t.SessionKey); a != nil {
		res.AgentSession = a
	}
	switch req.Mode {
	case taskapi.ModeEvents, taskapi.ModeTail:
		es, err := m.st.Logs(ctx, t.ID, after, limit)
		if err != nil {
			return nil, fmt.Errorf("get session: %w", err)
		}
		res.Events = toLogEntries(es)
		if req.Mode == taskapi.ModeTail {
			n := after + int64(len(es))
			res.NextAfter = &n
		}
	case taskapi.ModeTasks:
		ts, _, err := m.st.SessionTasks(ctx, m.o.Agent, t.SessionKey, store.Page{Limit: limit})
		if err != nil {
			return nil, fmt.Errorf("get session: %w", err)
		}
		res.Tasks = []taskapi.TaskSummary{}
		for _, x := range ts {
			res.Tasks = append(res.Tasks, m.summaryRow(ctx, x))
		}
	}
	return res, nil
}

// ListSessions is list_sessions: the continuation state of the agent's
// most recently active sessions (one bounded page; 0 means 100), finished
// ones included. only, when set, keeps the sessions that principal started.
func (m *Manager) ListSessions(ctx context.Context, limit int, only *string) (_ *taskapi.SessionList, err error) {
	defer m.hideStoreErr(ctx, "list sessions", &err)
	rows, _, err := m.st.ListSessions(ctx, m.o.Agent, store.Page{Limit: limit, Principal: only})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out := &taskapi.SessionList{Sessions: []taskapi.ContinuationState{}, ConfiguredAgents: []string{m.o.Agent}}
	for _, r := range rows {
		if r.Task != nil {
			out.Sessions = append(out.Sessions, continuationOf(r.Task, m.o.Agent))
		}
	}
	return out, nil
}

// endedAt is when t reached its final status, or 0 while it runs (a
// provisional outcome a later read may replace still has its end time).
func endedAt(t *store.Task) int64 {
	if !t.Status.Terminal() {
		return 0
	}
	return t.EndedAt
}
