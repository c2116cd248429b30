package task

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/backoff"
	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
)

// live is the in-memory state of a task this process follows. Its record
// is written through to the store on every change; it is dropped when the
// task's follower returns.
type live struct {
	id string

	mu        sync.Mutex
	t         *store.Task
	done      chan struct{} // closed at the first terminal outcome
	ended     bool
	changed   chan struct{} // closed and replaced when a log entry lands or is held
	urgentSeq int64         // seq of the newest non-tool entry
	// heldSeq is the seq of the newest lifecycle entry held for the run
	// id's write (onEvent), which a poll-mode check_task writes at once.
	heldSeq    int64
	recent     []recentEntry // the last 6 entries, for echo suppression
	lastEvent  time.Time
	eventGen   uint64
	openTools  int
	cancelling chan struct{} // non-nil while a cancel is in flight; closed when it ends
	cancelRes  *taskapi.CancelResult
	// pending are log entries the store has not taken yet (an outage);
	// they follow t.LogCount densely and are written before anything else.
	pending []store.LogEntry
	// written are the last entries the store took from this follower
	// (dense, at most keptEntries), so that a check_task of the task
	// reads no log entry this process wrote itself.
	written []store.LogEntry
	// runUnsaved: t carries the run id and the connected/live states of a
	// run the gateway accepted, which the store does not have yet. They
	// ride on the task's next write (see holdRunLocked).
	runUnsaved bool

	stop     chan struct{} // closed to stop following without an outcome
	stopOnce sync.Once
	exited   chan struct{} // closed when the follower returned
}

type recentEntry struct {
	typ, tool string
	args      json.RawMessage
}

func newLive(t *store.Task) *live {
	return &live{
		id: t.ID, t: t, done: make(chan struct{}), changed: make(chan struct{}),
		lastEvent: time.UnixMilli(t.LastEventAt), stop: make(chan struct{}), exited: make(chan struct{}),
	}
}

func (l *live) isDone() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// keptEntries is how many written entries a live keeps: what a snapshot
// without a cursor reads (logsFor).
const keptEntries = 2 * InitialWindowMax

// keepWrittenLocked records entries the store just took. An entry that
// does not follow the kept ones (renumbered after an outage) starts over.
func (l *live) keepWrittenLocked(es []store.LogEntry) {
	if len(es) == 0 {
		return
	}
	if n := len(l.written); n > 0 && l.written[n-1].Seq+1 != es[0].Seq {
		l.written = nil
	}
	l.written = append(l.written, es...)
	if n := len(l.written); n > keptEntries {
		l.written = slices.Clone(l.written[n-keptEntries:])
	}
}

// keptLogs returns a copy of the entries kept (see written); nil for a
// nil live.
func (l *live) keptLogs() []store.LogEntry {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.written)
}

// abandon stops following without writing anything.
func (l *live) abandon() { l.stopOnce.Do(func() { close(l.stop) }) }

// copyTask returns a copy of the record (slices shared read-only).
func (l *live) copyTask() *store.Task {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := *l.t
	return &c
}

// getLive returns the live state of id, if followed here.
func (m *Manager) getLive(id string) *live {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.live[id]
}

func (m *Manager) forget(l *live) {
	m.mu.Lock()
	if m.live[l.id] == l {
		delete(m.live, l.id)
	}
	m.mu.Unlock()
	close(l.exited)
}

// update applies fn to the task's record and writes it (compare-and-set,
// fenced by the lease's token). On a conflict it reloads the record and
// re-applies fn; a record that became terminal elsewhere is adopted. A
// record another process claimed meanwhile is store.ErrLeaseLost: the
// caller must stop following. fn returns false to write nothing. Called
// with l.mu held.
func (m *Manager) updateLocked(ctx context.Context, l *live, fn func(t *store.Task) bool) error {
	for range 4 {
		next := *l.t
		if !fn(&next) {
			return nil
		}
		err := m.st.UpdateTask(ctx, &next)
		if err == nil {
			l.t, l.runUnsaved = &next, false
			if next.Status.Terminal() {
				l.markDoneLocked()
			}
			return nil
		}
		if errors.Is(err, store.ErrLeaseLost) {
			l.abandon()
			return err
		}
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		fresh, gerr := m.st.GetTask(ctx, m.o.Agent, l.id)
		if gerr != nil {
			return gerr
		}
		if fresh.Fence != l.t.Fence {
			l.abandon()
			return fmt.Errorf("update task %s: claimed by %s: %w", l.id, fresh.Owner, store.ErrLeaseLost)
		}
		fresh.LogCount = max(fresh.LogCount, l.t.LogCount)
		if l.runUnsaved && !fresh.Status.Terminal() {
			// The held run state is only in memory: keep it for the retry.
			fresh.ParentRunID, fresh.Upstream, fresh.Transcript = l.t.ParentRunID, l.t.Upstream, l.t.Transcript
		}
		l.t = fresh
		if fresh.Status.Terminal() {
			l.markDoneLocked()
		}
	}
	return fmt.Errorf("update task %s: %w", l.id, store.ErrConflict)
}

