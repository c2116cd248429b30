package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// NoResponseText is the answer text of a run that ended with nothing to
// show: no final message, no message-tool reply, no stream text and nothing
// in the transcript. It is byte-compatible with the Node bridge.
const NoResponseText = "Stream finished with no response collected."

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

// EventKind classifies a RunEvent.
type EventKind string

// Event kinds.
const (
	EventStatus     EventKind = "status"      // preparation phase (Phase)
	EventLifecycle  EventKind = "lifecycle"   // run lifecycle phase (Phase): start, model, finishing, end, error
	EventAssistant  EventKind = "assistant"   // assistant text so far (Text is cumulative)
	EventToolStart  EventKind = "tool_start"  // a tool call began (Tool, Args)
	EventToolResult EventKind = "tool_result" // a tool call finished (Tool, IsError)
	EventRecovering EventKind = "recovering"  // the stream broke; Phase says what the run is doing about it
)

// RunEvent is one normalized event of a run.
type RunEvent struct {
	Kind  EventKind
	RunID string
	Seq   int64  // payload sequence of the gateway event (0 for synthetic events)
	Phase string // status/lifecycle/recovering phase
	// Text is the cumulative assistant text for EventAssistant (never a
	// delta), and a short human summary for the other kinds.
	Text    string
	Tool    string
	Args    json.RawMessage
	IsError bool
}

// Status is how a run ended.
type Status string

// Run outcomes.
const (
	StatusOK      Status = "ok"      // the run completed; Text is the answer
	StatusError   Status = "error"   // the run failed; Error says why
	StatusAborted Status = "aborted" // the run was aborted; Text is the partial answer
	// StatusSteered: a ModeChatSend message was folded into another run that
	// was active in the session; this run id carries no answer.
	StatusSteered Status = "steered"
)

// Source says where an Outcome's text came from.
type Source string

// Outcome text sources.
const (
	SourceMessageTool Source = "message_tool" // the agent's message tool reply
	SourceChatFinal   Source = "chat_final"   // the final chat message
	SourceTerminal    Source = "terminal"     // lifecycle end terminalReply
	SourceStream      Source = "stream"       // the last cumulative assistant text
	SourceAgentResult Source = "agent_result" // the agent method's final result payloads
	SourceAgentWait   Source = "agent_wait"   // agent.wait terminalReply
	SourceHistory     Source = "history"      // the session transcript
	SourceNone        Source = "none"         // nothing: Text is NoResponseText
)

