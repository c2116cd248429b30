package task

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
)

// follow dispatches (or, taken over from prev, re-observes under the same
// idempotency key) one task and drives it to exactly one outcome. It owns
// l until it returns. Manager.Close ends it without writing anything.
// prepared, if not nil, ends Submit's early interest in the session's
// events once the run holds its own (prepareSession).
func (m *Manager) follow(l *live, prev *predecessor, prepared func()) {
	defer m.wg.Done()
	defer m.forget(l)
	ctx, cancel := context.WithCancel(m.ctx)
	defer cancel()
	go func() {
		select {
		case <-l.stop:
			cancel()
		case <-ctx.Done():
		}
	}()

	t := l.copyTask()
	if prev != nil {
		m.appendLog(ctx, l, "recovery", m.takeoverText(ctx, l, *prev), false)
	}
	startCtx, startCancel := context.WithTimeout(ctx, time.Minute)
	run, err := m.gw.StartRun(startCtx, RunRequest{
		SessionKey: t.SessionKey, Message: t.Message, IdempotencyKey: t.ID,
		OnEvent: func(e Event) { m.onEvent(l, e) },
	})
	startCancel()
	if prepared != nil {
		prepared()
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if m.cancelRequested(l) {
			m.finish(ctx, l, outcome{status: store.StatusCancelled, summary: "Cancelled before OpenClaw accepted the task.",
				reason: "cancelled-by-request", source: "parent", cancellation: "acknowledged"})
			return
		}
		m.finish(ctx, l, outcome{status: store.StatusError, err: "OpenClaw did not accept the task: " + err.Error(),
			reason: "chat-error", source: "parent"})
		return
	}
	defer run.Close()
	l.mu.Lock()
	m.holdRunLocked(l, run.ID())
	l.mu.Unlock()

	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	watchers.Go(func() { m.watchdog(watchCtx, l, t.SessionKey, run.ID()) })
	watchers.Go(func() { m.saveRunLater(watchCtx, l) })
	runCtx, runCancel := context.WithTimeout(ctx, m.o.ChatTimeout)
	out, err := run.Wait(runCtx)
	runCancel()
	stopWatch()
	watchers.Wait()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			m.lateRecovery(ctx, l, "parent_observation_timeout")
			return
		}
		m.finish(ctx, l, outcome{status: store.StatusError, err: "Lost the OpenClaw run: " + err.Error(), reason: "chat-error", source: "parent"})
		return
	}
	cur := l.copyTask()
	late := cur.Status.Terminal() && cur.Provisional
	switch out.Status {
	case OutcomeOK:
		reason := "live-final"
		if late {
			reason = "live-final-late"
		}
		m.finish(ctx, l, outcome{status: store.StatusCompleted, summary: out.Text, reason: reason, source: agentsession.ResultSourceParent})
	case OutcomeAborted:
		if m.cancelRequested(l) {
			m.finish(ctx, l, outcome{status: store.StatusCancelled, summary: "Cancelled by request.",
				reason: "cancelled-by-request", source: "parent", cancellation: "acknowledged"})
			return
		}
		m.finish(ctx, l, outcome{status: store.StatusError, err: "OpenClaw task aborted", reason: "chat-error", source: "parent"})
	case OutcomeError:
		msg := out.Error
		if msg == "" {
			msg = "OpenClaw task error"
		}
		m.finish(ctx, l, outcome{status: store.StatusError, err: msg, reason: "chat-error", source: "parent"})
	default:
		if late {
			return // a provisional outcome stands
		}
		m.lateRecovery(ctx, l, "no_live_final_text")
	}
}

// saveRunLater writes the held run state of a run that has written
// nothing else after RunSaveDelay, so the store does not lack the run id
// for longer than that (see holdRunLocked).
func (m *Manager) saveRunLater(ctx context.Context, l *live) {
	if !sleep(ctx, m.o.RunSaveDelay) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	m.persistRunLocked(ctx, l)
}

// cancelRequested reports whether a cancel was asked for the task: here,
// or through another replica (recorded in the store).
func (m *Manager) cancelRequested(l *live) bool {
	l.mu.Lock()
	asked := l.t.Cancellation == "requested" || l.cancelling != nil
	l.mu.Unlock()
	if asked {
		return true
	}
	fresh, err := m.st.GetTask(m.ctx, m.o.Agent, l.id)
	return err == nil && fresh.Cancellation == "requested"
}

