package contract

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/executor"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestInMemoryAdapterPassesContract is the suite's self-test: the smallest
// correct adapter passes it, so a failure elsewhere is the adapter's fault.
func TestInMemoryAdapterPassesContract(t *testing.T) {
	var cur *InMemoryAdapter
	var key string
	n := 0
	RunAdapterContract(t, Harness{
		Label: "in-memory",
		New: func(t *testing.T) executor.RuntimeAdapter {
			cur = NewInMemoryAdapter()
			return cur
		},
		Start: func(t *testing.T, a executor.RuntimeAdapter, _ []Frame) (*executor.RunHandle, error) {
			n++
			key = "agent:main:contract-" + string(rune('a'+n))
			return a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: key, Message: "hi"})
		},
		Emit: func(t *testing.T, f Frame) {
			if err := cur.Inject(key, f); err != nil {
				t.Fatal(err)
			}
		},
		RecordedCalls: func(*testing.T) []RecordedCall { return cur.Calls() },
	})
}

// TestInMemoryBuffersBeforeFirstSubscriber checks the eager-subscription
// rule the suite relies on: frames emitted before Events are replayed.
func TestInMemoryBuffersBeforeFirstSubscriber(t *testing.T) {
	a := NewInMemoryAdapter()
	run, err := a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Inject("k", Delta("early")); err != nil {
		t.Fatal(err)
	}
	if err := a.Inject("k", Final("early")); err != nil {
		t.Fatal(err)
	}
	s, err := a.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	evs, err := executor.CollectUntilDone(t.Context(), s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Payload != (executor.TextDelta{Text: "early", Channel: executor.ChannelAssistant}) {
		t.Errorf("replayed %v, want the early delta then done", evs)
	}
}

// brokenAdapter binds its run id at start, which the suite must catch.
type brokenAdapter struct{ *InMemoryAdapter }

func (b brokenAdapter) Start(ctx context.Context, task executor.Task, o executor.StartOptions) (*executor.RunHandle, error) {
	run, err := b.InMemoryAdapter.Start(ctx, task, o)
	if err == nil {
		run.BindRunID("eager")
	}
	return run, err
}

// TestBrokenAdapterFailsContract runs the suite against brokenAdapter in a
// child test process and checks that it fails for the right reason.
func TestBrokenAdapterFailsContract(t *testing.T) {
	if os.Getenv("CONTRACT_RUN_BROKEN") == "1" {
		var cur brokenAdapter
		RunAdapterContract(t, Harness{
			Label: "broken",
			New: func(*testing.T) executor.RuntimeAdapter {
				cur = brokenAdapter{NewInMemoryAdapter()}
				return cur
			},
			Start: func(t *testing.T, a executor.RuntimeAdapter, _ []Frame) (*executor.RunHandle, error) {
				return a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: "k", Message: "m"})
			},
			Emit:          func(t *testing.T, f Frame) { _ = cur.Inject("k", f) },
			RecordedCalls: func(*testing.T) []RecordedCall { return cur.Calls() },
		})
		return
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenAdapterFailsContract$", "-test.v")
	cmd.Env = append(os.Environ(), "CONTRACT_RUN_BROKEN=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed an adapter that binds its run id at start:\n%s", out)
	}
	for _, want := range []string{"--- FAIL: TestBrokenAdapterFailsContract/RuntimeAdapter_contract_broken/start_handle", "must bind late"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "--- FAIL: TestBrokenAdapterFailsContract/RuntimeAdapter_contract_broken/round_trip") {
		t.Errorf("round trip failed too; only the start-handle case should:\n%s", out)
	}
}