// Outcome is the final result of a run.
type Outcome struct {
	RunID      string
	SessionKey string
	Status     Status
	Text       string
	Error      string // for StatusError (and the abort message, if any)
	StopReason string
	Source     Source
	// Resubmitted counts resubmissions after the gateway forgot the run.
	Resubmitted int
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
	var st struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(payload, &st)
	if st.Status == "ok" || st.Status == "error" {
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

// runState is owned by the loop goroutine.
type runState struct {
	id                                                string
	chatText, agentText, toolReply, terminal, lastOut string
	activity                                          bool // saw lifecycle start or any text
	seen                                              map[seenKey]struct{}
	resubmits                                         int
	bootID                                            string // boot id of the gateway process that has the run
	recovering                                        bool   // the gateway restarted since; watching the session
	// grace and recheck are the pending recovery timers (nil when none);
	// the loop stops them when it returns.
	grace, recheck *time.Timer
}

type seenKey struct {
	event, sub string
	seq        int64
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

func (r *Run) emit(ev RunEvent) {
	if r.req.OnEvent != nil {
		r.req.OnEvent(ev)
	}
}

// handle processes one item; it returns the outcome when the run ended.
func (r *Run) handle(ctx context.Context, st *runState, it runItem) (Outcome, bool) {
	switch it.kind {
	case itemEvent:
		p := it.p
		if p.RunID != st.id {
			// Another run of the same session. While recovering from a
			// gateway restart, its end may be the gateway's own re-run of
			// our message: look at the transcript.
			if st.recovering && it.event == "chat" && (p.State == "final" || p.State == "error" || p.State == "aborted") {
				return r.reconcile(ctx, st, false)
			}
			return Outcome{}, false
		}
		sub := p.State
		if it.event == "agent" {
			sub = p.Stream
		}
		k := seenKey{it.event, sub, p.Seq}
		if p.Seq > 0 && sub != "delta" && sub != "assistant" {
			if _, dup := r.seenOrAdd(st, k); dup {
				return Outcome{}, false
			}
		}
		if it.event == "chat" {
			return r.handleChat(ctx, st, p)
		}
		return r.handleAgent(ctx, st, p)
	case itemFinalRes:
		return r.handleFinalRes(ctx, st, it)
	case itemSubmitErr:
		if errors.Is(it.err, ErrClosed) {
			return Outcome{}, false // Client.Close stops the run with ErrClosed
		}
		if errors.Is(it.err, ErrDisconnected) || errors.Is(it.err, context.Canceled) {
			r.startWaiter(ctx) // the waiter recovers after reconnect
			return Outcome{}, false
		}
		return r.outcome0(st, StatusError, "", "", SourceNone, it.err.Error()), true
	case itemAccepted:
		return Outcome{}, false
	case itemWait:
		return r.handleWait(ctx, st, it.payload)
	case itemStartWaiter:
		r.startWaiter(ctx)
	case itemDisconnected:
		r.startWaiter(ctx)
		r.emit(RunEvent{Kind: EventRecovering, RunID: st.id, Phase: "disconnected", Text: "gateway connection lost; waiting to reconnect"})
	case itemReconnected:
		r.emit(RunEvent{Kind: EventRecovering, RunID: st.id, Phase: "reconnected", Text: "gateway reconnected; checking run state"})
		// After a plain reconnect the waiter's agent.wait picks the run up
		// again. A new boot id means a restarted gateway process that may
		// have re-run or lost the run: watch the session and reconcile.
		if h := r.c.Hello(); h != nil && h.BootID != "" && h.BootID != st.bootID && !st.recovering {
			r.startRecovery(st)
			return r.reconcile(ctx, st, false)
		}
	case itemUnknownRun:
		o, done := r.reconcile(ctx, st, it.final)
		if !done && it.recheck && st.recovering {
			r.scheduleRecheck(st)
		}
		return o, done
	}
	return Outcome{}, false
}

func (r *Run) seenOrAdd(st *runState, k seenKey) (struct{}, bool) {
	if _, ok := st.seen[k]; ok {
		return struct{}{}, true
	}
	st.seen[k] = struct{}{}
	return struct{}{}, false
}

func (r *Run) handleChat(ctx context.Context, st *runState, p *runPayload) (Outcome, bool) {
	switch p.State {
	case "status":
		r.emit(RunEvent{Kind: EventStatus, RunID: st.id, Seq: p.Seq, Phase: p.Phase, Text: "status: " + p.Phase})
	case "delta":
		if t := p.Message.text(); t != "" {
			st.chatText = t
			st.activity = true
			r.emitText(st, p.Seq, t)
		}
	case "final":
		text := p.Message.text()
		if text == "" && p.Message == nil && !st.activity && r.req.Mode == ModeChatSend {
			return r.outcome0(st, StatusSteered, "", p.StopReason, SourceNone, ""), true
		}
		return r.finishOK(ctx, st, text, SourceChatFinal, p.StopReason)
	case "aborted":
		text := p.Message.text()
		if text == "" {
			text = st.chatText
		}
		return r.outcome0(st, StatusAborted, text, p.StopReason, SourceChatFinal, p.ErrorMessage), true
	case "error":
		msg := p.ErrorMessage
		if msg == "" {
			msg = "OpenClaw task error"
		}
		return r.outcome0(st, StatusError, "", p.StopReason, SourceNone, msg), true
	}
	return Outcome{}, false
}

func (r *Run) emitText(st *runState, seq int64, t string) {
	if t == st.lastOut {
		return
	}
	st.lastOut = t
	r.emit(RunEvent{Kind: EventAssistant, RunID: st.id, Seq: seq, Text: t})
}

func (r *Run) handleAgent(ctx context.Context, st *runState, p *runPayload) (Outcome, bool) {
	d := &p.Data
	switch p.Stream {
	case "assistant":
		if d.Text != "" {
			st.agentText = d.Text
			st.activity = true
			r.emitText(st, p.Seq, d.Text)
		}
	case "run_status":
		r.emit(RunEvent{Kind: EventStatus, RunID: st.id, Seq: p.Seq, Phase: d.Phase, Text: "status: " + d.Phase})
	case "tool":
		switch d.Phase {
		case "start":
			st.activity = true
			if d.Name == "message" {
				if t := messageToolText(d.Args); t != "" {
					st.toolReply = t
				}
			}
			r.emit(RunEvent{Kind: EventToolStart, RunID: st.id, Seq: p.Seq, Phase: d.Phase, Tool: d.Name, Args: d.Args,
				Text: truncate(d.Name+": "+toolSummary(d.Args), 80)})
		case "result":
			word := "done"
			if d.IsError {
				word = "failed"
			}
			r.emit(RunEvent{Kind: EventToolResult, RunID: st.id, Seq: p.Seq, Phase: d.Phase, Tool: d.Name, IsError: d.IsError,
				Text: d.Name + " " + word})
		}
	case "lifecycle":
		phase := d.Phase
		if phase == "" {
			phase = "unknown"
		}
		if phase == "start" {
			st.activity = true
		}
		r.emit(RunEvent{Kind: EventLifecycle, RunID: st.id, Seq: p.Seq, Phase: phase, Text: "Agent lifecycle: " + phase})
		if d.TerminalReply != nil && d.TerminalReply.Text != "" {
			st.terminal = d.TerminalReply.Text
		}
		// lifecycle end is not terminal by itself: the chat final (with the
		// authoritative message) follows at once, and agent.wait backs it up.
		switch phase {
		case "end":
			if d.Aborted {
				return r.outcome0(st, StatusAborted, st.best(), d.StopReason, SourceStream, ""), true
			}
			if len(d.Error) > 0 && string(d.Error) != "null" {
				return r.outcome0(st, StatusError, "", d.StopReason, SourceNone, errorText(d.Error)), true
			}
		case "error":
			return r.outcome0(st, StatusError, "", d.StopReason, SourceNone, errorText(d.Error)), true
		}
	}
	return Outcome{}, false
}

func errorText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "OpenClaw task error"
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var m struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &m) == nil && m.Message != "" {
		return m.Message
	}
	return string(raw)
}

// best is the text to use for a partial answer.
func (st *runState) best() string {
	for _, t := range []string{st.toolReply, st.chatText, st.agentText} {
		if t != "" {
			return t
		}
	}
	return ""
}

func messageToolText(args json.RawMessage) string {
	var a struct {
		Message *string `json:"message"`
		Content *string `json:"content"`
		Text    *string `json:"text"`
	}
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	for _, p := range []*string{a.Message, a.Content, a.Text} {
		if p != nil {
			return strings.TrimSpace(*p)
		}
	}
	return ""
}

func toolSummary(args json.RawMessage) string {
	if len(args) == 0 || args[0] != '{' {
		return ""
	}
	var a struct {
		Command  json.RawMessage `json:"command"`
		FilePath json.RawMessage `json:"file_path"`
		Pattern  json.RawMessage `json:"pattern"`
		Query    json.RawMessage `json:"query"`
	}
	if json.Unmarshal(args, &a) != nil {
		return ""
	}
	for _, v := range []json.RawMessage{a.Command, a.FilePath, a.Pattern, a.Query} {
		if len(v) == 0 || string(v) == "null" {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
		return string(v)
	}
	return ""
}

// finishOK picks the answer text in priority order (message tool, the
// given final text, lifecycle terminal reply, stream text) and falls back
// to the transcript and finally NoResponseText.
func (r *Run) finishOK(ctx context.Context, st *runState, text string, src Source, stop string) (Outcome, bool) {
	switch {
	case st.toolReply != "":
		text, src = st.toolReply, SourceMessageTool
	case text != "":
	case st.terminal != "":
		text, src = st.terminal, SourceTerminal
	case st.chatText != "":
		text, src = st.chatText, SourceStream
	case st.agentText != "":
		text, src = st.agentText, SourceStream
	default:
		text, src = r.historyText(ctx, st.id), SourceHistory
		if text == "" {
			text, src = NoResponseText, SourceNone
		}
	}
	return r.outcome0(st, StatusOK, text, stop, src, ""), true
}

func (r *Run) outcome0(st *runState, s Status, text, stop string, src Source, errMsg string) Outcome {
	return Outcome{RunID: st.id, SessionKey: r.key, Status: s, Text: text, Error: errMsg, StopReason: stop,
		Source: src, Resubmitted: st.resubmits}
}

// historyText reads the transcript for an assistant row of runID. It polls
// a few times because the transcript may commit just after the final.
func (r *Run) historyText(ctx context.Context, runID string) string {
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt) * 300 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return ""
			case <-t.C:
			}
		}
		h, err := r.c.History(ctx, HistoryRequest{SessionKey: r.key, Limit: 20})
		if err != nil {
			continue
		}
		if t := h.RunText(runID); t != "" {
			return t
		}
	}
	return ""
}

