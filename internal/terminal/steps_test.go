package terminal

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/termapi"
)

const origin = "agent:main:s1"

// callbacksOf returns the Turn's queued callback messages, oldest first.
func callbacksOf(t *testing.T, r *rig, turnID string) []outbox.CallbackMessage {
	t.Helper()
	return queuedCallbacks(t, r.st, turnID)
}

// stepsOf is a callback's metadata.next_steps.
func stepsOf(m outbox.CallbackMessage) []string {
	raw, _ := m.Metadata["next_steps"].([]any)
	out := []string{}
	for _, s := range raw {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// stepScenario drives a fresh Turn (origin session set) to the state in
// which a callback of one kind is sent; it returns the Turn id.
type stepScenario struct {
	name string
	kind string
	typ  string
	// steps is what the callback suggests (the table the issue asks to
	// show).
	steps []string
	drive func(t *testing.T, r *rig, a *fakeAgent) string
}

func sendFrom(t *testing.T, r *rig, a *fakeAgent, req termapi.SendRequest) string {
	t.Helper()
	req.TerminalID, req.Request, req.OriginSession = a.pane.TerminalID, "do it", origin
	res, err := r.svc.Send(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res.TurnID
}

func approvalScenario(approvable bool) func(t *testing.T, r *rig, a *fakeAgent) string {
	return func(t *testing.T, r *rig, a *fakeAgent) string {
		id := sendFrom(t, r, a, termapi.SendRequest{})
		a.set(func(f *fakeAgent) {
			f.approval = &agents.ScreenApproval{Fingerprint: "fp-1", Kind: "run_command", Approvable: approvable}
		})
		r.waitStatus(id, termapi.TurnWaitingForOpenClaw)
		return id
	}
}

func questionScenario(answerable bool) func(t *testing.T, r *rig, a *fakeAgent) string {
	return func(t *testing.T, r *rig, a *fakeAgent) string {
		id := sendFrom(t, r, a, termapi.SendRequest{})
		a.set(func(f *fakeAgent) { f.question = colorQuestion(answerable) })
		r.waitStatus(id, termapi.TurnWaitingForOpenClaw)
		return id
	}
}

var stepScenarios = []stepScenario{
	{"question", KindQuestion, MsgQuestion, []string{StepRespond, StepCancel, StepClose, StepStatus}, questionScenario(true)},
	{"question that cannot be answered from here", KindQuestion, MsgBlocked, []string{StepAnswerInTerminal, StepCancel, StepClose, StepStatus}, questionScenario(false)},
	{"approvable prompt", KindApproval, MsgQuestion, []string{StepApprove, StepCancel, StepClose, StepStatus}, approvalScenario(true)},
	{"prompt that cannot be answered safely", KindApproval, MsgBlocked, []string{StepAnswerInTerminal, StepCancel, StepClose, StepStatus}, approvalScenario(false)},
	{"stall", KindStall, MsgBlocked, []string{StepRenew, StepCancel, StepClose, StepStatus}, func(t *testing.T, r *rig, a *fakeAgent) string {
		id := sendFrom(t, r, a, termapi.SendRequest{InactivityTimeout: 100 * time.Millisecond})
		r.waitStatus(id, termapi.TurnStalled)
		return id
	}},
	{"stall past the hard deadline", KindStall, MsgBlocked, []string{StepCancel, StepClose, StepStatus}, func(t *testing.T, r *rig, a *fakeAgent) string {
		id := sendFrom(t, r, a, termapi.SendRequest{HardTimeout: 100 * time.Millisecond})
		r.waitStatus(id, termapi.TurnStalled)
		return id
	}},
	{"done", KindCompletion, MsgDone, []string{StepSend, StepClose, StepStatus}, func(t *testing.T, r *rig, a *fakeAgent) string {
		id := sendFrom(t, r, a, termapi.SendRequest{})
		a.finish("reply", false)
		r.waitStatus(id, termapi.TurnIdle)
		return id
	}},
	{"failed", KindCompletion, MsgError, []string{StepClose, StepStatus}, func(t *testing.T, r *rig, a *fakeAgent) string {
		id := sendFrom(t, r, a, termapi.SendRequest{})
		a.finish("API Error", true)
		r.waitStatus(id, termapi.TurnFailed)
		return id
	}},
	{"cancelled by the caller", KindCancellation, MsgCancelled, []string{StepSend, StepStatus}, func(t *testing.T, r *rig, a *fakeAgent) string {
		id := sendFrom(t, r, a, termapi.SendRequest{})
		if _, err := r.svc.Cancel(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		return id
	}},
	{"interrupted in the terminal", KindCancellation, MsgCancelled, []string{StepSend, StepStatus}, func(t *testing.T, r *rig, a *fakeAgent) string {
		id := sendFrom(t, r, a, termapi.SendRequest{})
		a.interrupt()
		r.waitStatus(id, termapi.TurnCancelled)
		return id
	}},
}

// doStep performs one suggested operation on the Service.
func doStep(t *testing.T, r *rig, a *fakeAgent, turnID, step string) error {
	ctx := t.Context()
	switch step {
	case StepStatus:
		_, err := r.svc.Status(ctx, turnID)
		return err
	case StepRespond:
		_, err := r.svc.Respond(ctx, turnID, "yes")
		return err
	case StepApprove:
		_, err := r.svc.Approve(ctx, turnID, "")
		return err
	case StepCancel:
		_, err := r.svc.Cancel(ctx, turnID)
		return err
	case StepRenew:
		_, err := r.svc.Renew(ctx, turnID, 10)
		return err
	case StepClose:
		_, err := r.svc.Close(ctx, turnID, "")
		return err
	case StepSend:
		v, err := r.svc.Status(ctx, turnID)
		if err != nil {
			return err
		}
		_, err = r.svc.Send(ctx, termapi.SendRequest{SessionID: v.SessionID, Request: "a follow-up"})
		return err
	case StepAnswerInTerminal:
		// A human answers the prompt: the Turn goes back to the agent.
		a.set(func(f *fakeAgent) { f.approval, f.question = nil, nil })
		r.waitStatus(turnID, termapi.TurnWaitingForAgent)
		return nil
	}
	return fmt.Errorf("no such step %q", step)
}

// TestEverySuggestedStepIsAccepted: for every callback kind × Turn state
// the monitor and cancel produce, the callback's next steps are exactly the
// table's, and each one, performed on the Service in that state, is
// accepted.
func TestEverySuggestedStepIsAccepted(t *testing.T) {
	for i, sc := range stepScenarios {
		t.Run(sc.name, func(t *testing.T) {
			probe := newFakeAgent(termapi.AgentCodex, 400+i*10)
			r := newRig(t, probe)
			r.start(r.svc, hostpkg.Options{Recheck: 20 * time.Millisecond})
			id := sc.drive(t, r, probe)
			cbs := callbacksOf(t, r, id)
			if len(cbs) == 0 {
				t.Fatal("no callback")
			}
			last := cbs[len(cbs)-1]
			if last.Metadata["kind"] != sc.kind || last.Type != sc.typ {
				t.Fatalf("callback kind %v type %s, want %s %s", last.Metadata["kind"], last.Type, sc.kind, sc.typ)
			}
			if diff := cmp.Diff(sc.steps, stepsOf(last)); diff != "" {
				t.Fatalf("next steps (-want +got):\n%s", diff)
			}
			for j, step := range sc.steps {
				t.Run(step, func(t *testing.T) {
					a := newFakeAgent(termapi.AgentCodex, 400+i*10+j+1)
					r := newRig(t, a)
					r.start(r.svc, hostpkg.Options{Recheck: 20 * time.Millisecond})
					id := sc.drive(t, r, a)
					if got := stepsOf(callbacksOf(t, r, id)[len(callbacksOf(t, r, id))-1]); !cmp.Equal(got, sc.steps) {
						t.Fatalf("next steps %v, want %v", got, sc.steps)
					}
					if err := doStep(t, r, a, id, step); err != nil {
						t.Fatalf("suggested step %s refused: %v", step, err)
					}
				})
			}
		})
	}
}

// TestCancelRecordsOneCancelledCallback: cancel queues exactly one
// cancelled callback saying the caller cancelled; a second cancel is
// refused and queues nothing.
func TestCancelRecordsOneCancelledCallback(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 380)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	ctx := t.Context()
	id := sendFrom(t, r, a, termapi.SendRequest{})
	if _, err := r.svc.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Cancel(ctx, id); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("second cancel: %v", err)
	}
	cbs := callbacksOf(t, r, id)
	if len(cbs) != 1 {
		t.Fatalf("callbacks = %+v, want exactly one", cbs)
	}
	m := cbs[0]
	if m.Type != MsgCancelled || m.To != ActorOpenClaw || m.RequiresResponse || m.Metadata["kind"] != KindCancellation ||
		m.Metadata["cancelled_by"] != CancelledByCaller || m.Metadata["keys_sent"] != true || !strings.Contains(m.Body, "cancelled") {
		t.Fatalf("cancelled callback = %+v", m)
	}
	if v, _ := r.svc.Status(ctx, id); v.Status != termapi.TurnCancelled {
		t.Fatalf("turn = %+v", v)
	}
}

// TestCancelLeavesAPromptItCannotAnswer: over a prompt the bridge cannot
// answer safely, cancel cancels the Turn without pressing a key into it.
func TestCancelLeavesAPromptItCannotAnswer(t *testing.T) {
	a := newFakeAgent(termapi.AgentCodex, 385)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	id := approvalScenario(false)(t, r, a)
	keys := len(a.sentKeys())
	if _, err := r.svc.Cancel(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if got := a.sentKeys(); len(got) != keys {
		t.Fatalf("cancel pressed %v into a prompt it cannot answer", got[keys:])
	}
	// The prompt's callback and the cancel's may carry the same
	// millisecond, so their order is not theirs to tell: find it by type.
	var cancelled []outbox.CallbackMessage
	for _, m := range callbacksOf(t, r, id) {
		if m.Type == MsgCancelled {
			cancelled = append(cancelled, m)
		}
	}
	if len(cancelled) != 1 || !strings.Contains(cancelled[0].Body, "left in the terminal") {
		t.Fatalf("cancelled callbacks = %+v, want one saying the prompt is left in the terminal", cancelled)
	}
}

// TestInterruptInTheTerminalIsCancelled: an interrupt the session file
// records ends the Turn cancelled, with one cancelled callback that says
// it was interrupted in the terminal — not a failure without reply text.
func TestInterruptInTheTerminalIsCancelled(t *testing.T) {
	a := newFakeAgent(termapi.AgentClaude, 390)
	r := newRig(t, a)
	r.start(r.svc, hostpkg.Options{})
	id := sendFrom(t, r, a, termapi.SendRequest{})
	a.interrupt()
	v := r.waitStatus(id, termapi.TurnCancelled)
	if v.Result == nil || v.Result.Outcome != agents.OutcomeCancelled {
		t.Fatalf("turn = %+v", v)
	}
	cbs := callbacksOf(t, r, id)
	if len(cbs) != 1 {
		t.Fatalf("callbacks = %+v", cbs)
	}
	if m := cbs[0]; m.Type != MsgCancelled || m.Metadata["cancelled_by"] != CancelledInTerminal || strings.Contains(m.Body, "without reply text") {
		t.Fatalf("callback = %+v", m)
	}
	if _, err := r.svc.Cancel(t.Context(), id); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("cancel after the interrupt: %v", err)
	}
	if n := len(callbacksOf(t, r, id)); n != 1 {
		t.Fatalf("%d callbacks after a late cancel", n)
	}
}

// goldenCopy copies a recorded session file to path and returns its
// device and inode (the anchor's identity of the file).
func goldenCopy(t *testing.T, golden, path string) (uint64, uint64) {
	t.Helper()
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Dev), st.Ino
}

// interruptOutcome reads a recorded turn interrupted with Esc through an
// agent's Accepted and Completion.
func interruptOutcome(t *testing.T, a agents.Agent, anchor any) *agents.Completion {
	t.Helper()
	raw, _ := json.Marshal(anchor)
	acc, err := a.Accepted(t.Context(), agents.Pane{}, raw, "tell a long story SLOW")
	if err != nil || acc == nil {
		t.Fatalf("accepted = %+v, %v", acc, err)
	}
	c, _, err := a.Completion(t.Context(), agents.Pane{}, raw, *acc)
	if err != nil || c == nil {
		t.Fatalf("completion = %+v, %v", c, err)
	}
	return c
}

var goldenCapture = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// TestRecordedInterruptIsACancellation reads the recorded Claude Code
// 2.1.332 transcript and Codex 0.171.0 rollout of a turn interrupted with
// Esc: a cancellation, not the API error (Claude) or failure (Codex) it
// was once taken for.
func TestRecordedInterruptIsACancellation(t *testing.T) {
	t.Run("claude", func(t *testing.T) {
		const sessionID, cwd = "30235639-8dc9-428e-9610-b86a2f518154", "/tmp/claude-golden/work"
		path := claude.TranscriptPath(filepath.Join(t.TempDir(), ".claude"), cwd, sessionID)
		dev, ino := goldenCopy(t, filepath.Join("agents", "claude", "testdata", "transcript-interrupted.jsonl"), path)
		c := interruptOutcome(t, claude.Agent{}, claude.Anchor{SessionID: sessionID, Cwd: cwd, PID: 1, StartedAtMs: 1, Path: path,
			Offset: 165281, FileExisted: true, Dev: dev, Ino: ino, CapturedAt: goldenCapture})
		if c.Outcome != agents.OutcomeCancelled || c.Match != "claude_transcript_interrupted" {
			t.Fatalf("completion = %+v, want a cancellation", c)
		}
	})
	t.Run("codex", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "rollout-interrupted.jsonl")
		dev, ino := goldenCopy(t, filepath.Join("agents", "codex", "testdata", "rollout-interrupted.jsonl"), path)
		meta, err := codex.ReadSessionMeta(path)
		if err != nil {
			t.Fatal(err)
		}
		c := interruptOutcome(t, codex.Agent{}, codex.Anchor{Mode: codex.Existing, ThreadID: meta.ID, Path: path, Dev: dev, Ino: ino,
			Offset: 61260, FileExisted: true, CapturedAt: goldenCapture})
		if c.Outcome != agents.OutcomeCancelled || c.Match != "codex_turn_interrupted" {
			t.Fatalf("completion = %+v, want a cancellation", c)
		}
	})
}