func (m *Manager) update(ctx context.Context, l *live, fn func(t *store.Task) bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return m.updateLocked(ctx, l, fn)
}

// wakeLocked wakes the check_task waits on l: a log entry landed or is
// held.
func (l *live) wakeLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *live) markDoneLocked() {
	if !l.ended {
		l.ended = true
		close(l.done)
	}
}

// maxPendingLogs bounds the log entries held back by a store outage; later
// ones are dropped (the log is progress, the outcome is what must land).
const maxPendingLogs = 1024

// appendLog stores one log entry (text capped) and wakes pollers.
func (m *Manager) appendLog(ctx context.Context, l *live, typ, text string, isErr bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m.appendLogLocked(ctx, l, typ, text, isErr, "", nil)
}

func (m *Manager) appendLogLocked(ctx context.Context, l *live, typ, text string, isErr bool, tool string, args json.RawMessage) {
	if m.queueLogLocked(l, typ, text, isErr, tool, args) {
		m.flushLogsLocked(ctx, l)
	}
}

// queueLogLocked adds one entry to the pending ones without writing it,
// and reports whether it was kept (a store outage may have filled the
// queue).
func (m *Manager) queueLogLocked(l *live, typ, text string, isErr bool, tool string, args json.RawMessage) bool {
	if isErr {
		text = config.RedactText(text)
	}
	if len(l.pending) >= maxPendingLogs {
		m.o.Logger.Warn("log entry dropped: the store has not taken the earlier ones yet", "job_id", l.id)
		return false
	}
	e := store.LogEntry{Seq: l.t.LogCount + int64(len(l.pending)) + 1, TS: m.nowMs(), Type: typ, Text: capLogText(text, m.o.LogEntryTextMax), IsError: isErr}
	l.pending = append(l.pending, e)
	if typ != "tool" && typ != "tool-result" {
		l.urgentSeq = e.Seq
	}
	l.recent = append(l.recent, recentEntry{typ: typ, tool: tool, args: args})
	if len(l.recent) > 6 {
		l.recent = l.recent[len(l.recent)-6:]
	}
	return true
}

// flushLogsLocked writes the pending log entries. A transient failure
// keeps them for the next attempt (the next entry, the next lease renewal,
// or the outcome write); a lost lease abandons the task. Called with l.mu
// held.
func (m *Manager) flushLogsLocked(ctx context.Context, l *live) error {
	if len(l.pending) == 0 {
		return nil
	}
	if l.runUnsaved {
		if m.writeWithLogsLocked(ctx, l, *l.t) == nil {
			return nil
		}
		// Two writes then, the record first (its update re-reads on a
		// conflict); a lost lease ends here.
		if err := m.saveRunLocked(ctx, l); errors.Is(err, store.ErrLeaseLost) {
			l.pending = nil
			return err
		}
	}
	err := m.st.AppendLogs(ctx, l.id, l.t.Fence, l.pending)
	switch {
	case err == nil:
		l.t.LogCount += int64(len(l.pending))
		l.keepWrittenLocked(l.pending)
		l.pending = nil
		l.wakeLocked()
		return nil
	case errors.Is(err, store.ErrLeaseLost):
		m.o.Logger.Warn("lease lost; another process follows the task now", "job_id", l.id, "err", err)
		l.pending = nil
		l.abandon()
		return err
	case errors.Is(err, store.ErrConflict):
		// The stored count moved (a write whose answer was lost in an
		// outage did land): renumber after it.
		if fresh, gerr := m.st.GetTask(ctx, m.o.Agent, l.id); gerr == nil && fresh.Fence == l.t.Fence {
			l.t.LogCount = fresh.LogCount
			for i := range l.pending {
				l.pending[i].Seq = fresh.LogCount + int64(i) + 1
			}
		}
	}
	if len(l.pending) == 1 || errors.Is(err, store.ErrConflict) {
		m.o.Logger.Warn("append log failed; keeping the entries to retry", "job_id", l.id, "pending", len(l.pending), "err", err)
	}
	return err
}

