package module

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/clawconnect/clawconnect/agentsession"
)

// helperModeEnv makes the test binary act as a Go runtime module built on
// Serve (see helperModule).
const helperModeEnv = "AGENTSESSION_MODULE_TEST_MODE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperModeEnv); mode != "" {
		os.Exit(helperModule(mode))
	}
	// The helper modules are this binary re-run; under -race each would
	// otherwise sleep a second at exit. Only children read the new value.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	goleak.VerifyTestMain(m)
}

// helperModule is a Go module: main + Register + Serve.
func helperModule(mode string) int {
	reg := agentsession.NewRegistry()
	inspect := func(ctx context.Context, ref agentsession.Ref) (*agentsession.Observation, error) {
		switch ref.SessionID {
		case "missing":
			return nil, nil
		case "err":
			return nil, errors.New("the runtime is on fire")
		case "unsupported":
			return nil, fmt.Errorf("not today: %w", agentsession.ErrUnsupportedOperation)
		case "panic":
			panic("helper panic")
		case "crash":
			os.Exit(9)
		case "hang":
			_, hasDeadline := ctx.Deadline()
			fmt.Fprintf(os.Stderr, "hang started deadline=%v\n", hasDeadline)
			<-ctx.Done()
			fmt.Fprintf(os.Stderr, "hang %s cancelled: %v\n", ref.SessionID, ctx.Err())
			return nil, ctx.Err()
		case "grow": // adds 100 new metadata keys with every reply
			md := map[string]any{}
			for i := range 100 {
				md[fmt.Sprintf("k%05d", len(ref.Metadata)+i)] = strings.Repeat("v", 100)
			}
			return &agentsession.Observation{State: "running", Metadata: md}, nil
		case "badfields":
			return &agentsession.Observation{State: "needs_input", ProviderSessionID: "../x", Host: "box\x1b[31m",
				RemoteURL: "https://user:hunter2@h.example/s?token=hunter2"}, nil
		case "goodfields":
			return &agentsession.Observation{State: "needs_input", ProviderSessionID: "0199a6c2-7b1e-7c4d-9a3f-2b8e4f1d6c0a",
				Host: "box-1.example:8443", RemoteURL: "https://h.example/s/1?tab=log#L10"}, nil
		case "deadline":
			dl, ok := ctx.Deadline()
			return &agentsession.Observation{State: "running", Detail: fmt.Sprintf("deadline=%v in=%v", ok, time.Until(dl) > 0)}, nil
		}
		return &agentsession.Observation{
			State: "running", Alive: agentsession.Bool(true), LatestResponse: "hello " + ref.SessionID,
			Metadata: map[string]any{"provider_seen": ref.Provider, "last": string(ref.LastKnownState)},
		}, nil
	}
	_ = reg.Register(agentsession.Runtime{ID: "go-rt", Provider: "go-provider", Inspect: inspect,
		Continue: func(_ context.Context, ref agentsession.Ref, prompt string) (*agentsession.Observation, error) {
			return &agentsession.Observation{State: "running", LatestResponse: "continued: " + prompt}, nil
		}})
	_ = reg.Register(agentsession.Runtime{ID: "go-rt2", Provider: "other", Inspect: inspect,
		Detach: func(_ context.Context, ref agentsession.Ref, reason string) (*agentsession.Observation, error) {
			return &agentsession.Observation{State: "dead", Detail: "detached: " + reason}, nil
		}})
	if mode == "noisy" {
		fmt.Fprintln(os.Stderr, "helper starting up")
	}
	if err := Serve(context.Background(), reg, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// logRecorder is a slog handler that keeps every record's message and
// attributes for assertions.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
	added chan struct{}
}

func newLogRecorder() *logRecorder { return &logRecorder{added: make(chan struct{}, 1)} }

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	var sb strings.Builder
	sb.WriteString(rec.Level.String() + " " + rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		sb.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, sb.String())
	r.mu.Unlock()
	select {
	case r.added <- struct{}{}:
	default:
	}
	return nil
}

func (r *logRecorder) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.lines, "\n")
}

func (r *logRecorder) count(substr string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lines {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// waitFor waits until a log line contains substr, failing after a bound.
func (r *logRecorder) waitFor(t *testing.T, substr string) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for r.count(substr) == 0 {
		select {
		case <-r.added:
		case <-deadline.C:
			t.Fatalf("no log line containing %q; log:\n%s", substr, r.all())
		}
	}
}

func (r *logRecorder) logger() *slog.Logger { return slog.New(r) }

// helperSpec returns a module list naming the test binary in mode.
func helperSpec(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func helperEnv(mode string) []string { return append(os.Environ(), helperModeEnv+"="+mode) }
