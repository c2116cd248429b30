package gateway

// This file holds how a run recovers when its event stream cannot be
// trusted to end it: the agent.wait long-poll that yields an outcome after
// a dropped final event or a broken connection, the timers a run arms while
// it watches a restarted gateway, and the reconciliation against the
// session transcript, which may resubmit the run's idempotency key to a
// gateway that lost it. All of it runs on the run's loop goroutine, except
// the waiter, which the run owns and stops.

import (
	"context"
	"encoding/json"
	"time"
)

// startWaiter starts the agent.wait goroutine once.
func (r *Run) startWaiter(ctx context.Context) {
	r.waiterOnce.Do(func() {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.waiter(ctx)
		}()
	})
}

// after posts it to the run after d, replacing the timer in *slot.
func (r *Run) after(slot **time.Timer, d time.Duration, it runItem) {
	if *slot != nil {
		(*slot).Stop()
	}
	*slot = time.AfterFunc(d, func() { r.post(it) })
}

// stopTimers stops the pending recovery timers.
func (st *runState) stopTimers() {
	for _, t := range []*time.Timer{st.grace, st.recheck} {
		if t != nil {
			t.Stop()
		}
	}
}

// startRecovery begins watching the whole session after the gateway
// restarted: the new process may re-run our message under another run id
// (OpenClaw's main-session restart recovery), or may have lost it. After
// RestartGrace the run resubmits its idempotency key if the transcript
// still shows no answer and the session is idle.
func (r *Run) startRecovery(st *runState) {
	st.recovering = true
	c := r.c
	c.mu.Lock()
	c.runsBySess[r.key] = append(c.runsBySess[r.key], r)
	c.mu.Unlock()
	r.emit(RunEvent{Kind: EventRecovering, RunID: st.id, Phase: "gateway_restarted",
		Text: "the gateway restarted during the run; watching the session for its answer"})
	r.after(&st.grace, c.opts.RestartGrace, runItem{kind: itemUnknownRun, final: true})
	r.scheduleRecheck(st)
}

// recoveryRecheck is how often a run recovering from a gateway restart
// re-reads the transcript, in case the end of the gateway's re-run was
// not seen as an event.
const recoveryRecheck = 10 * time.Second

func (r *Run) scheduleRecheck(st *runState) {
	r.after(&st.recheck, recoveryRecheck, runItem{kind: itemUnknownRun, recheck: true})
}

// reconcile decides a run's fate from the transcript: an assistant row of
// the run, or (after a restart) the answer that follows the run's user
// message. With resubmit set and the session idle without an answer, it
// resubmits the same idempotency key to the restarted gateway.
func (r *Run) reconcile(ctx context.Context, st *runState, resubmit bool) (Outcome, bool) {
	h, err := r.c.History(ctx, HistoryRequest{SessionKey: r.key, Limit: 50})
	if err != nil {
		if resubmit {
			r.after(&st.grace, time.Second, runItem{kind: itemUnknownRun, final: true})
		}
		return Outcome{}, false
	}
	if t := h.RunText(st.id); t != "" {
		return r.outcome0(st, StatusOK, t, "", SourceHistory, ""), true
	}
	if !st.recovering {
		return Outcome{}, false
	}
	active := h.Session.HasActiveRun
	answer, found := h.AnswerAfter(st.id, r.req.Message)
	if found && answer != "" && !active {
		return r.outcome0(st, StatusOK, answer, "", SourceHistory, ""), true
	}
	if !resubmit || active {
		if resubmit { // still running: look again after another grace period
			r.after(&st.grace, r.c.opts.RestartGrace, runItem{kind: itemUnknownRun, final: true})
		}
		return Outcome{}, false
	}
	if r.req.NoResubmit || st.resubmits >= 3 {
		return Outcome{}, false
	}
	st.resubmits++
	if h := r.c.Hello(); h != nil {
		st.bootID = h.BootID
	}
	st.recovering = false
	r.c.mu.Lock()
	removeRun(r.c.runsBySess, r.key, r)
	r.c.mu.Unlock()
	r.emit(RunEvent{Kind: EventRecovering, RunID: st.id, Phase: "resubmitting",
		Text: "the restarted gateway has no answer for the run; resubmitting the same idempotency key"})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.submit(ctx, nil, nil)
	}()
	return Outcome{}, false
}

// waiter long-polls agent.wait until the run ends, so that a dropped final
// event or a broken stream still yields an outcome. It stops with the run.
func (r *Run) waiter(ctx context.Context) {
	const poll = 30 * time.Second
	delay := 250 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		res, err := r.c.CallWith(ctx, "agent.wait", map[string]any{"runId": r.ID(), "timeoutMs": poll.Milliseconds()},
			CallOptions{Timeout: poll + 10*time.Second})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			if w, perr := parseWait(res); perr == nil && (w.Status == "ok" || w.Status == "error") {
				r.post(runItem{kind: itemWait, payload: res})
				return
			}
		}
		if time.Since(start) >= poll/2 {
			delay = 250 * time.Millisecond
			continue
		}
		// Errors and quick answers: back off so as not to spin.
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(delay*2, 15*time.Second)
	}
}

func (r *Run) handleWait(ctx context.Context, st *runState, payload json.RawMessage) (Outcome, bool) {
	w, err := parseWait(payload)
	if err != nil {
		return Outcome{}, false
	}
	switch w.Status {
	case "ok":
		if w.ReplyText != "" && st.toolReply == "" {
			return r.outcome0(st, StatusOK, w.ReplyText, "", SourceAgentWait, ""), true
		}
		return r.finishOK(ctx, st, "", SourceAgentWait, "")
	case "error":
		if w.Error == "aborted" || w.StopReason == "rpc" { // the agent method reports an abort as stopReason rpc
			return r.outcome0(st, StatusAborted, st.best(), w.StopReason, SourceAgentWait, ""), true
		}
		return r.outcome0(st, StatusError, "", w.StopReason, SourceNone, w.Error), true
	}
	return Outcome{}, false
}
