package oneshot

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/clawconnect/clawconnect/executor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// lineDecoder turns every line into a text delta; "id:<x>" lines name the
// native session, "done" lines end the run.
type lineDecoder struct{}

func (lineDecoder) Decode(line []byte, emit func(executor.Payload)) string {
	s := string(line)
	switch {
	case strings.HasPrefix(s, "id:"):
		emit(executor.Status{Phase: executor.PhaseInit})
		return strings.TrimPrefix(s, "id:")
	case s == "done":
		emit(executor.Done{Reason: executor.DoneSuccess, Summary: "done"})
	case s == "fail":
		emit(executor.Error{Message: "failed", Fatal: true})
		emit(executor.Done{Reason: executor.DoneError, Summary: "failed"})
	default:
		emit(executor.TextDelta{Text: s})
	}
	return ""
}

// shEngine runs each prompt as a /bin/sh script.
func shEngine(opts Options) *Engine {
	return New(Spec{
		ID: "sh", Name: "sh",
		Command: func(o executor.StartOptions, _ string) (Command, error) {
			return Command{Path: "/bin/sh", Args: []string{"-c", o.Message}, Env: ScrubEnv([]string{"PATH=/usr/bin:/bin"}, nil), Dir: o.Cwd}, nil
		},
		NewDecoder: func(executor.StartOptions, string) Decoder { return lineDecoder{} },
		LookPath:   func() (string, error) { return LookPath("sh", []string{"PATH=/usr/bin:/bin"}) },
	}, opts)
}

func runScript(t *testing.T, e *Engine, script string) (*executor.RunHandle, []executor.Event) {
	t.Helper()
	run, err := e.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: script, Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var evs []executor.Event
	for {
		ev, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			return run, evs
		}
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
}

func reasons(evs []executor.Event) []string {
	var out []string
	for _, ev := range evs {
		s := string(ev.Kind())
		if d, ok := ev.Payload.(executor.Done); ok {
			s += ":" + string(d.Reason) + ":" + d.Summary
		}
		out = append(out, s)
	}
	return out
}

func TestEngineTerminals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		want   []string
	}{
		{"stream terminal", "echo id:n1; echo hello; echo done", []string{"status", "text-delta", "done:success:done"}},
		{"clean exit synthesizes success", "echo hi", []string{"text-delta", "done:success:hi"}},
		{"nonzero exit with stderr", "echo partial; echo 'bad thing' >&2; exit 3", []string{"text-delta", "error", "done:error:bad thing"}},
		{"nonzero exit without stderr", "exit 4", []string{"error", "done:error:sh exited with exit status 4"}},
		{"killed by SIGTERM", "echo x; kill -TERM $$", []string{"text-delta", "done:aborted:x"}},
		{"terminal then failing exit", "echo done; exit 1", []string{"done:success:done"}},
		{"error terminal wins over exit", "echo fail; exit 1", []string{"error", "done:error:failed"}},
		{"grandchild holding stdout", "(sleep 1 &) ; echo hi", []string{"text-delta", "done:success:hi"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := shEngine(Options{})
			defer e.Dispose(context.Background())
			_, evs := runScript(t, e, tt.script)
			if diff := cmp.Diff(tt.want, reasons(evs)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEngineAbortGroupAndCodec(t *testing.T) {
	t.Parallel()
	e := shEngine(Options{KillGrace: 100 * time.Millisecond})
	run, err := e.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "echo id:native-7; trap '' TERM; sleep 30 & wait", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ev, err := s.Next(t.Context()); err != nil || ev.RunID != "native-7" {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	if err := e.Abort(t.Context(), run); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	evs, err := executor.CollectUntilDone(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"done:aborted:"}, reasons(evs)); diff != "" {
		t.Errorf("after abort (-want +got):\n%s", diff)
	}
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	blob, err := e.SerializeSession(t.Context(), run)
	if err != nil || blob != `{"sessionKey":"k","sessionId":"native-7"}` {
		t.Errorf("SerializeSession = %s, %v", blob, err)
	}
	if h := e.Health(t.Context()); !h.OK {
		t.Errorf("Health = %+v", h)
	}
	if _, err := e.RestoreSession(t.Context(), "not json"); err == nil {
		t.Error("RestoreSession accepted garbage")
	}
	e.Forget("k")
	if _, err := e.Events(t.Context(), run); !errors.Is(err, executor.ErrNoSession) {
		t.Errorf("Events after Forget = %v, want ErrNoSession", err)
	}
}

func TestEngineDisposeKillsLiveRuns(t *testing.T) {
	t.Parallel()
	e := shEngine(Options{KillGrace: 100 * time.Millisecond})
	for _, key := range []string{"a", "b"} {
		if _, err := e.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: key, Message: "sleep 30", Cwd: t.TempDir()}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := e.Dispose(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Wait(ctx); err != nil {
		t.Errorf("Wait after Dispose: %v", err)
	}
}

// TestEngineOlderRunStaysReachable starts two runs on one session key: the
// first, superseded, can still be observed and aborted through its handle.
func TestEngineOlderRunStaysReachable(t *testing.T) {
	t.Parallel()
	e := shEngine(Options{KillGrace: 100 * time.Millisecond})
	defer e.Dispose(context.Background())
	dir := t.TempDir()
	first, err := e.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "echo one; sleep 30", Cwd: dir})
	if err != nil {
		t.Fatal(err)
	}
	_, second := runScript(t, e, "echo two")
	if got := reasons(second); !cmp.Equal(got, []string{"text-delta", "done:success:two"}) {
		t.Errorf("second run %v", got)
	}
	s, err := e.Events(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ev, err := s.Next(ctx) // the first run is live: it printed its line
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Abort(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	evs, err := executor.CollectUntilDone(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	evs = append([]executor.Event{ev}, evs...)
	if diff := cmp.Diff([]string{"text-delta", "done:aborted:one"}, reasons(evs)); diff != "" {
		t.Errorf("first run (-want +got):\n%s", diff)
	}
}

func TestEngineEvictsSessionsIdlePastTTL(t *testing.T) {
	t.Parallel()
	const ttl = time.Minute
	e := shEngine(Options{KillGrace: 100 * time.Millisecond, SessionIdleTTL: ttl})
	ended, _ := runScript(t, e, "echo done") // session "k", run to its end
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := e.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	live, err := e.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "live", Message: "sleep 30", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Dispose(context.Background()) })

	e.mu.Lock()
	e.evictIdle(time.Now().Add(ttl / 2)) // idle, but not for long enough
	e.mu.Unlock()
	if _, err := e.Events(t.Context(), ended); err != nil {
		t.Fatalf("session idle for half its TTL was evicted: %v", err)
	}

	e.mu.Lock()
	e.evictIdle(time.Now().Add(2 * ttl))
	e.mu.Unlock()
	if _, err := e.Events(t.Context(), ended); !errors.Is(err, executor.ErrNoSession) {
		t.Errorf("Events on a session idle past its TTL = %v, want ErrNoSession", err)
	}
	if _, err := e.Events(t.Context(), live); err != nil {
		t.Errorf("a session with a live run was evicted: %v", err)
	}
}
