// Package contract is the conformance suite every executor.RuntimeAdapter
// passes. An adapter package supplies a Harness (how to build the adapter
// over a fake or real transport, start a run, inject abstract frames and
// read the side effects it issued) and calls RunAdapterContract from a test.
//
// It lives apart from package executor because it imports testing; hosts
// that import executor never link it.
package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/executor"
)

// FrameKind names an abstract frame.
type FrameKind string

// Abstract frames a harness translates into its runtime's native transport.
const (
	FrameDelta    FrameKind = "delta"     // incremental assistant text (Text)
	FrameToolCall FrameKind = "tool-call" // a tool call and its result (Tool, Input, Text as output)
	FrameFinal    FrameKind = "final"     // terminal success (Text is the summary)
	FrameAborted  FrameKind = "aborted"   // terminal abort
	FrameError    FrameKind = "error"     // terminal error (Text is the message)
)

// Frame is one abstract runtime frame.
type Frame struct {
	Kind  FrameKind
	Text  string
	Tool  string
	Input map[string]any
}

// Delta builds an incremental-text frame.
func Delta(text string) Frame { return Frame{Kind: FrameDelta, Text: text} }

// ToolCall builds a tool-call frame whose result output is output.
func ToolCall(name string, input map[string]any, output string) Frame {
	return Frame{Kind: FrameToolCall, Tool: name, Input: input, Text: output}
}

// Final builds a terminal success frame.
func Final(summary string) Frame { return Frame{Kind: FrameFinal, Text: summary} }

// Aborted builds a terminal abort frame.
func Aborted() Frame { return Frame{Kind: FrameAborted} }

// ErrorFrame builds a terminal error frame.
func ErrorFrame(message string) Frame { return Frame{Kind: FrameError, Text: message} }

// RecordedCall is one side effect the adapter issued, as the harness saw it
// at its transport (an RPC sent, a signal delivered, a file written).
type RecordedCall struct {
	Method string
	Params any
}

// Harness adapts one runtime to the suite. Every function is required
// except Emit, which a harness over a real runtime leaves nil (the runtime
// then produces the frames of the script passed to Start by itself).
type Harness struct {
	// Label names the harness in test names.
	Label string
	// New returns a fresh adapter over a fresh transport.
	New func(t *testing.T) executor.RuntimeAdapter
	// Start starts a run on a. Script is the frames the case will emit, in
	// order; a harness over a real runtime turns it into a prompt for the
	// fake model, a fake harness may ignore it.
	Start func(t *testing.T, a executor.RuntimeAdapter, script []Frame) (*executor.RunHandle, error)
	// Emit pushes a frame into the current run's transport.
	Emit func(t *testing.T, f Frame)
	// RecordedCalls returns the side effects issued so far in this case.
	RecordedCalls func(t *testing.T) []RecordedCall
	// Timeout bounds each case's wait for events; 0 means 10 s (real
	// runtimes need more).
	Timeout time.Duration
	// ContextKey is the key the write-context case writes; empty means
	// "NOTES.md". Runtimes that accept only known names (OpenClaw's agent
	// files) set one of theirs.
	ContextKey string
}

func (h Harness) emit(t *testing.T, f Frame) {
	t.Helper()
	if h.Emit != nil {
		h.Emit(t, f)
	}
}

func (h Harness) timeout() time.Duration {
	if h.Timeout > 0 {
		return h.Timeout
	}
	return 10 * time.Second
}

func (h Harness) start(t *testing.T, a executor.RuntimeAdapter, script ...Frame) *executor.RunHandle {
	t.Helper()
	run, err := h.Start(t, a, script)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if run == nil {
		t.Fatal("Start returned a nil handle")
	}
	return run
}

func (h Harness) events(t *testing.T, a executor.RuntimeAdapter, run *executor.RunHandle) *executor.Stream {
	t.Helper()
	s, err := a.Events(t.Context(), run)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func (h Harness) collect(t *testing.T, s *executor.Stream) []executor.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), h.timeout())
	defer cancel()
	evs, err := executor.CollectUntilDone(ctx, s, 200)
	if err != nil {
		t.Fatalf("collect events: %v (got %s)", err, kinds(evs))
	}
	t.Logf("events: %s", kinds(evs))
	return evs
}

func kinds(evs []executor.Event) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, ev := range evs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(ev.Kind()))
		if d, ok := ev.Payload.(executor.Done); ok {
			b.WriteString(":" + string(d.Reason))
		}
	}
	b.WriteByte(']')
	return b.String()
}