func (r *Run) handleFinalRes(ctx context.Context, st *runState, it runItem) (Outcome, bool) {
	var res struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Result struct {
			Payloads []struct {
				Text string `json:"text"`
			} `json:"payloads"`
			Meta struct {
				Aborted bool `json:"aborted"`
			} `json:"meta"`
		} `json:"result"`
	}
	_ = json.Unmarshal(it.payload, &res)
	var parts []string
	for _, p := range res.Result.Payloads {
		if p.Text != "" {
			parts = append(parts, p.Text)
		}
	}
	text := strings.Join(parts, "\n")
	if it.err != nil {
		msg := res.Error
		if msg == "" {
			msg = it.err.Error()
		}
		return r.outcome0(st, StatusError, "", "", SourceNone, msg), true
	}
	switch res.Status {
	case "ok":
		if st.toolReply == "" && text != "" {
			return r.outcome0(st, StatusOK, text, "", SourceAgentResult, ""), true
		}
		return r.finishOK(ctx, st, "", SourceAgentResult, "")
	case "error":
		return r.outcome0(st, StatusError, "", "", SourceNone, res.Error), true
	case "timeout", "aborted":
		if res.Result.Meta.Aborted || res.Status == "aborted" {
			return r.outcome0(st, StatusAborted, st.best(), "", SourceStream, ""), true
		}
	}
	// in_flight / accepted-like answers: keep following events.
	return Outcome{}, false
}
