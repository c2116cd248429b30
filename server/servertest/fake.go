// Package servertest provides an in-memory implementation of server.Tasks
// for tests and benchmarks of the MCP server and the CLI: tasks finish when
// the test says so, and a waiting Check wakes on every change.
package servertest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/taskapi"
)

// Tasks is an in-memory server.Tasks. It is safe for concurrent use.
type Tasks struct {
	mu      sync.Mutex
	n       int
	jobs    map[string]*fakeJob
	latest  map[string]string // sessionKey -> jobID
	changed chan struct{}     // closed and replaced on every change
	// Waiting receives the jobID each time a Check starts waiting.
	Waiting chan string
	// RunErr, when set, fails every Run.
	RunErr  error
	runs    []server.RunRequest
	cancels []string
	// Instant makes new jobs finish at once ("instant gateway").
	Instant bool
	// Clock, when set, stamps a job's startedAt and lastEventAt when it
	// runs and its endedAt when it finishes; nil stamps them all 1.
	Clock func() time.Time
}

type fakeJob struct {
	snap    taskapi.Snapshot
	prompt  taskapi.Prompt
	endedAt int64
}

// stampLocked is the Clock's time in Unix ms, or 1 without a Clock.
func (f *Tasks) stampLocked() int64 {
	if f.Clock == nil {
		return 1
	}
	return f.Clock().UnixMilli()
}

// New returns an empty Tasks.
func New() *Tasks {
	return &Tasks{
		jobs:    make(map[string]*fakeJob),
		latest:  make(map[string]string),
		changed: make(chan struct{}),
		Waiting: make(chan string, 16),
	}
}

// Runs returns the accepted run requests in order.
func (f *Tasks) Runs() []server.RunRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]server.RunRequest(nil), f.runs...)
}

func (f *Tasks) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// Run implements server.Tasks.
func (f *Tasks) Run(_ context.Context, req server.RunRequest) (taskapi.RunResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.RunErr != nil {
		return taskapi.RunResult{}, f.RunErr
	}
	f.runs = append(f.runs, req)
	f.n++
	id := fmt.Sprintf("job-%d", f.n)
	key := req.SessionKey
	if key == "" {
		key = fmt.Sprintf("agent:%s:clawconnect:%d", req.Agent, f.n)
	}
	if prev, ok := f.latest[key]; ok && !f.jobs[prev].snap.IsTerminal {
		return taskapi.RunResult{}, &busyError{jobID: prev}
	}
	next := &taskapi.NextAction{Tool: "check_task", Args: taskapi.NextActionArgs{JobID: id, SessionKey: key}}
	at := f.stampLocked()
	j := &fakeJob{
		snap: taskapi.Snapshot{
			JobID: id, TaskID: id, SessionKey: key, Status: "running", Execution: "running", Upstream: "connected",
			Transcript: "live", Cancellation: "none", StartedAt: at, LastEventAt: at, Agent: req.Agent,
			Logs: []taskapi.LogEntry{}, ContinuePolling: true, NextAction: next,
		},
		prompt: taskapi.Prompt{Task: req.Task, Context: req.Context, SenderName: req.SenderName},
	}
	f.jobs[id] = j
	f.latest[key] = id
	if f.Instant {
		f.finishLocked(id, "completed", "done: "+req.Task)
	}
	return taskapi.RunResult{JobID: id, TaskID: id, SessionKey: key, Status: "running", Execution: "running",
		Upstream: "connected", Transcript: "live", Cancellation: "none", Agent: req.Agent, NextAction: next}, nil
}

func (f *Tasks) finishLocked(id, status, text string) {
	j := f.jobs[id]
	j.snap.Status = status
	j.snap.IsTerminal = true
	j.endedAt = f.stampLocked()
	j.snap.ContinuePolling = false
	j.snap.NextAction = nil
	switch status {
	case "error":
		j.snap.Error, j.snap.IsError, j.snap.Execution = text, true, "failed"
	case "cancelled":
		j.snap.Execution, j.snap.Cancellation = "cancelled", "acknowledged"
	default:
		j.snap.Summary, j.snap.Execution = text, "completed"
	}
	f.notifyLocked()
}

// Finish ends a job with status ("completed", "error", "cancelled") and
// the summary or error text.
func (f *Tasks) Finish(id, status, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finishLocked(id, status, text)
}

// Log appends a log entry to a job.
func (f *Tasks) Log(id, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j := f.jobs[id]
	j.snap.LogCursor++
	j.snap.LogEventCount++
	j.snap.Logs = append(j.snap.Logs, taskapi.LogEntry{TS: 2, Type: "assistant", Text: text, Seq: j.snap.LogCursor})
	f.notifyLocked()
}

func (f *Tasks) resolveLocked(jobID, sessionKey string) (*fakeJob, bool) {
	if j, ok := f.jobs[jobID]; ok {
		return j, true
	}
	if id, ok := f.latest[sessionKey]; ok {
		return f.jobs[id], true
	}
	return nil, false
}