func lastDone(t *testing.T, evs []executor.Event, want executor.DoneReason) executor.Done {
	t.Helper()
	if len(evs) == 0 {
		t.Fatalf("no events; want a stream ending in done: %s", want)
	}
	d, ok := evs[len(evs)-1].Payload.(executor.Done)
	if !ok || d.Reason != want {
		t.Fatalf("stream %s does not end in done: %s", kinds(evs), want)
	}
	return d
}

func checkSeq(t *testing.T, evs []executor.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq <= evs[i-1].Seq {
			t.Fatalf("seq not strictly increasing at %d: %d after %d", i, evs[i].Seq, evs[i-1].Seq)
		}
	}
}

func recordedContains(t *testing.T, h Harness, method *regexp.Regexp, param string) bool {
	t.Helper()
	for _, c := range h.RecordedCalls(t) {
		if method != nil && !method.MatchString(c.Method) {
			continue
		}
		if param == "" {
			return true
		}
		b, err := json.Marshal(c.Params)
		if err == nil && strings.Contains(string(b), param) {
			return true
		}
	}
	return false
}

// RunAdapterContract runs the suite as subtests of t:
//
//  1. identity: a non-empty id and a valid participant kind;
//  2. capabilities: a well-formed shape (Models non-nil);
//  3. health answers within executor.HealthTimeout;
//  4. start returns a handle with the adapter id, the session key and no
//     run id;
//  5. a round trip ends in done: success with strictly increasing seq;
//  6. the run id binds late, from the first frame;
//  7. a tool call surfaces as a tool-call event and its tool-result;
//  8. abort issues a cancel side effect and the stream ends in done: aborted;
//  9. SetModel and WriteContext issue their side effects.
func RunAdapterContract(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Start == nil || h.RecordedCalls == nil {
		t.Fatal("contract: harness needs New, Start and RecordedCalls")
	}
	prefix := "RuntimeAdapter contract " + h.Label

	t.Run(prefix+"/identity", func(t *testing.T) {
		a := h.New(t)
		if a.ID() == "" {
			t.Error("ID() is empty")
		}
		if !a.ParticipantKind().Valid() {
			t.Errorf("ParticipantKind() = %q, want agent or human", a.ParticipantKind())
		}
	})

	t.Run(prefix+"/capabilities", func(t *testing.T) {
		a := h.New(t)
		c := a.Capabilities()
		if c.Models == nil {
			t.Error("Capabilities().Models is nil; return an empty slice when unknown")
		}
		if c.ContextWindowTokens < 0 {
			t.Errorf("ContextWindowTokens = %d, want >= 0", c.ContextWindowTokens)
		}
		switch c.Class() {
		case executor.ClassWrappedOneshot, executor.ClassConnectedSubstrate, executor.ClassNative:
		default:
			t.Errorf("RuntimeClass = %q, not a defined class", c.RuntimeClass)
		}
	})

	t.Run(prefix+"/health", func(t *testing.T) {
		a := h.New(t)
		done := make(chan executor.Health, 1)
		go func() { done <- a.Health(t.Context()) }()
		timer := time.NewTimer(executor.HealthTimeout)
		defer timer.Stop()
		select {
		case <-done:
		case <-timer.C:
			t.Fatalf("Health did not answer within %v", executor.HealthTimeout)
		}
	})

	t.Run(prefix+"/start handle", func(t *testing.T) {
		a := h.New(t)
		run := h.start(t, a, Final("ok"))
		if run.AdapterID != a.ID() {
			t.Errorf("handle AdapterID = %q, want %q", run.AdapterID, a.ID())
		}
		if run.SessionKey == "" {
			t.Error("handle SessionKey is empty")
		}
		if id, ok := run.RunID(); ok {
			t.Errorf("run id bound at start (%q); it must bind late", id)
		}
		// Leave nothing running behind this case.
		s := h.events(t, a, run)
		h.emit(t, Final("ok"))
		h.collect(t, s)
	})

	t.Run(prefix+"/round trip", func(t *testing.T) {
		a := h.New(t)
		run := h.start(t, a, Delta("hello"), Final("hello world"))
		s := h.events(t, a, run)
		h.emit(t, Delta("hello"))
		h.emit(t, Final("hello world"))
		evs := h.collect(t, s)
		sawText := false
		for _, ev := range evs {
			if ev.Kind() == executor.KindTextDelta {
				sawText = true
			}
		}
		if !sawText {
			t.Errorf("stream %s has no text-delta", kinds(evs))
		}
		lastDone(t, evs, executor.DoneSuccess)
		checkSeq(t, evs)
		if evs[0].Seq != 1 {
			t.Errorf("first seq = %d, want 1", evs[0].Seq)
		}
	})

	t.Run(prefix+"/late run id", func(t *testing.T) {
		a := h.New(t)
		run := h.start(t, a, Delta("x"), Final("x"))
		if _, ok := run.RunID(); ok {
			t.Fatal("run id bound before any frame")
		}
		s := h.events(t, a, run)
		h.emit(t, Delta("x"))
		ctx, cancel := context.WithTimeout(t.Context(), h.timeout())
		defer cancel()
		ev, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if ev.Payload == nil {
			t.Fatal("first event has no payload")
		}
		if _, ok := run.RunID(); !ok {
			t.Error("run id still unbound after the first frame")
		}
		if ev.RunID == "" {
			t.Error("first event has an empty run id")
		}
		h.emit(t, Final("x"))
		h.collect(t, s)
	})

	t.Run(prefix+"/tool call", func(t *testing.T) {
		a := h.New(t)
		tc := ToolCall("echo", map[string]any{"text": "tool-probe"}, "tool-probe")
		run := h.start(t, a, tc, Final("done"))
		s := h.events(t, a, run)
		h.emit(t, tc)
		h.emit(t, Final("done"))
		evs := h.collect(t, s)
		lastDone(t, evs, executor.DoneSuccess)
		checkSeq(t, evs)
		calls := map[string]int{}
		for i, ev := range evs {
			if c, ok := ev.Payload.(executor.ToolCall); ok && !c.Partial {
				if c.ToolCallID == "" || c.Name == "" {
					t.Errorf("tool-call without id or name: %+v", c)
				}
				calls[c.ToolCallID] = i
			}
		}
		if len(calls) == 0 {
			t.Fatalf("stream %s has no tool-call", kinds(evs))
		}
		matched := false
		for i, ev := range evs {
			if r, ok := ev.Payload.(executor.ToolResult); ok {
				if at, ok := calls[r.ToolCallID]; ok && at < i {
					matched = true
				}
			}
		}
		if !matched {
			t.Errorf("stream %s has no tool-result answering a tool-call", kinds(evs))
		}
	})

	t.Run(prefix+"/abort", func(t *testing.T) {
		a := h.New(t)
		run := h.start(t, a, Delta("partial"), Aborted())
		s := h.events(t, a, run)
		h.emit(t, Delta("partial"))
		// Wait until the run is visibly live (its first event) before
		// aborting.
		ctx, cancel := context.WithTimeout(t.Context(), h.timeout())
		defer cancel()
		first, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for the run's first event: %v", err)
		}
		evs := []executor.Event{first}
		if err := a.Abort(t.Context(), run); err != nil {
			t.Fatalf("Abort: %v", err)
		}
		h.emit(t, Aborted())
		evs = append(evs, h.collect(t, s)...)
		lastDone(t, evs, executor.DoneAborted)
		checkSeq(t, evs)
		if !recordedContains(t, h, regexp.MustCompile(`(?i)abort`), "") {
			t.Errorf("no recorded call matching /abort/i in %v", h.RecordedCalls(t))
		}
	})

	t.Run(prefix+"/set model", func(t *testing.T) {
		a := h.New(t)
		run := h.start(t, a, Final("ok"))
		s := h.events(t, a, run)
		if err := a.SetModel(t.Context(), run, "contract-model-x"); err != nil {
			t.Fatalf("SetModel: %v", err)
		}
		if !recordedContains(t, h, nil, "contract-model-x") {
			t.Errorf("no recorded call carries the model; got %v", h.RecordedCalls(t))
		}
		h.emit(t, Final("ok"))
		h.collect(t, s)
	})

	t.Run(prefix+"/write context", func(t *testing.T) {
		a := h.New(t)
		run := h.start(t, a, Final("ok"))
		s := h.events(t, a, run)
		key := h.ContextKey
		if key == "" {
			key = "NOTES.md"
		}
		if err := a.WriteContext(t.Context(), run, key, "contract-context-y"); err != nil {
			t.Fatalf("WriteContext: %v", err)
		}
		if !recordedContains(t, h, nil, "contract-context-y") {
			t.Errorf("no recorded call carries the context value; got %v", h.RecordedCalls(t))
		}
		h.emit(t, Final("ok"))
		h.collect(t, s)
	})
}

// Drain reads s until io.EOF or ctx ends, returning what it read. Harness
// authors use it to check that a one-shot stream ends.
func Drain(ctx context.Context, s *executor.Stream) ([]executor.Event, error) {
	var out []executor.Event
	for {
		ev, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("drain: %w", err)
		}
		out = append(out, ev)
	}
}
