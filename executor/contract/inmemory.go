package contract

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/clawconnect/clawconnect/executor"
)

// InMemoryAdapter is the smallest correct executor.RuntimeAdapter: a runtime
// whose frames are injected by the caller. It is the suite's self-test and a
// reference for adapter authors, and doubles as a fake runtime in host
// tests. It is safe for concurrent use.
type InMemoryAdapter struct {
	mu       sync.Mutex
	sessions map[string]*memSession
	calls    []RecordedCall
	runs     int
}

type memSession struct {
	run     *executor.RunHandle
	subs    map[*executor.Stream]*memSub
	backlog []Frame // frames injected before the first subscriber
	seen    bool    // a subscriber has attached at least once
}

type memSub struct {
	accumulated string
}

// NewInMemoryAdapter returns an adapter with no sessions.
func NewInMemoryAdapter() *InMemoryAdapter {
	return &InMemoryAdapter{sessions: map[string]*memSession{}}
}

// ID implements executor.RuntimeAdapter.
func (m *InMemoryAdapter) ID() executor.RuntimeID { return "in-memory" }

// ParticipantKind implements executor.RuntimeAdapter.
func (m *InMemoryAdapter) ParticipantKind() executor.ParticipantKind {
	return executor.ParticipantAgent
}

// Capabilities implements executor.RuntimeAdapter.
func (m *InMemoryAdapter) Capabilities() executor.Capabilities {
	return executor.Capabilities{Streaming: true, Models: []string{}}
}

// Health implements executor.RuntimeAdapter; it is always healthy.
func (m *InMemoryAdapter) Health(context.Context) executor.Health {
	return executor.Health{OK: true}
}

// Start implements executor.RuntimeAdapter. It records nothing and starts
// nothing: the caller injects the run's frames.
func (m *InMemoryAdapter) Start(_ context.Context, _ executor.Task, opts executor.StartOptions) (*executor.RunHandle, error) {
	if opts.SessionKey == "" {
		return nil, fmt.Errorf("start: empty session key")
	}
	run := executor.NewRunHandle(m.ID(), opts.SessionKey)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions[opts.SessionKey] = &memSession{run: run, subs: map[*executor.Stream]*memSub{}}
	return run, nil
}

// Events implements executor.RuntimeAdapter.
func (m *InMemoryAdapter) Events(_ context.Context, run *executor.RunHandle) (*executor.Stream, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	sess, ok := m.sessions[run.SessionKey]
	if !ok {
		return nil, fmt.Errorf("events %s: %w", run.SessionKey, executor.ErrNoSession)
	}
	var s *executor.Stream
	s = executor.NewStream(executor.StreamOptions{Release: func() {
		m.mu.Lock()
		delete(sess.subs, s)
		m.mu.Unlock()
	}})
	sub := &memSub{}
	sess.subs[s] = sub
	if !sess.seen {
		sess.seen = true
		for _, f := range sess.backlog {
			m.deliver(sess, s, sub, f)
		}
		sess.backlog = nil
	}
	return s, nil
}

// Inject delivers a frame to every subscriber of sessionKey's stream, or
// buffers it for the first subscriber when none has attached yet.
func (m *InMemoryAdapter) Inject(sessionKey string, f Frame) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	sess, ok := m.sessions[sessionKey]
	if !ok {
		return fmt.Errorf("inject %s: %w", sessionKey, executor.ErrNoSession)
	}
	if !sess.seen {
		sess.backlog = append(sess.backlog, f)
		return nil
	}
	for s, sub := range sess.subs {
		m.deliver(sess, s, sub, f)
	}
	return nil
}

// deliver maps one frame for one subscriber; m.mu is held.
func (m *InMemoryAdapter) deliver(sess *memSession, s *executor.Stream, sub *memSub, f Frame) {
	if _, ok := sess.run.RunID(); !ok {
		m.runs++
		sess.run.BindRunIDOnce(fmt.Sprintf("run-%d", m.runs))
	}
	runID, _ := sess.run.RunID()
	emit := func(p executor.Payload) { s.Emit(runID, sess.run.SessionKey, p) }
	switch f.Kind {
	case FrameDelta:
		sub.accumulated += f.Text
		emit(executor.TextDelta{Text: f.Text, Channel: executor.ChannelAssistant})
	case FrameToolCall:
		id := fmt.Sprintf("%s-call-%d", runID, len(sub.accumulated))
		input, _ := json.Marshal(f.Input)
		emit(executor.ToolCall{ToolCallID: id, Name: f.Tool, Input: input})
		emit(executor.ToolResult{ToolCallID: id, Name: f.Tool, Output: f.Text})
	case FrameFinal:
		emit(executor.Done{Reason: executor.DoneSuccess, Summary: f.Text})
	case FrameAborted:
		emit(executor.Done{Reason: executor.DoneAborted, Summary: sub.accumulated})
	case FrameError:
		emit(executor.Error{Message: f.Text, Fatal: true})
		emit(executor.Done{Reason: executor.DoneError, Summary: f.Text})
	}
}

func (m *InMemoryAdapter) record(method string, params any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, RecordedCall{Method: method, Params: params})
}

// Abort implements executor.RuntimeAdapter by recording the call; the
// caller injects the aborted frame.
func (m *InMemoryAdapter) Abort(_ context.Context, run *executor.RunHandle) error {
	id, _ := run.RunID()
	m.record("abort", map[string]string{"sessionKey": run.SessionKey, "runId": id})
	return nil
}

// SetModel implements executor.RuntimeAdapter by recording the call.
func (m *InMemoryAdapter) SetModel(_ context.Context, run *executor.RunHandle, model string) error {
	m.record("setModel", map[string]string{"sessionKey": run.SessionKey, "model": model})
	return nil
}

// WriteContext implements executor.RuntimeAdapter by recording the call.
func (m *InMemoryAdapter) WriteContext(_ context.Context, run *executor.RunHandle, key, value string) error {
	m.record("writeContext", map[string]string{"sessionKey": run.SessionKey, "key": key, "value": value})
	return nil
}

// Calls returns the side effects recorded so far.
func (m *InMemoryAdapter) Calls() []RecordedCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]RecordedCall(nil), m.calls...)
}
