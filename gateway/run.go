package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// A run's life: StartRun subscribes, submits and confirms the run id; the
// frames of the session are queued (bounded, oldest dropped) for the run's
// loop goroutine until it ends, is closed or its Client closes. How those
// frames become RunEvents and an Outcome is in outcome.go.

// MaxPreRunFrames bounds the frames buffered for a run before its run id is
// confirmed. When full, the oldest agent frame is evicted first, then the
// oldest chat frame.
const MaxPreRunFrames = 500

// maxQueued bounds the unprocessed items of a run whose id is known. Beyond
// it non-terminal events are dropped (counted in Stats.DroppedEvents).
const maxQueued = 1 << 14

// Mode selects the method used to submit a run.
type Mode int

const (
	// ModeAgent submits with the agent method (the default). In a busy
	// session the message is queued in the session lane and answered by its
	// own run after the active one ends; the run id is the idempotency key.
	ModeAgent Mode = iota
	// ModeChatSend submits with chat.send, like a chat UI. In a busy session
	// the gateway steers the message into the active run and ends this run at
	// once with an empty final: the Outcome is StatusSteered and the reply
	// arrives in the other run.
	ModeChatSend
)

// RunRequest is a message to submit to a session.
type RunRequest struct {
	// SessionKey of the target session, e.g. "agent:main:task-42". A key
	// without the "agent:" prefix is canonicalized with the gateway's
	// default agent id. Required.
	SessionKey string
	// Message is the user message. Required.
	Message string
	// IdempotencyKey must be stable for one logical submission (derive it
	// from your task id): the gateway uses it as the run id, and a resubmit
	// with the same key joins the existing run instead of starting a second
	// one. Required.
	IdempotencyKey string
	// AgentID optionally targets a specific agent.
	AgentID string
	// Mode selects agent (default) or chat.send submission.
	Mode Mode
	// OnEvent, if set, receives the run's normalized events in order. It is
	// called from the run's own goroutine; it must not block for long and
	// must not call Wait or Close on the same run.
	OnEvent func(RunEvent)
	// NoResubmit disables resubmitting the idempotency key after a gateway
	// restart made the gateway forget the run.
	NoResubmit bool
}

// Run follows one submitted run. Its goroutines stop when the run ends, on
// Close, or when the Client closes. Safe for concurrent use.
type Run struct {
	c       *Client
	req     RunRequest
	key     string // canonical session key
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	done    chan struct{}
	notify  chan struct{}
	stopped sync.Once
	// waiterOnce guards the start of the agent.wait goroutine.
	waiterOnce sync.Once

	mu      sync.Mutex
	unwatch func() // releases the session subscription; nil until taken
	id      string // confirmed run id, "" until the submit answer
	queue   []runItem
	outcome Outcome
	err     error
	ended   bool
}

type itemKind int

const (
	itemEvent itemKind = iota
	itemAccepted
	itemFinalRes
	itemSubmitErr
	itemWait
	itemDisconnected
	itemReconnected
	itemUnknownRun
	itemStartWaiter
)

type runItem struct {
	kind    itemKind
	final   bool   // itemUnknownRun: the restart grace has passed; resubmit if still nothing
	recheck bool   // itemUnknownRun: periodic transcript check while recovering
	event   string // chat or agent
	p       *runPayload
	payload json.RawMessage
	err     error
}

// ErrInvalidRunRequest is returned by StartRun for a request missing a
// required field.
var ErrInvalidRunRequest = errors.New("invalid run request")

