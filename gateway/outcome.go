package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// How a run's events become its Outcome: the normalized RunEvents, the
// Outcome and its sources, and the loop goroutine's state (runState) with
// the handlers that read chat, agent and final-response frames, recover a
// run across a gateway restart and pick the answer text. The run's life
// (submit, queue, wait, abort, close) is in run.go.

// NoResponseText is the answer text of a run that ended with nothing to
// show: no final message, no message-tool reply, no stream text and nothing
// in the transcript. It is byte-compatible with the Node bridge.
const NoResponseText = "Stream finished with no response collected."

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
