package task

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
)

// abortTimeout bounds the gateway abort of a cancel.
const abortTimeout = 15 * time.Second

// Cancel is cancel_task: it asks OpenClaw to stop the task's run and waits
// for the gateway's answer (at most 15 s). A confirmed abort ends the task
// cancelled (cancelled-by-request); an unconfirmed one ends it in error
// (cancellation-not-confirmed). Idempotent: a second call while an abort is
// in flight waits on the same operation.
func (m *Manager) Cancel(ctx context.Context, taskID, sessionKey string) (_ *taskapi.CancelResult, err error) {
	defer m.hideStoreErr(ctx, "cancel task", &err)
	if taskID == "" && sessionKey == "" {
		return nil, fmt.Errorf("cancel task: %w: %s", ErrInvalidInput, taskapi.MsgCancelNeedsTarget)
	}
	t, err := m.resolve(ctx, taskID, sessionKey, taskapi.MsgCancelNotFound)
	if err != nil {
		var nf *taskapi.NotFoundError
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("cancel task: %w", &taskapi.NotFoundError{Message: taskapi.MsgCancelNotFound})
		}
		return nil, fmt.Errorf("cancel task: %w", err)
	}
	terminal := func(t *store.Task) *taskapi.CancelResult {
		return &taskapi.CancelResult{Found: true, AlreadyTerminal: true, Status: string(t.Status), JobID: t.ID,
			Note: fmt.Sprintf("Task already finished with status %q — nothing to stop.", t.Status)}
	}
	if t.Status.Terminal() {
		return terminal(t), nil
	}
	l := m.getLive(t.ID)
	if l == nil {
		return m.cancelForeign(ctx, t)
	}
	l.mu.Lock()
	if l.t.Status.Terminal() {
		c := *l.t
		l.mu.Unlock()
		return terminal(&c), nil
	}
	if wait := l.cancelling; wait != nil {
		l.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("cancel task: %w", ctx.Err())
		}
		l.mu.Lock()
		res := *l.cancelRes
		l.mu.Unlock()
		return &res, nil
	}
	wait := make(chan struct{})
	l.cancelling = wait
	if err := m.updateLocked(ctx, l, func(t *store.Task) bool {
		t.Cancellation = "requested"
		return !t.Status.Terminal()
	}); err != nil {
		m.o.Logger.Warn("persist cancellation request failed", "job_id", l.id, "err", err)
	}
	m.appendLogLocked(ctx, l, "lifecycle", "Stop requested by the caller.", false, "", nil)
	runID, key := l.t.ParentRunID, l.t.SessionKey
	l.mu.Unlock()

	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	aborted, aerr := m.gw.Abort(actx, key, runID)
	cancel()
	// Bounded: if the store is out for longer, the follower writes the
	// outcome of the aborted run when it returns.
	fctx, cancel := context.WithTimeout(m.ctx, abortTimeout)
	m.finish(fctx, l, cancelOutcome(key, aborted, aerr))
	cancel()
	res := &taskapi.CancelResult{Found: true, Requested: true, JobID: t.ID}
	l.mu.Lock()
	res.Status = string(l.t.Status)
	l.cancelRes = res
	l.cancelling = nil
	close(wait)
	l.mu.Unlock()
	return res, nil
}

func cancelOutcome(key string, aborted bool, err error) outcome {
	if aborted && err == nil {
		return outcome{status: store.StatusCancelled, summary: "Cancelled by request.", reason: "cancelled-by-request",
			source: "parent", cancellation: "acknowledged"}
	}
	msg := "Cancellation was requested, but OpenClaw reported no active run for session " + key + "."
	if err != nil {
		msg = "Cancellation request failed before OpenClaw confirmed the stop: " + err.Error()
	}
	return outcome{status: store.StatusError, err: msg, reason: "cancellation-not-confirmed", source: "parent",
		cancellation: "reconciled", errInfo: &taskapi.ErrorInfo{Category: "timeout", Message: msg,
			SuggestedRecovery: "Check get_task or get_session; the run may have already ended."}}
}

// cancelForeign cancels a running task that another replica follows: the
// abort goes to the gateway, the outcome through the store's
// compare-and-set (the owner adopts it on its next write).
func (m *Manager) cancelForeign(ctx context.Context, t *store.Task) (*taskapi.CancelResult, error) {
	// Record the request first, so the owner counts the abort it is about
	// to see as a confirmed cancellation.
	t, err := m.updateStored(ctx, t, func(next *store.Task) bool {
		if next.Status.Terminal() || next.Cancellation == "requested" {
			return false
		}
		next.Cancellation = "requested"
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("cancel task: %w", err)
	}
	if t.Status.Terminal() {
		return &taskapi.CancelResult{Found: true, AlreadyTerminal: true, Status: string(t.Status), JobID: t.ID,
			Note: fmt.Sprintf("Task already finished with status %q — nothing to stop.", t.Status)}, nil
	}
	// The run id may not be stored yet (the owner holds it for its next
	// write, RunSaveDelay at most): without it the abort names the
	// session's active run, which is this task's — a session runs one task
	// at a time.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	aborted, aerr := m.gw.Abort(actx, t.SessionKey, t.ParentRunID)
	cancel()
	o := cancelOutcome(t.SessionKey, aborted, aerr)
	t, err = m.updateStored(ctx, t, func(next *store.Task) bool {
		if next.Status.Terminal() {
			return false
		}
		applyOutcome(next, o, m.nowMs(), false)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("cancel task: %w", err)
	}
	return &taskapi.CancelResult{Found: true, Requested: true, Status: string(t.Status), JobID: t.ID}, nil
}

// updateStored writes change applied to a copy of t, the stored record of a
// task this process does not follow (compare-and-set): on a conflict it
// re-reads the record and applies change again, at most 4 times. change
// returns false when there is nothing to write. It returns the record as
// last written or read.
func (m *Manager) updateStored(ctx context.Context, t *store.Task, change func(next *store.Task) bool) (*store.Task, error) {
	for range 4 {
		next := *t
		if !change(&next) {
			return t, nil
		}
		err := m.st.UpdateTask(ctx, &next)
		if err == nil {
			return &next, nil
		}
		// A claim between the read and the write moves the fence: that
		// is a change like any other, so re-read.
		if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrLeaseLost) {
			return nil, err
		}
		if t, err = m.st.GetTask(ctx, m.o.Agent, t.ID); err != nil {
			return nil, err
		}
	}
	return t, nil
}
