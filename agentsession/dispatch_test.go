package agentsession

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func inspectReturning(obs *Observation, err error) InspectFunc {
	return func(context.Context, Ref) (*Observation, error) { return obs, err }
}

func TestRegister(t *testing.T) {
	tests := []struct {
		name    string
		rt      Runtime
		wantErr error
	}{
		{"valid", Runtime{ID: "a.b_c-1", Provider: "p", Inspect: inspectReturning(nil, nil)}, nil},
		{"64 chars", Runtime{ID: "a" + string(make([]byte, 0)) + fmt.Sprintf("%063d", 0), Inspect: inspectReturning(nil, nil)}, nil},
		{"65 chars", Runtime{ID: fmt.Sprintf("a%064d", 0), Inspect: inspectReturning(nil, nil)}, ErrInvalidRuntimeID},
		{"leading dot", Runtime{ID: ".x", Inspect: inspectReturning(nil, nil)}, ErrInvalidRuntimeID},
		{"slash", Runtime{ID: "a/b", Inspect: inspectReturning(nil, nil)}, ErrInvalidRuntimeID},
		{"empty", Runtime{Inspect: inspectReturning(nil, nil)}, ErrInvalidRuntimeID},
		{"no inspect", Runtime{ID: "x"}, ErrMissingInspect},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry()
			err := r.Register(tc.rt)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Register() error = %v, want %v", err, tc.wantErr)
			}
			if got, want := r.Has(tc.rt.ID), tc.wantErr == nil; got != want {
				t.Errorf("Has(%q) = %v, want %v", tc.rt.ID, got, want)
			}
		})
	}
}

func TestRegistryCapabilitiesDerived(t *testing.T) {
	r := NewRegistry()
	noop := func(context.Context, Ref, string) (*Observation, error) { return nil, nil }
	mustRegister(t, r, Runtime{ID: "b", Inspect: inspectReturning(nil, nil), Continue: noop})
	mustRegister(t, r, Runtime{ID: "a", Inspect: inspectReturning(nil, nil), Detach: noop})
	if diff := cmp.Diff([]string{"a", "b"}, r.IDs()); diff != "" {
		t.Errorf("IDs() mismatch (-want +got):\n%s", diff)
	}
	b, _ := r.Get("b")
	if diff := cmp.Diff(Capabilities{Inspect: true, Continue: true}, b.Capabilities()); diff != "" {
		t.Errorf("capabilities mismatch (-want +got):\n%s", diff)
	}
	// Registering an existing id replaces it.
	mustRegister(t, r, Runtime{ID: "b", Provider: "new", Inspect: inspectReturning(nil, nil)})
	b, _ = r.Get("b")
	if b.Provider != "new" || b.Capabilities().Continue || r.Len() != 2 {
		t.Errorf("after re-register: %+v, len %d", b.Capabilities(), r.Len())
	}
	if (Runtime{}).Supports("bogus") {
		t.Error("Supports(bogus) = true")
	}
	var nilReg *Registry
	if nilReg.Has("a") || nilReg.IDs() != nil || nilReg.Len() != 0 {
		t.Error("nil registry is not empty")
	}
}

func mustRegister(t *testing.T, r *Registry, rt Runtime) {
	t.Helper()
	if err := r.Register(rt); err != nil {
		t.Fatal(err)
	}
}