// Check implements server.Tasks.
func (f *Tasks) Check(ctx context.Context, req server.CheckRequest, onUpdate func(taskapi.Snapshot)) (taskapi.Snapshot, error) {
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	f.mu.Lock()
	j, ok := f.resolveLocked(req.JobID, req.SessionKey)
	if !ok {
		f.mu.Unlock()
		return taskapi.Snapshot{}, server.ErrNotFound
	}
	j.snap.PollCount++
	signalled := false
	for {
		snap := j.snap
		if snap.IsTerminal || (req.Mode == server.ModePoll && snap.LogCursor > req.KnownLogCount) {
			f.mu.Unlock()
			return snap, nil
		}
		changed := f.changed
		f.mu.Unlock()
		if !signalled {
			signalled = true
			select {
			case f.Waiting <- snap.JobID:
			default:
			}
		}
		select {
		case <-ctx.Done():
			return taskapi.Snapshot{}, ctx.Err()
		case <-timer.C:
			return snap, nil
		case <-changed:
		}
		f.mu.Lock()
		if onUpdate != nil && !j.snap.IsTerminal {
			onUpdate(j.snap)
		}
	}
}

// GetTask implements server.Tasks.
func (f *Tasks) GetTask(_ context.Context, id string, detail taskapi.Detail, _ int64) (taskapi.TaskDetail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return taskapi.TaskDetail{}, server.ErrNotFound
	}
	s := j.snap
	d := taskapi.TaskDetail{TaskID: s.TaskID, JobID: s.JobID, SessionKey: s.SessionKey, Agent: s.Agent, Status: s.Status,
		Execution: s.Execution, Upstream: s.Upstream, Transcript: s.Transcript, Cancellation: s.Cancellation,
		StartedAt: s.StartedAt, LastEventAt: s.LastEventAt, EndedAt: j.endedAt, PollCount: s.PollCount, ContinuePolling: s.ContinuePolling,
		NextAction: s.NextAction, IsTerminal: s.IsTerminal, IsError: s.IsError}
	if detail != taskapi.DetailCore {
		d.Summary = s.Summary
	}
	return d, nil
}

// GetPrompt implements server.Tasks.
func (f *Tasks) GetPrompt(_ context.Context, id string) (taskapi.PromptResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return taskapi.PromptResult{}, server.ErrNotFound
	}
	return taskapi.PromptResult{TaskID: id, Prompt: j.prompt}, nil
}

// ListTasks implements server.Tasks.
func (f *Tasks) ListTasks(_ context.Context, view taskapi.ListView, _ *string) ([]taskapi.TaskSummary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []taskapi.TaskSummary
	for i := f.n; i >= 1; i-- {
		j := f.jobs[fmt.Sprintf("job-%d", i)]
		if j == nil || f.latest[j.snap.SessionKey] != j.snap.JobID {
			continue
		}
		st := taskapi.TaskDone
		if !j.snap.IsTerminal {
			st = taskapi.TaskRunning
		} else if j.snap.IsError {
			st = taskapi.TaskFailed
		} else if j.snap.Status == "cancelled" {
			st = taskapi.TaskCancelled
		}
		if view == taskapi.ViewActive && st != taskapi.TaskRunning {
			continue
		}
		out = append(out, taskapi.TaskSummary{TaskID: j.snap.TaskID, JobID: j.snap.JobID, SessionKey: j.snap.SessionKey, Agent: j.snap.Agent, Status: st,
			StartedAt: j.snap.StartedAt, LastEventAt: j.snap.LastEventAt, EndedAt: j.endedAt})
	}
	return out, nil
}

// GetSession implements server.Tasks.
func (f *Tasks) GetSession(_ context.Context, req server.SessionRequest) (taskapi.SessionResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, ok := f.latest[req.SessionID]
	if !ok {
		return taskapi.SessionResult{}, server.ErrNotFound
	}
	s := f.jobs[id].snap
	r := taskapi.SessionResult{Found: true, SessionKey: s.SessionKey, Agent: s.Agent, JobID: s.JobID, Status: s.Status, Summary: s.Summary}
	if req.Mode == taskapi.ModeEvents || req.Mode == taskapi.ModeTail {
		logs := s.Logs[min(req.After, len(s.Logs)):]
		logs = logs[:min(req.Limit, len(logs))]
		r.Events = logs
		if req.Mode == taskapi.ModeTail {
			n := int64(req.After + len(logs))
			r.NextAfter = &n
		}
	}
	return r, nil
}

// ListSessions implements server.Tasks.
func (f *Tasks) ListSessions(context.Context, *string) ([]taskapi.ContinuationState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []taskapi.ContinuationState{}
	for key, id := range f.latest {
		out = append(out, taskapi.ContinuationState{SessionKey: key, LastJobID: id, LastSummary: f.jobs[id].snap.Summary, Agent: f.jobs[id].snap.Agent})
	}
	return out, nil
}

// Cancel implements server.Tasks.
func (f *Tasks) Cancel(_ context.Context, id string) (taskapi.CancelResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	if !ok {
		return taskapi.CancelResult{}, server.ErrNotFound
	}
	f.cancels = append(f.cancels, id)
	if j.snap.IsTerminal {
		return taskapi.CancelResult{Found: true, AlreadyTerminal: true, Status: j.snap.Status, JobID: id}, nil
	}
	f.finishLocked(id, "cancelled", "")
	return taskapi.CancelResult{Found: true, Requested: true, Status: "running", JobID: id}, nil
}

// CountByStatus implements server.StatusCounter.
func (f *Tasks) CountByStatus(context.Context) (map[string]int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, j := range f.jobs {
		out[j.snap.Status]++
	}
	return out, nil
}

// GatewayStates implements server.GatewayStater.
func (f *Tasks) GatewayStates() map[string]string {
	return map[string]string{"alpha": "connected", "beta": "reconnecting"}
}

// busyError mimics the task manager's session-busy rejection text.
type busyError struct{ jobID string }

func (e *busyError) Error() string {
	return "A task is already running on this session (jobId " + e.jobID + ")."
}