// StartRun subscribes to the session's events, submits req and returns once
// the gateway has acknowledged it (or the submit failed). The returned Run
// then follows the run in the background; call Wait for the Outcome and
// Close when no longer interested. ctx bounds only the submission.
func (c *Client) StartRun(ctx context.Context, req RunRequest) (*Run, error) {
	if req.SessionKey == "" || req.Message == "" || req.IdempotencyKey == "" {
		return nil, fmt.Errorf("start run: %w: sessionKey, message and idempotencyKey are required", ErrInvalidRunRequest)
	}
	rctx, cancel := context.WithCancel(context.Background())
	r := &Run{
		c: c, req: req, key: c.CanonicalSessionKey(req.SessionKey), cancel: cancel,
		done: make(chan struct{}), notify: make(chan struct{}, 1),
	}
	// Listen before submitting: register by expected run id and by session.
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("start run: %w", ErrClosed)
	}
	c.allRuns[r] = struct{}{}
	c.runsByID[req.IdempotencyKey] = append(c.runsByID[req.IdempotencyKey], r)
	c.runsBySess[r.key] = append(c.runsBySess[r.key], r)
	c.mu.Unlock()
	// On a session-scoped connection the gateway sends the session's
	// events only once it confirmed the subscription: wait for that before
	// submitting, so that no event of the run is lost.
	unwatch, err := c.WatchSession(ctx, r.key)
	if err != nil {
		r.stop(err)
		cancel()
		return nil, fmt.Errorf("start run: %w", err)
	}
	r.mu.Lock()
	r.unwatch = unwatch
	ended := r.ended
	r.mu.Unlock()
	if ended { // Client.Close stopped the run meanwhile
		unwatch()
		return nil, fmt.Errorf("start run: %w", ErrClosed)
	}

	accepted := make(chan string, 1)
	failed := make(chan error, 1)
	// One count for the loop goroutine, taken now: every later wg.Add then
	// happens while the count is above zero, never concurrently with a
	// Wait (Run.Close, Client.Close) that could see zero.
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		r.submit(rctx, accepted, failed)
	}()
	select {
	case id := <-accepted:
		r.confirm(id)
	case err := <-failed:
		r.stop(err)
		r.wg.Done()
		r.wg.Wait()
		return nil, fmt.Errorf("start run: %w", err)
	case <-ctx.Done():
		r.stop(ctx.Err())
		r.wg.Done()
		r.wg.Wait()
		return nil, fmt.Errorf("start run: %w", ctx.Err())
	}
	if req.Mode == ModeChatSend {
		// chat.send has no final answer of its own: agent.wait backs up the
		// chat final from the start. With the agent method the final answer
		// does that, and the waiter starts only when it cannot come
		// (disconnect, in_flight join).
		r.startWaiter(rctx)
	}
	go func() {
		defer r.wg.Done()
		r.loop(rctx)
	}()
	return r, nil
}

// submitParams builds the params of the submit call.
func (r *Run) submitParams() (string, map[string]any) {
	p := map[string]any{"message": r.req.Message, "idempotencyKey": r.req.IdempotencyKey}
	if r.req.AgentID != "" {
		p["agentId"] = r.req.AgentID
	}
	p["sessionKey"] = r.key
	if r.req.Mode == ModeChatSend {
		return "chat.send", p
	}
	return "agent", p
}

// submit sends the run. The first answer's run id goes to accepted (once);
// a failure before any answer goes to failed. When accepted is nil (a
// resubmission) everything is posted to the run instead. For the agent
// method the final answer is posted to the run as itemFinalRes.
func (r *Run) submit(ctx context.Context, accepted chan<- string, failed chan<- error) {
	method, params := r.submitParams()
	var acked atomic.Bool
	ack := func(payload json.RawMessage) {
		if acked.Swap(true) {
			return
		}
		var a struct {
			RunID string `json:"runId"`
		}
		_ = json.Unmarshal(payload, &a)
		if a.RunID == "" {
			a.RunID = r.req.IdempotencyKey
		}
		if accepted != nil {
			accepted <- a.RunID
		}
	}
	o := CallOptions{ExpectFinal: method == "agent", OnAccepted: ack}
	if method == "agent" {
		o.Timeout = -1 // the final answer comes when the run ends
	}
	payload, err := r.c.CallWith(ctx, method, params, o)
	if err != nil {
		var re *RPCError
		switch {
		case errors.As(err, &re) && len(re.Payload) > 0 && acked.Load():
			// agent: a failed run's final answer carries error and payload.
			r.post(runItem{kind: itemFinalRes, payload: re.Payload, err: err})
		case acked.Load() || failed == nil:
			r.post(runItem{kind: itemSubmitErr, err: err})
		default:
			failed <- err
		}
		return
	}
	wasAcked := acked.Load()
	ack(payload)
	if method == "agent" && wasAcked {
		r.post(runItem{kind: itemFinalRes, payload: payload})
		return
	}
	// A single answer: "started"/"in_flight" (keep following events) or the
	// stored result of a run that already ended ("ok").
	if st := payloadStatus(payload); st == "ok" || st == "error" {
		r.post(runItem{kind: itemFinalRes, payload: payload})
		return
	}
	if method == "agent" {
		// "in_flight": we joined a run started by an earlier submit; its
		// final answer goes to that request, so wait with agent.wait.
		r.post(runItem{kind: itemStartWaiter})
	}
}

// confirm records the run id and re-indexes the run under it.
func (r *Run) confirm(id string) {
	c := r.c
	c.mu.Lock()
	r.mu.Lock()
	r.id = id
	r.mu.Unlock()
	removeRun(c.runsBySess, r.key, r)
	if id != r.req.IdempotencyKey {
		removeRun(c.runsByID, r.req.IdempotencyKey, r)
		c.runsByID[id] = append(c.runsByID[id], r)
	}
	c.mu.Unlock()
	r.signal()
}

