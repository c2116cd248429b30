package task

import (
	"context"
	"errors"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/internal/store"
)

// lazyRecheckReads and lazyRecheckStable are the lazy re-check's transcript
// reads and required stable count.
const (
	lazyRecheckReads  = 4
	lazyRecheckStable = 2
)

// lazyRecheck is maybeRecoverTerminalJob: on a poll of a terminal
// completed_no_summary, error or provisional task that is its session's
// latest, read the transcript again (one read at a time per task, at most
// once per LazyRecheckSpacing). Text found replaces the outcome
// (lazy-recheck-transcript) unless the outcome changed meanwhile; for
// completed_no_summary it then tries tier 3, then relabels a blocked
// delegation. It reports whether it rewrote the outcome.
func (m *Manager) lazyRecheck(ctx context.Context, t *store.Task) (rewrote bool) {
	eligible := t.Status == store.StatusCompletedNoSummary || t.Status == store.StatusError || t.Provisional
	if !eligible || t.ParentRunID == "" || t.TerminalReason == "cancellation-not-confirmed" {
		return false
	}
	if s, err := m.st.GetSession(ctx, m.o.Agent, t.SessionKey); err != nil || s.LastJobID != t.ID {
		return false
	}
	now := m.now()
	m.recheckMu.Lock()
	if m.recheckBusy[t.ID] || now.Sub(m.recheckLast[t.ID]) < m.o.LazyRecheckSpacing {
		m.recheckMu.Unlock()
		return false
	}
	m.recheckBusy[t.ID] = true
	m.recheckLast[t.ID] = now
	if len(m.recheckLast) > 4096 {
		for id, at := range m.recheckLast {
			if now.Sub(at) >= m.o.LazyRecheckSpacing && !m.recheckBusy[id] {
				delete(m.recheckLast, id)
			}
		}
	}
	m.recheckMu.Unlock()
	defer func() {
		m.recheckMu.Lock()
		delete(m.recheckBusy, t.ID)
		m.recheckMu.Unlock()
	}()

	text := m.readStable(ctx, t.SessionKey, t.ParentRunID)
	if text != "" {
		if text == t.Summary && t.ResultSource != agentsession.ResultSourceAgentSession && !t.Provisional {
			return false
		}
		return m.rewrite(ctx, t, outcome{status: store.StatusCompleted, summary: text, reason: "lazy-recheck-transcript",
			source: agentsession.ResultSourceParent})
	}
	if t.Status != store.StatusCompletedNoSummary {
		return false
	}
	if o, ok := m.tier3(ctx, t, false); ok {
		if o.reason == t.TerminalReason && o.summary == t.Summary {
			return false // already labelled: idempotent
		}
		return m.rewrite(ctx, t, o)
	}
	return false
}

// readStable reads the transcript up to lazyRecheckReads times and returns
// the run's text once its snapshot key was stable for lazyRecheckStable
// reads.
func (m *Manager) readStable(ctx context.Context, sessionKey, runID string) string {
	lastKey, stable := "", 0
	for i := range lazyRecheckReads {
		if i > 0 && !sleep(ctx, m.o.LazyRecheckInterval) {
			return ""
		}
		h, err := m.gw.History(ctx, sessionKey)
		if err != nil {
			continue
		}
		k := transcriptKey(h)
		if k == lastKey {
			stable++
		} else {
			lastKey, stable = k, 1
		}
		if text := runText(h, runID); text != "" && stable >= lazyRecheckStable {
			return text
		}
	}
	return ""
}

// rewrite replaces a terminal outcome if it has not changed since t was
// read (OutcomeVersion compare).
func (m *Manager) rewrite(ctx context.Context, t *store.Task, o outcome) bool {
	fresh, err := m.st.GetTask(ctx, m.o.Agent, t.ID)
	if err != nil || fresh.OutcomeVersion != t.OutcomeVersion {
		return true // changed meanwhile: the caller re-reads
	}
	applyOutcome(fresh, o, m.nowMs(), true)
	if err := m.st.UpdateTask(ctx, fresh); err != nil && !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrLeaseLost) {
		m.o.Logger.Warn("lazy re-check write failed", "job_id", t.ID, "err", err)
	}
	return true
}