// sleep waits d, or returns false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// watchdog is the quiet watchdog (tier 1): after ReconcileQuiet without
// live events (and no tool call outstanding) it takes two transcript
// samples; the same non-empty answer in two consecutive quiet rounds, with
// nothing active upstream and the transcript not advancing, completes the
// task provisionally.
func (m *Manager) watchdog(ctx context.Context, l *live, sessionKey, runID string) {
	prevKey, prevText := "", ""
	lastRound := m.now() // the quiet clock starts when following starts
	for {
		l.mu.Lock()
		quietSince := l.lastEvent
		if lastRound.After(quietSince) {
			quietSince = lastRound
		}
		wait := m.o.ReconcileQuiet - m.now().Sub(quietSince)
		tools := l.openTools
		terminal := l.t.Status.Terminal()
		l.mu.Unlock()
		if terminal {
			return
		}
		if wait > 0 || tools > 0 {
			if !sleep(ctx, max(wait, m.o.ReconcileQuiet/4, time.Millisecond)) {
				return
			}
			continue
		}
		l.mu.Lock()
		gen := l.eventGen
		l.mu.Unlock()
		h1, err1 := m.gw.History(ctx, sessionKey)
		if !sleep(ctx, m.o.ReconcileSampleInterval) {
			return
		}
		h2, err2 := m.gw.History(ctx, sessionKey)
		lastRound = m.now()
		l.mu.Lock()
		interrupted := l.eventGen != gen
		if err2 == nil {
			l.t.Liveness = &taskapi.Liveness{CheckedAt: m.nowMs(), Upstream: map[bool]string{true: "active", false: "unknown"}[upstreamActive(h2, runID)]}
		}
		l.mu.Unlock()
		if interrupted || err1 != nil || err2 != nil {
			prevKey, prevText = "", ""
			continue
		}
		k1, k2 := transcriptKey(h1), transcriptKey(h2)
		if upstreamActive(h2, runID) || k1 != k2 || (prevKey != "" && prevKey != k2) {
			l.mu.Lock()
			if l.t.Liveness != nil {
				l.t.Liveness.Producing = k1 != k2
			}
			l.mu.Unlock()
			prevKey, prevText = k2, ""
			continue
		}
		text := runText(h2, runID)
		if text != "" && text == prevText {
			m.appendLog(ctx, l, "recovery", "No live events; the transcript holds a stable answer — completed provisionally.", false)
			m.finish(ctx, l, outcome{status: store.StatusCompleted, summary: text, reason: "reconciled-transcript-match",
				source: agentsession.ResultSourceParent, provisional: true})
			return
		}
		prevKey, prevText = k2, text
	}
}

// lateRecovery watches the transcript after the live stream gave up, then
// falls through tier 3, blocked delegation, still-active and exhausted.
func (m *Manager) lateRecovery(ctx context.Context, l *live, reason string) {
	start := m.now()
	if err := m.update(ctx, l, func(t *store.Task) bool {
		if t.Status.Terminal() {
			return false
		}
		t.Recovery = &taskapi.Recovery{Reason: reason, StartedAt: start.UnixMilli(),
			IdleTimeoutMs: m.o.RecoveryIdleTimeout.Milliseconds(), HardCapMs: m.o.RecoveryTimeout.Milliseconds()}
		return true
	}); err != nil {
		m.o.Logger.Warn("persist recovery failed", "job_id", l.id, "err", err)
	}
	if l.isDone() {
		return
	}
	m.appendLog(ctx, l, "recovery", "Recovering late transcript final text ("+reason+").", false)
	t := l.copyTask()
	text, active, lastActive, reached := m.watchTranscript(ctx, l, t.SessionKey, t.ParentRunID, start)
	if ctx.Err() != nil || l.isDone() {
		return
	}
	if text != "" {
		m.finish(ctx, l, outcome{status: store.StatusCompleted, summary: text, reason: "late-recovery-transcript", source: agentsession.ResultSourceParent})
		return
	}
	if o, ok := m.tier3(ctx, t, false); ok {
		m.finish(ctx, l, o)
		return
	}
	if active {
		mins := int(m.now().Sub(start).Minutes())
		m.finish(ctx, l, outcome{status: store.StatusError, reason: "late-recovery-upstream-still-active", source: agentsession.ResultSourceParent,
			err: fmt.Sprintf("Stopped watching after %dm: OpenClaw run %s was last reported executing %s ago, but no final text reached the transcript. "+
				"It may still finish; read the session later or retry.", mins, t.ParentRunID, m.now().Sub(lastActive).Round(time.Second)),
			errInfo: &taskapi.ErrorInfo{Category: "timeout", SuggestedRecovery: "Check the session later, or retry the task."}})
		return
	}
	if reason == "parent_observation_timeout" {
		// The run never reached a terminal state upstream: no end event in
		// the whole live window and no answer after it. That is a failure
		// (most often a gateway that died or restarted mid-run), not a
		// turn that finished without text.
		why := "the transcript holds no answer for it"
		if !reached {
			why = "the gateway could not be reached to read the transcript"
		}
		m.finish(ctx, l, outcome{status: store.StatusError, reason: "late-recovery-no-terminal", source: agentsession.ResultSourceParent,
			err: fmt.Sprintf("OpenClaw never reported an end for run %s: no final event arrived within the %s live window, and %s. "+
				"The gateway may have died or restarted mid-run. Retry the task.", t.ParentRunID, m.o.ChatTimeout.Round(time.Second), why),
			errInfo: &taskapi.ErrorInfo{Category: "upstream_lost", SuggestedRecovery: "Retry the task; if it fails again, check the gateway with `clawconnect doctor`."}})
		return
	}
	m.finish(ctx, l, outcome{status: store.StatusCompletedNoSummary, summary: NoSummarySentinel, reason: "late-recovery-exhausted", source: agentsession.ResultSourceParent})
}

