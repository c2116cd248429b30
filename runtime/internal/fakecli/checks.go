package fakecli

// This file holds the test flow the subprocess adapters share: start one
// run against a fresh fake, drain its stream, and the checks whose
// expectations are the engine's rather than a runtime's (abort escalation,
// unknown sessions, a missing binary, late subscribers, one-terminal
// scripts). Each adapter's tests supply the runtime's own lines.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/executor/contract"
	"github.com/google/go-cmp/cmp"
)

// IgnoreTerm is the environment entry that makes the fake process ignore
// SIGTERM, so that an abort has to escalate to SIGKILL.
const IgnoreTerm = envIgnoreTerm + "=1"

// Adapter is what the shared checks use of an adapter built on the
// one-process-per-run engine.
type Adapter interface {
	executor.RuntimeAdapter
	executor.Disposer
	// Wait blocks until no run of the adapter is live or ctx ends.
	Wait(ctx context.Context) error
}

// NewAdapter builds the adapter under test over the fake f.
type NewAdapter[A Adapter] func(t *testing.T, f *Fake) A

// Start starts one run of an adapter newAdapter builds over a fresh fake
// and subscribes to it. opts gets "k" as its session key and "say hello"
// as its message when they are empty, and the fake's work directory as its
// Cwd. t.Cleanup disposes the adapter and closes the stream.
func Start[A Adapter](t *testing.T, newAdapter NewAdapter[A], opts executor.StartOptions) (*Fake, A, *executor.RunHandle, *executor.Stream) {
	t.Helper()
	f := New(t)
	a := newAdapter(t, f)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.Dispose(ctx); err != nil {
			t.Error(err)
		}
	})
	if opts.SessionKey == "" {
		opts.SessionKey = "k"
	}
	if opts.Message == "" {
		opts.Message = "say hello"
	}
	opts.Cwd = f.Work
	run, err := a.Start(t.Context(), executor.Task{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return f, a, run, s
}

// Drain reads s to its end (at most 15 s) and returns every event.
func Drain(t *testing.T, s *executor.Stream) []executor.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	evs, err := contract.Drain(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// Payloads returns the payloads of evs.
func Payloads(evs []executor.Event) []executor.Payload {
	out := make([]executor.Payload, len(evs))
	for i, ev := range evs {
		out[i] = ev.Payload
	}
	return out
}

// Script is what a fake CLI prints in one run and the payloads the adapter
// must turn that into.
type Script struct {
	Name  string
	Lines []Directive
	Want  []executor.Payload
}

// RunScripts plays each script in a run of its own, in parallel subtests,
// and compares the payloads of the whole stream.
func RunScripts[A Adapter](t *testing.T, newAdapter NewAdapter[A], scripts []Script) {
	t.Helper()
	for _, sc := range scripts {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			f, _, _, s := Start(t, newAdapter, executor.StartOptions{})
			f.Send(t, sc.Lines...)
			if diff := cmp.Diff(sc.Want, Payloads(Drain(t, s))); diff != "" {
				t.Errorf("payloads (-want +got):\n%s", diff)
			}
		})
	}
}

// CheckAbortEscalates aborts a run whose process ignores SIGTERM. The
// adapter newAdapter builds must pass IgnoreTerm to the fake and have a
// short kill grace. lines must make the run print one text delta whose
// text is summary. The stream must end with done: aborted and that summary,
// the escalation to SIGKILL must be logged, and a second abort of the ended
// run must do nothing.
func CheckAbortEscalates[A Adapter](t *testing.T, newAdapter NewAdapter[A], lines []Directive, summary string) {
	t.Helper()
	f, a, run, s := Start(t, newAdapter, executor.StartOptions{})
	f.Send(t, lines...)
	for {
		ev, err := s.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind() == executor.KindTextDelta {
			break
		}
	}
	if err := a.Abort(t.Context(), run); err != nil {
		t.Fatal(err)
	}
	want := []executor.Payload{executor.Done{Reason: executor.DoneAborted, Summary: summary}}
	if diff := cmp.Diff(want, Payloads(Drain(t, s))); diff != "" {
		t.Errorf("after abort (-want +got):\n%s", diff)
	}
	var escalated bool
	for _, c := range f.Logs.Calls() {
		if c.Method == "abort escalated" {
			escalated = true
		}
	}
	if !escalated {
		t.Error("SIGKILL escalation not logged")
	}
	if err := a.Abort(t.Context(), run); err != nil {
		t.Errorf("second abort after the end = %v, want nil", err)
	}
}

// CheckUnknownSession checks that every per-run method of a refuses a
// handle it never started with executor.ErrNoSession.
func CheckUnknownSession(t *testing.T, a executor.RuntimeAdapter) {
	t.Helper()
	run := executor.NewRunHandle(a.ID(), "nope")
	for name, err := range map[string]error{
		"abort":         a.Abort(t.Context(), run),
		"set model":     a.SetModel(t.Context(), run, "m"),
		"write context": a.WriteContext(t.Context(), run, "k", "v"),
	} {
		if !errors.Is(err, executor.ErrNoSession) {
			t.Errorf("%s on an unknown session = %v, want ErrNoSession", name, err)
		}
	}
	if _, err := a.Events(t.Context(), run); !errors.Is(err, executor.ErrNoSession) {
		t.Errorf("Events on an unknown session = %v, want ErrNoSession", err)
	}
}

// CheckMissingBinary checks that an adapter whose binary is not on PATH
// says so in Health and in the error of Start, and that a missing absolute
// path is unhealthy too. newAdapter builds the adapter with the binary and
// environment given.
func CheckMissingBinary(t *testing.T, newAdapter func(binary string, environ []string) executor.RuntimeAdapter) {
	t.Helper()
	const bin = "runtime-cli-definitely-missing"
	a := newAdapter(bin, []string{"PATH=" + t.TempDir()})
	if h := a.Health(t.Context()); h.OK || !strings.Contains(h.Message, bin+" not found on PATH") {
		t.Errorf("Health = %+v, want a not-found verdict", h)
	}
	if _, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "m"}); err == nil || !strings.Contains(err.Error(), "not found on PATH") {
		t.Errorf("Start error = %v, want not found", err)
	}
	if h := newAdapter("/nonexistent/"+bin, nil).Health(t.Context()); h.OK {
		t.Errorf("Health of a missing absolute path = %+v", h)
	}
}

// CheckLateSubscriber checks that the first subscriber of a run that has
// already ended gets the whole stream, numbered from 1, and that a second
// subscriber after the end gets nothing. lines must end the run; want is
// the stream they give.
func CheckLateSubscriber[A Adapter](t *testing.T, newAdapter NewAdapter[A], lines []Directive, want []executor.Payload) {
	t.Helper()
	f := New(t)
	a := newAdapter(t, f)
	defer a.Dispose(context.Background())
	run, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "m", Cwd: f.Work})
	if err != nil {
		t.Fatal(err)
	}
	f.Send(t, lines...)
	if err := a.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	s, err := a.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs := Drain(t, s)
	if diff := cmp.Diff(want, Payloads(evs)); diff != "" {
		t.Errorf("late first subscriber (-want +got):\n%s", diff)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Errorf("event %d has seq %d, want %d", i, ev.Seq, i+1)
		}
	}
	s2, err := a.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if evs := Drain(t, s2); len(evs) != 0 {
		t.Errorf("second subscriber after the end got %v, want nothing", Payloads(evs))
	}
}