func TestDispatch(t *testing.T) {
	ref := Ref{Runtime: "rt", Provider: "spoofed", SessionID: "s1", Host: "h", Metadata: map[string]string{"m": "1"}, LastKnownState: StateRunning}
	unavailable := func(code ErrorCode, msg, detail string) Status {
		return Status{Runtime: "rt", Provider: "bound", SessionID: "s1", Host: "h", Metadata: map[string]string{"m": "1"},
			State: StateUnavailable, Error: &Error{Code: code, Message: msg}, Detail: detail, ReconciledAt: testNow.UnixMilli()}
	}
	var gotRef Ref
	var gotPrompt, gotReason string
	reg := NewRegistry()
	mustRegister(t, reg, Runtime{ID: "rt", Provider: "bound",
		Inspect: func(_ context.Context, r Ref) (*Observation, error) {
			gotRef = r
			return &Observation{State: "running"}, nil
		},
		Continue: func(_ context.Context, _ Ref, p string) (*Observation, error) { gotPrompt = p; return nil, nil },
	})
	mustRegister(t, reg, Runtime{ID: "failing", Inspect: inspectReturning(nil, errors.New("socket closed"))})
	mustRegister(t, reg, Runtime{ID: "panics", Inspect: func(context.Context, Ref) (*Observation, error) { panic("boom") }})
	mustRegister(t, reg, Runtime{ID: "unsup", Inspect: inspectReturning(nil, fmt.Errorf("x: %w", ErrUnsupportedOperation))})
	mustRegister(t, reg, Runtime{ID: "det", Inspect: inspectReturning(nil, nil),
		Detach: func(_ context.Context, _ Ref, r string) (*Observation, error) {
			gotReason = r
			return &Observation{State: "dead"}, nil
		}})

	t.Run("provider binding and normalization", func(t *testing.T) {
		got := reg.Dispatch(t.Context(), ref, Request{Op: OpInspect}, CallOptions{Now: testNow})
		want := Status{Runtime: "rt", Provider: "bound", SessionID: "s1", Host: "h", Metadata: map[string]string{"m": "1"},
			State: StateRunning, ReconciledAt: testNow.UnixMilli()}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("status mismatch (-want +got):\n%s", diff)
		}
		if gotRef.Provider != "bound" {
			t.Errorf("callback saw provider %q, want the registered one", gotRef.Provider)
		}
	})
	t.Run("nil reply is session_not_found", func(t *testing.T) {
		got := reg.Dispatch(t.Context(), ref, Request{Op: OpContinue, Prompt: "go on"}, CallOptions{Now: testNow})
		want := Status{Runtime: "rt", Provider: "bound", SessionID: "s1", Host: "h", Metadata: map[string]string{"m": "1"},
			State: StateUnavailable, Error: &Error{Code: CodeSessionNotFound, Message: "The runtime has no state for this session."},
			ReconciledAt: testNow.UnixMilli()}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("status mismatch (-want +got):\n%s", diff)
		}
		if gotPrompt != "go on" {
			t.Errorf("prompt = %q", gotPrompt)
		}
	})
	t.Run("detach passes the reason", func(t *testing.T) {
		r := ref
		r.Runtime = "det"
		got := reg.Dispatch(t.Context(), r, Request{Op: OpDetach, Reason: "done"}, CallOptions{})
		if got.State != StateDead || gotReason != "done" {
			t.Errorf("state %q reason %q", got.State, gotReason)
		}
	})
	errCases := []struct {
		name    string
		runtime string
		op      Op
		want    Status
	}{
		{"unknown runtime", "nope", OpInspect, unavailable(CodeUnknownRuntime, `No runtime registered for "nope".`,
			`This ClawConnect build cannot inspect "nope" sessions — the session itself may be fine. Last reported state: running.`)},
		{"missing capability", "rt", OpDetach, unavailable(CodeUnsupportedOperation, `Runtime "rt" does not support detach.`,
			`Runtime "rt" registered no detach callback, so this session cannot be asked to detach. Last reported state: running.`)},
		{"callback error", "failing", OpInspect, unavailable("inspect_failed", "socket closed",
			`Runtime "failing" could not inspect this session. Last reported state: running.`)},
		{"callback panic", "panics", OpInspect, unavailable("inspect_failed", "callback panicked: boom",
			`Runtime "panics" could not inspect this session. Last reported state: running.`)},
		{"callback says unsupported", "unsup", OpInspect, unavailable(CodeUnsupportedOperation, `Runtime "unsup" does not support inspect.`,
			`Runtime "unsup" registered no inspect callback, so this session cannot be asked to inspect. Last reported state: running.`)},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			r := ref
			r.Runtime = tc.runtime
			want := tc.want
			want.Runtime = tc.runtime
			if tc.runtime != "rt" {
				want.Provider = "spoofed" // no runtime, or one binding no provider: the ref's is kept
			}
			got := reg.Dispatch(t.Context(), r, Request{Op: tc.op}, CallOptions{Now: testNow})
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("status mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("nil registry", func(t *testing.T) {
		var nilReg *Registry
		got := nilReg.Dispatch(t.Context(), Ref{Runtime: "x", SessionID: "s"}, Request{Op: OpInspect}, CallOptions{})
		if got.Error == nil || got.Error.Code != CodeUnknownRuntime || got.State != StateUnavailable {
			t.Errorf("got %+v", got)
		}
		if got.Detail != `This ClawConnect build cannot inspect "x" sessions — the session itself may be fine.` {
			t.Errorf("detail without a last state = %q", got.Detail)
		}
	})
}