func removeRun(m map[string][]*Run, k string, r *Run) {
	s := m[k]
	for i, x := range s {
		if x == r {
			s = append(s[:i], s[i+1:]...)
			break
		}
	}
	if len(s) == 0 {
		delete(m, k)
	} else {
		m[k] = s
	}
}

// post queues an item for the run loop. It never blocks.
func (r *Run) post(it runItem) {
	r.mu.Lock()
	if r.ended {
		r.mu.Unlock()
		return
	}
	if it.kind == itemEvent {
		if r.id == "" && len(r.queue) >= MaxPreRunFrames {
			r.evictOldest()
		} else if len(r.queue) >= maxQueued && !isTerminalEvent(it) {
			r.mu.Unlock()
			r.c.dropped.Add(1)
			return
		}
	}
	r.queue = append(r.queue, it)
	r.mu.Unlock()
	r.signal()
}

// evictOldest drops the oldest agent event, else the oldest event. r.mu held.
func (r *Run) evictOldest() {
	idx := -1
	for i, it := range r.queue {
		if it.kind == itemEvent && it.event == "agent" {
			idx = i
			break
		}
	}
	if idx < 0 {
		for i, it := range r.queue {
			if it.kind == itemEvent {
				idx = i
				break
			}
		}
	}
	if idx >= 0 {
		r.queue = append(r.queue[:idx], r.queue[idx+1:]...)
		r.c.dropped.Add(1)
	}
}

func isTerminalEvent(it runItem) bool {
	if it.kind != itemEvent || it.p == nil {
		return true
	}
	switch it.p.State {
	case "final", "error", "aborted":
		return true
	}
	return it.p.Stream == "lifecycle"
}

func (r *Run) signal() {
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

// ID returns the run id (the idempotency key unless the gateway chose
// another).
func (r *Run) ID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.id
}

// SessionKey returns the canonical session key of the run.
func (r *Run) SessionKey() string { return r.key }

// Done is closed when the run has ended or stopped being followed.
func (r *Run) Done() <-chan struct{} { return r.done }

// Wait blocks until the run ends and returns its Outcome. An aborted or
// failed run is an Outcome (Status), not an error; the error is non-nil only
// when ctx ends (ctx.Err()), the Run was closed (ErrRunClosed) or the
// Client was closed (ErrClosed).
func (r *Run) Wait(ctx context.Context) (Outcome, error) {
	select {
	case <-r.done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.outcome, r.err
	case <-ctx.Done():
		return Outcome{}, fmt.Errorf("wait run: %w", ctx.Err())
	}
}

// Abort asks the gateway to abort this run (sessions.abort). The run then
// normally ends with StatusAborted.
func (r *Run) Abort(ctx context.Context) (AbortResult, error) {
	id := r.ID()
	if id == "" {
		id = r.req.IdempotencyKey
	}
	return r.c.Abort(ctx, AbortRequest{SessionKey: r.key, RunID: id})
}

// Close stops following the run (it does not abort it upstream) and waits
// for the run's goroutines. Wait then returns ErrRunClosed unless the run
// had already ended. Idempotent.
func (r *Run) Close() {
	r.stop(ErrRunClosed)
	r.wg.Wait()
}

// stop ends the run without an outcome (unless it already has one).
func (r *Run) stop(err error) {
	r.end(Outcome{}, err)
}

// end records the result once, unregisters the run and stops its
// goroutines. It does not wait for them.
func (r *Run) end(o Outcome, err error) {
	r.stopped.Do(func() {
		r.mu.Lock()
		r.outcome, r.err, r.ended = o, err, true
		r.queue = nil
		unwatch := r.unwatch
		r.mu.Unlock()
		if unwatch != nil {
			unwatch()
		}
		c := r.c
		c.mu.Lock()
		delete(c.allRuns, r)
		removeRun(c.runsBySess, r.key, r)
		removeRun(c.runsByID, r.req.IdempotencyKey, r)
		if r.id != "" {
			removeRun(c.runsByID, r.id, r)
		}
		c.mu.Unlock()
		r.cancel()
		close(r.done)
	})
}

func (r *Run) loop(ctx context.Context) {
	st := &runState{seen: map[seenKey]struct{}{}}
	if h := r.c.Hello(); h != nil {
		st.bootID = h.BootID
	}
	defer st.stopTimers()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.notify:
		}
		r.mu.Lock()
		items := r.queue
		r.queue = nil
		st.id = r.id
		r.mu.Unlock()
		for _, it := range items {
			if o, ok := r.handle(ctx, st, it); ok {
				r.end(o, nil)
				return
			}
			if ctx.Err() != nil {
				return
			}
		}
	}
}
