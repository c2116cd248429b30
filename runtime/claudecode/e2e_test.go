package claudecode

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/executor/contract"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/runtime/internal/fakecli"
)

// TestContractWithRealCLI runs the contract suite against the real Claude
// Code CLI talking to the fake model server: a turn with text, a tool call
// (a real Bash run), an abort. Gated by CLAWCONNECT_E2E=1.
func TestContractWithRealCLI(t *testing.T) {
	peers.RequireE2E(t)
	model := fakemodel.New(t, fakemodel.Options{})
	cli := realcli.Require(t, realcli.ClaudeCode, model)
	contract.RunAdapterContract(t, fakecli.RealHarness(fakecli.RealHarnessConfig{
		Label:   "claude-code real CLI",
		WorkDir: cli.WorkDir,
		New: func(t *testing.T, logger *slog.Logger) executor.RuntimeAdapter {
			return New(Options{
				Binary: cli.Path, BinaryArgs: cli.Args, Environ: cli.Env, Dir: cli.WorkDir,
				Logger: logger,
			})
		},
	}))
}

// TestResumeWithRealCLI runs a turn, then resumes its session with a second
// prompt and a model set on the session in between: the second run binds to
// the same session id, requests the new model, and the model sees the first
// exchange (CLAWCONNECT_E2E=1).
func TestResumeWithRealCLI(t *testing.T) {
	peers.RequireE2E(t)
	model := fakemodel.New(t, fakemodel.Options{})
	cli := realcli.Require(t, realcli.ClaudeCode, model)
	a := New(Options{Binary: cli.Path, BinaryArgs: cli.Args, Environ: cli.Env, Dir: cli.WorkDir})
	defer a.Dispose(context.Background())
	first, run := runOnce(t, a, executor.StartOptions{SessionKey: "resume", Message: "ECHO=first-turn-token", Model: cli.Model})
	if err := a.SetModel(t.Context(), run, "fake-model-two"); err != nil {
		t.Fatal(err)
	}
	second, _ := runOnce(t, a, executor.StartOptions{SessionKey: "resume", Message: "ECHO=second-turn-token", Resume: first})
	if second != first {
		t.Errorf("resumed run bound to session %q, want %q", second, first)
	}
	reqs := model.Requests()
	last := reqs[len(reqs)-1]
	if !strings.Contains(string(last.Body), "first-turn-token") {
		t.Errorf("the resumed request does not carry the first turn")
	}
	if last.Model != "fake-model-two" {
		t.Errorf("resumed request model = %q, want the model set on the session", last.Model)
	}
}

// runOnce runs one turn to its end and returns the run id it bound to.
func runOnce(t *testing.T, a *Adapter, opts executor.StartOptions) (string, *executor.RunHandle) {
	t.Helper()
	run, err := a.Start(t.Context(), executor.Task{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := a.Events(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	evs, err := executor.CollectUntilDone(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := evs[len(evs)-1].Payload.(executor.Done); !ok || d.Reason != executor.DoneSuccess {
		t.Fatalf("run ended with %+v", evs[len(evs)-1].Payload)
	}
	id, _ := run.RunID()
	return id, run
}