// isEcho reports whether a tool row repeats one of the last 6 entries: the
// same tool name with equal arguments, or with empty incoming arguments.
func (l *live) isEcho(tool string, args json.RawMessage) bool {
	empty := len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "{}" || string(bytes.TrimSpace(args)) == "null"
	for _, r := range l.recent {
		if r.typ == "tool" && r.tool == tool && (empty || jsonEqual(r.args, args)) {
			return true
		}
	}
	return false
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// onEvent turns one live event into log entries and artifacts.
func (m *Manager) onEvent(l *live, e Event) {
	ctx := m.ctx
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lastEvent = m.now()
	l.eventGen++
	l.t.LastEventAt = l.lastEvent.UnixMilli()
	if e.Seq > l.t.LastSeenSequence {
		l.t.LastSeenSequence = e.Seq
	}
	switch e.Kind {
	case EventLifecycle:
		phase := e.Phase
		if phase == "" {
			phase = "unknown"
		}
		if phase == "end" || phase == "error" {
			// The run is ending: the entry goes with the outcome, in its
			// transaction (or with the next lease renewal, should the
			// outcome wait for a recovery).
			m.queueLogLocked(l, "lifecycle", "Agent lifecycle: "+phase, false, "", nil)
			return
		}
		if l.runUnsaved || l.t.ParentRunID == "" {
			// The run id is not stored yet: the run's first entries wait
			// for the write that carries it (a tool call's entry, the
			// outcome, or saveRunLater), so a run that ends at once takes
			// one write transaction fewer. A poll-mode check_task here
			// writes them when it wants them (Check).
			if m.queueLogLocked(l, "lifecycle", "Agent lifecycle: "+phase, false, "", nil) {
				l.heldSeq = l.urgentSeq
				l.wakeLocked()
			}
			return
		}
		m.appendLogLocked(ctx, l, "lifecycle", "Agent lifecycle: "+phase, false, "", nil)
	case EventToolStart:
		l.openTools++
		if l.isEcho(e.Tool, e.Args) {
			return
		}
		summary := argString(e.Args, "command", "file_path", "pattern", "query")
		summary, _ = capRunes(summary, 80)
		m.appendLogLocked(ctx, l, "tool", e.Tool+": "+summary, false, e.Tool, e.Args)
		before := l.t.Artifacts
		a := before
		a.FilesChanged = append([]string(nil), before.FilesChanged...)
		a.CommandsRun = append([]string(nil), before.CommandsRun...)
		addToolArtifacts(&a, e.Tool, e.Args)
		if len(a.FilesChanged) != len(before.FilesChanged) || len(a.CommandsRun) != len(before.CommandsRun) {
			if err := m.updateLocked(ctx, l, func(t *store.Task) bool {
				t.Artifacts = a
				t.LastEventAt = l.t.LastEventAt
				return true
			}); err != nil {
				m.o.Logger.Warn("persist artifacts failed", "job_id", l.id, "err", err)
			}
		}
	case EventToolResult:
		if l.openTools > 0 {
			l.openTools--
		}
		word := "done"
		if e.IsError {
			word = "failed"
		}
		m.appendLogLocked(ctx, l, "tool-result", e.Tool+" "+word, e.IsError, e.Tool, nil)
	case EventRecovering:
		m.appendLogLocked(ctx, l, "recovery", "Connection to OpenClaw interrupted; recovering ("+e.Phase+").", false, "", nil)
	}
}

// outcome is one terminal result, written only through applyOutcome.
type outcome struct {
	status       store.Status
	summary      string
	err          string
	errInfo      *taskapi.ErrorInfo
	reason       string
	source       string
	provisional  bool
	cancellation string
}

// applyOutcome is the single outcome writer: it stamps o on t and bumps
// OutcomeVersion. It refuses to overwrite a final (non-provisional) outcome
// unless force is set by a caller that verified OutcomeVersion itself.
func applyOutcome(t *store.Task, o outcome, now int64, force bool) bool {
	if t.Status.Terminal() && !t.Provisional && !force {
		return false
	}
	t.Status = o.status
	t.Summary = o.summary
	// Errors quote what failed, which can be a configured URL with its
	// credentials; every MCP client can read them.
	t.Error = config.RedactText(o.err)
	t.ErrorInfo = o.errInfo
	if t.ErrorInfo != nil {
		ei := *t.ErrorInfo
		ei.Message = config.RedactText(ei.Message)
		t.ErrorInfo = &ei
	}
	if o.status == store.StatusError && t.ErrorInfo == nil {
		t.ErrorInfo = classifyError(t.Error)
	}
	if o.status != store.StatusError {
		t.ErrorInfo = nil
	}
	t.TerminalReason = o.reason
	t.ResultSource = o.source
	t.Provisional = o.provisional
	t.OutcomeVersion++
	t.EndedAt = now
	t.Transcript = "complete"
	if o.cancellation != "" {
		t.Cancellation = o.cancellation
	}
	if o.status == store.StatusCompleted {
		a := t.Artifacts
		a.FilesChanged = append([]string{}, a.FilesChanged...)
		a.CommandsRun = append([]string{}, a.CommandsRun...)
		addSummaryArtifacts(&a, o.summary)
		t.Artifacts = a
	}
	return true
}

// finish writes an outcome on a followed task. It reports whether it won.
// A write the store refuses for a transient reason (an outage, a busy lock)
// is retried with backoff and jitter, the held-back log entries first,
// until it lands, the lease is lost (another process then owns the task
// and its outcome), or ctx ends (the manager closes; the task stays
// running for the next follower).
func (m *Manager) finish(ctx context.Context, l *live, o outcome) bool {
	retry := backoff.Policy{Min: m.o.RetryMin, Max: m.o.RetryMax}
	for attempt := 1; ; attempt++ {
		won := false
		l.mu.Lock()
		if w, ok := m.finishWithLogsLocked(ctx, l, o); ok {
			l.mu.Unlock()
			if w {
				m.o.Logger.Info("task finished", "job_id", l.id, "status", string(o.status), "terminal_reason", o.reason)
			}
			return w
		}
		_ = m.flushLogsLocked(ctx, l)
		err := m.updateLocked(ctx, l, func(t *store.Task) bool {
			won = applyOutcome(t, o, m.nowMs(), false)
			return won
		})
		l.mu.Unlock()
		switch {
		case err == nil:
			if won {
				m.o.Logger.Info("task finished", "job_id", l.id, "status", string(o.status), "terminal_reason", o.reason)
			}
			return won
		case errors.Is(err, store.ErrLeaseLost):
			m.o.Logger.Warn("lease lost before the outcome was written; the new owner writes it", "job_id", l.id, "err", err)
			l.abandon()
			return false
		case ctx.Err() != nil:
			return false
		}
		if attempt == 1 || attempt%10 == 0 {
			m.o.Logger.Error("writing the task outcome failed; retrying", "job_id", l.id, "attempt", attempt, "err", err)
		}
		if !sleep(ctx, retry.Jittered(attempt)) {
			return false
		}
	}
}

// finishWithLogsLocked writes the outcome and the held-back log entries in
// one transaction (one write instead of two). ok is false when it did not
// write: no entries are held, the outcome would not be applied, or the
// write failed (atomically, so the caller's two writes start from the same
// state).
func (m *Manager) finishWithLogsLocked(ctx context.Context, l *live, o outcome) (won, ok bool) {
	if len(l.pending) == 0 {
		return false, false
	}
	next := *l.t
	if !applyOutcome(&next, o, m.nowMs(), false) {
		return false, false
	}
	if m.writeWithLogsLocked(ctx, l, next) != nil {
		return false, false
	}
	return true, true
}

// writeWithLogsLocked writes next, the task's record, and the pending log
// entries in one transaction, and on success makes next the live record.
// It fails without writing anything when the store refuses (atomically):
// the caller falls back to two writes.
func (m *Manager) writeWithLogsLocked(ctx context.Context, l *live, next store.Task) error {
	if err := m.st.UpdateTaskWithLogs(ctx, &next, l.pending); err != nil {
		return err
	}
	next.LogCount += int64(len(l.pending))
	l.keepWrittenLocked(l.pending)
	l.t, l.pending, l.runUnsaved = &next, nil, false
	l.wakeLocked()
	if next.Status.Terminal() {
		l.markDoneLocked()
	}
	return nil
}

// holdRunLocked records that the gateway accepted the task as runID: the
// record in memory (what this process's readers see) says so at once, the
// store at the task's next write — its first log entries, its outcome, a
// cancel — or, on a quiet run, when saveRunLater or the lease renewal
// writes it. That saves a write transaction per task on the path every
// task takes. Nothing is lost by holding it: a restart re-sends the task
// under its idempotency key and learns the run id again, and the other
// readers of the stored run id can do without it for that moment — a
// lazy re-check reads only terminal tasks, whose outcome write carries it,
// and a cancel from another process aborts the session's active run when
// no run id is stored (Gateway.Abort), which is this task's: the session
// runs one task at a time.
func (m *Manager) holdRunLocked(l *live, runID string) {
	if l.t.Status.Terminal() {
		return
	}
	l.t.ParentRunID = runID
	l.t.Upstream, l.t.Transcript = "connected", "live"
	l.runUnsaved = true
}

// persistRunLocked writes a held run state and the entries held with it
// now (in one transaction when there are entries).
func (m *Manager) persistRunLocked(ctx context.Context, l *live) {
	switch {
	case len(l.pending) > 0:
		_ = m.flushLogsLocked(ctx, l)
	case l.runUnsaved:
		_ = m.saveRunLocked(ctx, l)
	}
}

// saveRunLocked writes a held run state on its own.
func (m *Manager) saveRunLocked(ctx context.Context, l *live) error {
	if !l.runUnsaved {
		return nil
	}
	err := m.updateLocked(ctx, l, func(t *store.Task) bool { return !t.Status.Terminal() })
	if err != nil {
		m.o.Logger.Warn("persist run id failed", "job_id", l.id, "err", err)
	}
	return err
}