// TestDispatchAbandonsCallbackIgnoringContext proves a hung callback cannot
// wedge the caller: Dispatch returns at the deadline with <op>_timeout.
func TestDispatchAbandonsCallbackIgnoringContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		sawDone := make(chan bool, 1)
		reg := NewRegistry()
		mustRegister(t, reg, Runtime{ID: "hang", Inspect: func(ctx context.Context, _ Ref) (*Observation, error) {
			<-release // ignores ctx on purpose
			sawDone <- ctx.Err() != nil
			return &Observation{State: "running"}, nil
		}})
		start := time.Now()
		got := reg.Dispatch(t.Context(), Ref{Runtime: "hang", SessionID: "s", LastKnownState: StateIdle},
			Request{Op: OpInspect}, CallOptions{Timeout: 1500 * time.Millisecond})
		if elapsed := time.Since(start); elapsed != 1500*time.Millisecond {
			t.Errorf("Dispatch returned after %v, want exactly the 1.5s deadline", elapsed)
		}
		want := &Error{Code: "inspect_timeout", Message: "No answer within 1500ms."}
		if diff := cmp.Diff(want, got.Error); diff != "" {
			t.Errorf("error mismatch (-want +got):\n%s", diff)
		}
		if got.Detail != `Runtime "hang" did not answer the inspect in time and was abandoned — the session itself may be fine. Last reported state: idle.` {
			t.Errorf("detail = %q", got.Detail)
		}
		close(release)
		if !<-sawDone {
			t.Error("callback context was not cancelled at the deadline")
		}
	})
}

func TestDispatchDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := NewRegistry()
		mustRegister(t, reg, Runtime{ID: "slow", Inspect: func(ctx context.Context, _ Ref) (*Observation, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}})
		ref := Ref{Runtime: "slow", SessionID: "s"}

		start := time.Now()
		got := reg.Dispatch(t.Context(), ref, Request{Op: OpInspect}, CallOptions{})
		if time.Since(start) != DefaultCallTimeout || got.Error.Code != "inspect_timeout" || got.Error.Message != "No answer within 60000ms." {
			t.Errorf("default deadline: after %v got %+v", time.Since(start), got.Error)
		}

		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		got = reg.Dispatch(ctx, ref, Request{Op: OpInspect}, CallOptions{Timeout: -1})
		if got.Error.Code != "inspect_timeout" || got.Error.Message != "No answer within 2000ms." {
			t.Errorf("caller deadline with no own bound: %+v", got.Error)
		}

		ctx, cancel = context.WithCancel(t.Context())
		go func() { time.Sleep(time.Second); cancel() }()
		got = reg.Dispatch(ctx, ref, Request{Op: OpInspect}, CallOptions{})
		if got.Error.Code != "inspect_failed" || got.Error.Message != "context canceled" {
			t.Errorf("caller cancel: %+v", got.Error)
		}
	})
}

func TestDispatchDoesNotShareMetadata(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, Runtime{ID: "mut", Inspect: func(_ context.Context, r Ref) (*Observation, error) {
		r.Metadata["x"] = "changed"
		return &Observation{}, nil
	}})
	md := map[string]string{"x": "orig"}
	reg.Dispatch(t.Context(), Ref{Runtime: "mut", SessionID: "s", Metadata: md}, Request{Op: OpInspect}, CallOptions{})
	if md["x"] != "orig" {
		t.Error("callback mutated the caller's metadata")
	}
}

func TestParseCallTimeout(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"", DefaultCallTimeout, false},
		{" 1500 ", 1500 * time.Millisecond, false},
		{"0", DefaultCallTimeout, true},
		{"-5", DefaultCallTimeout, true},
		{"1.5", DefaultCallTimeout, true},
		{"abc", DefaultCallTimeout, true},
		{"99999999999999999", DefaultCallTimeout, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCallTimeout(tc.in)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Errorf("ParseCallTimeout(%q) = %v, %v", tc.in, got, err)
			}
			if err != nil && !errors.Is(err, ErrInvalidCallTimeout) {
				t.Errorf("error %v does not wrap ErrInvalidCallTimeout", err)
			}
		})
	}
}

// TestDispatchErrorAtTheDeadlineIsATimeout covers a callback that fails
// exactly when the deadline passes (a module honouring timeoutMs): that is
// a timeout whichever of the two the scheduler sees first.
func TestDispatchErrorAtTheDeadlineIsATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := NewRegistry()
		mustRegister(t, reg, Runtime{ID: "late", Inspect: func(ctx context.Context, _ Ref) (*Observation, error) {
			time.Sleep(time.Second)
			return nil, errors.New("module: context deadline exceeded")
		}})
		got := reg.Dispatch(t.Context(), Ref{Runtime: "late", SessionID: "s"}, Request{Op: OpInspect}, CallOptions{Timeout: time.Second})
		if got.Error == nil || got.Error.Code != "inspect_timeout" {
			t.Errorf("got %+v", got.Error)
		}
	})
}