// tier3 asks the attached session for the turn's answer, then checks for a
// blocked delegation. ok reports an outcome to write.
func (m *Manager) tier3(ctx context.Context, t *store.Task, running bool) (outcome, bool) {
	if m.book == nil {
		return outcome{}, false
	}
	rec, err := m.book.Recover(ctx, t.SessionKey, t.ID, t.StartedAt)
	if err != nil {
		m.o.Logger.Warn("tier-3 recovery failed", "job_id", t.ID, "err", err)
	}
	if rec != nil {
		return outcome{status: store.StatusCompleted, summary: rec.Summary, reason: agentsession.TerminalReasonRecovery,
			source: rec.ResultSource, provisional: true}, true
	}
	cur, err := m.book.Current(ctx, t.SessionKey)
	if err != nil || cur == nil {
		return outcome{}, false
	}
	if b, ok := agentsession.BlockedDelegationFor(t.ID, running, cur); ok {
		return outcome{status: store.StatusCompletedNoSummary, summary: b.Notice,
			reason: agentsession.DelegateBlockedReason(b.State), source: agentsession.ResultSourceParent}, true
	}
	return outcome{}, false
}

// watchTranscript polls the transcript every RecoveryInterval until the
// run's text has been stable for 3 reads, the transcript went idle (with
// nothing active upstream) or the hard cap passed. It returns the text
// ("" if none), whether upstream was last seen active, and when, and
// whether any transcript read succeeded.
func (m *Manager) watchTranscript(ctx context.Context, l *live, sessionKey, runID string, start time.Time) (text string, active bool, lastActive time.Time, reached bool) {
	hard := start.Add(m.o.RecoveryTimeout)
	lastKey, stable := "", 0
	lastChange := m.now()
	for {
		h, err := m.gw.History(ctx, sessionKey)
		now := m.now()
		if err == nil {
			reached = true
			k := transcriptKey(h)
			if k == lastKey {
				stable++
			} else {
				lastKey, stable, lastChange = k, 1, now
			}
			active = upstreamActive(h, runID)
			if active {
				lastActive = now
			}
			l.mu.Lock()
			l.t.Liveness = &taskapi.Liveness{CheckedAt: now.UnixMilli(), Upstream: map[bool]string{true: "active", false: "unknown"}[active], Producing: stable == 1}
			l.mu.Unlock()
			if text := runText(h, runID); text != "" && stable >= 3 {
				return text, active, lastActive, reached
			}
		}
		if !now.Before(hard) {
			return "", active, lastActive, reached
		}
		if now.Sub(lastChange) >= m.o.RecoveryIdleTimeout {
			if !active {
				return "", false, lastActive, reached
			}
			lastChange = now // upstream still active: extend within the hard cap
		}
		select {
		case <-l.done:
			return "", active, lastActive, reached
		default:
		}
		if !sleep(ctx, min(m.o.RecoveryInterval, max(hard.Sub(now), time.Millisecond))) {
			return "", active, lastActive, reached
		}
	}
}
