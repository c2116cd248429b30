package terminal

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/termapi"
)

// sendAndWait sends request to the pane and waits for its reply.
func sendAndWait(t *testing.T, svc *Service, rp *realPane, request, reply string) termapi.SendResult {
	t.Helper()
	waitSendable(t, svc, rp)
	res, err := svc.Send(t.Context(), termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: request})
	if err != nil {
		t.Fatalf("send %q: %v; screen:\n%s", request, err, rp.debug())
	}
	if v := waitTurnStatus(t, svc, res.TurnID, 90*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled); v.Status != termapi.TurnIdle || v.Result.Text != reply {
		t.Fatalf("turn of %q = %+v; screen:\n%s", request, v, rp.debug())
	}
	return res
}

// waitConflict waits (bounded) until the pane's row is a conflict after a
// human typed command.
func waitConflict(t *testing.T, svc *Service, rp *realPane, command string) {
	t.Helper()
	var row termapi.TerminalRow
	if !poll.WithinEvery(20*time.Second, 100*time.Millisecond, func() bool {
		row = paneRow(t, svc)
		return row.ManagementState == "conflict"
	}) {
		t.Fatalf("no conflict after a human %s: %+v; screen:\n%s", command, row, rp.debug())
	}
}

func paneRow(t *testing.T, svc *Service) termapi.TerminalRow {
	t.Helper()
	list, err := svc.List(t.Context())
	if err != nil || len(list.Terminals) != 1 {
		t.Fatalf("list = %+v, %v", list, err)
	}
	return list.Terminals[0]
}

// lastPrompt returns the body of the newest model request whose prompt
// contains marker.
func lastPrompt(t *testing.T, model *fakemodel.Server, marker string) string {
	t.Helper()
	var body string
	for _, r := range model.Requests() {
		if strings.Contains(r.Prompt, marker) {
			body = string(r.Body)
		}
	}
	if body == "" {
		t.Fatalf("no model request with %q", marker)
	}
	return body
}

// TestE2EClaudeThreadTransitions drives Claude Code 2.1.332's own controls:
// new-thread → send → reply in a new native thread; a transition refused
// while a Turn runs; resume of the older thread → the model sees that
// thread's context; a human /clear → conflict → adopt → send.
func TestE2EClaudeThreadTransitions(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.ClaudeCode, model)
	svc, st := newRealService(t, rp)
	runHost(t, svc)
	ctx := t.Context()

	first := sendAndWait(t, svc, rp, "remember MARK-ALPHA-7 ECHO=alpha-done", "alpha-done")
	firstTurn, _ := st.GetTurn(ctx, first.TurnID)
	if row := paneRow(t, svc); row.BindingGeneration != 1 || row.SessionID != first.SessionID {
		t.Fatalf("row before the transition = %+v", row)
	}

	v, err := svc.NewThread(ctx, rp.pane.TerminalID)
	if err != nil {
		t.Fatalf("new-thread: %v; screen:\n%s", err, rp.debug())
	}
	if v.Status != store.TransitionCommitted || v.Generation != 2 || v.FromThreadID != firstTurn.NativeThreadID || v.ThreadID == v.FromThreadID || v.AgentVersion != claude.ThreadVersion {
		t.Fatalf("new-thread = %+v", v)
	}
	if row := paneRow(t, svc); row.BindingGeneration != 2 || row.SessionID != v.SessionID || row.NativeThreadID != v.ThreadID {
		t.Fatalf("row after the transition = %+v", row)
	}
	second := sendAndWait(t, svc, rp, "remember MARK-BETA-8 ECHO=beta-done", "beta-done")
	secondTurn, _ := st.GetTurn(ctx, second.TurnID)
	if second.SessionID != v.SessionID || secondTurn.NativeThreadID != v.ThreadID || secondTurn.TerminalBindingGeneration != 2 {
		t.Fatalf("first turn of the new thread = %+v", secondTurn)
	}
	if body := lastPrompt(t, model, "MARK-BETA-8"); strings.Contains(body, "MARK-ALPHA-7") {
		t.Fatal("the new thread's request still carries the old thread's context")
	}

	// A running Turn blocks a transition; nothing reaches the pane.
	waitSendable(t, svc, rp)
	slow, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "WAIT=3000 ECHO=slow-done"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ResumeThread(ctx, rp.pane.TerminalID, firstTurn.NativeThreadID); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("resume while a Turn runs: %v", err)
	}
	waitTurnStatus(t, svc, slow.TurnID, 60*time.Second, termapi.TurnIdle)

	threads, err := svc.Threads(ctx, rp.pane.TerminalID)
	if err != nil {
		t.Fatal(err)
	}
	var older *agents.NativeThread
	for i, th := range threads.Threads {
		if th.ID == firstTurn.NativeThreadID {
			older = &threads.Threads[i]
		}
	}
	if older == nil || !strings.Contains(older.Title, "MARK-ALPHA-7") || older.SessionID != first.SessionID || older.Current ||
		threads.Threads[0].ID != v.ThreadID || !threads.Threads[0].Current {
		t.Fatalf("threads = %+v", threads)
	}
	waitSendable(t, svc, rp)
	r, err := svc.ResumeThread(ctx, rp.pane.TerminalID, firstTurn.NativeThreadID)
	if err != nil {
		t.Fatalf("resume-thread: %v; screen:\n%s", err, rp.debug())
	}
	if r.Status != store.TransitionCommitted || r.SessionID != first.SessionID || r.Generation != 3 || r.ThreadID != firstTurn.NativeThreadID {
		t.Fatalf("resume = %+v", r)
	}
	third := sendAndWait(t, svc, rp, "what did I ask you to remember? ECHO=gamma-done", "gamma-done")
	if third.SessionID != first.SessionID {
		t.Fatalf("send after resume went to %s, want the reactivated %s", third.SessionID, first.SessionID)
	}
	if body := lastPrompt(t, model, "ECHO=gamma-done"); !strings.Contains(body, "MARK-ALPHA-7") || strings.Contains(body, "MARK-BETA-8") {
		t.Fatal("after resume the model does not see the resumed thread's context (MARK-ALPHA-7 only)")
	}

	// A human /clear: the row is a conflict, sends wait for a choice.
	waitSendable(t, svc, rp)
	if err := rp.tui.Submit(ctx, "/clear"); err != nil {
		t.Fatal(err)
	}
	waitConflict(t, svc, rp, "/clear")
	row := paneRow(t, svc)
	if row.Conflict == nil || row.Conflict.SessionID != first.SessionID || len(row.AvailableActions) != 0 || len(row.Conflict.Choices) != 2 {
		t.Fatalf("conflict row = %+v", row)
	}
	if _, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "ECHO=never"}); !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), "adopt-thread") {
		t.Fatalf("send during a conflict: %v", err)
	}
	ad, err := svc.AdoptThread(ctx, rp.pane.TerminalID)
	if err != nil || ad.Status != store.TransitionCommitted || ad.Generation != 4 || ad.ThreadID == firstTurn.NativeThreadID {
		t.Fatalf("adopt = %+v, %v", ad, err)
	}
	last := sendAndWait(t, svc, rp, "ECHO=delta-done", "delta-done")
	if last.SessionID != ad.SessionID {
		t.Fatalf("send after adopt went to %s, want %s", last.SessionID, ad.SessionID)
	}
}

// crashEnv names the variables of the crash helper process.
const (
	crashStoreEnv    = "CLAWCONNECT_TEST_CRASH_STORE"
	crashSocketEnv   = "CLAWCONNECT_TEST_CRASH_SOCKET"
	crashTerminalEnv = "CLAWCONNECT_TEST_CRASH_TERMINAL"
	crashMarkerEnv   = "CLAWCONNECT_TEST_CRASH_MARKER"
)

// TestE2ETransitionCrashHelper is not a test: TestE2EClaudeTransitionKilled
// and TestE2ECodexTransitionKilled run it in a child process, which starts a new-thread transition and
// stops for good once the step is submitted, until it is killed.
func TestE2ETransitionCrashHelper(t *testing.T) {
	path := os.Getenv(crashStoreEnv)
	if path == "" {
		t.Skip("run by TestE2E*TransitionKilled")
	}
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	terms, err := NewTmuxTerminals(tmux.Options{Sockets: []string{os.Getenv(crashSocketEnv)}, NoDefaultServer: true})
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(Options{Store: st, Terminals: terms, Agents: DefaultAgents()})
	svc.transitionHook = func(status string) {
		if status == store.TransitionSubmitted {
			_ = os.WriteFile(os.Getenv(crashMarkerEnv), []byte("submitted"), 0o600)
			select {} // killed here
		}
	}
	_, err = svc.NewThread(context.Background(), os.Getenv(crashTerminalEnv))
	t.Fatalf("the transition ended instead of stopping: %v", err)
}

// TestE2EClaudeTransitionKilled kills (SIGKILL) a process in the middle of
// a transition: after it, the record is completed from the agent's files
// or uncertain, never half-applied, and the terminal is not blocked for
// good.
func TestE2EClaudeTransitionKilled(t *testing.T) { transitionKilled(t, realcli.ClaudeCode) }

// TestE2ECodexTransitionKilled is TestE2EClaudeTransitionKilled on Codex.
func TestE2ECodexTransitionKilled(t *testing.T) { transitionKilled(t, realcli.Codex) }

func transitionKilled(t *testing.T, kind realcli.Kind) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, kind, model)
	dir := t.TempDir()
	path := filepath.Join(dir, sqlite.FileName)
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	svc := NewService(Options{Store: st, Terminals: rp.terms, Agents: DefaultAgents()})
	runHost(t, svc)
	ctx := t.Context()
	first := sendAndWait(t, svc, rp, "ECHO=before-crash", "before-crash")
	waitSendable(t, svc, rp)

	marker := filepath.Join(dir, "submitted")
	cmd := exec.Command(os.Args[0], "-test.run=^TestE2ETransitionCrashHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashStoreEnv+"="+path, crashSocketEnv+"="+rp.socket,
		crashTerminalEnv+"="+rp.pane.TerminalID, crashMarkerEnv+"="+marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if !poll.WithinEvery(60*time.Second, 50*time.Millisecond, func() bool {
		if _, err := os.Stat(marker); err == nil {
			return true
		}
		select {
		case err := <-done:
			t.Fatalf("the helper ended before the transition was submitted: %v", err)
		default:
		}
		return false
	}) {
		_ = cmd.Process.Kill()
		t.Fatalf("the helper did not reach submitted; screen:\n%s", rp.debug())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done

	var ts store.TransitionStore = st
	open, err := ts.OpenTransitions(ctx, 10)
	if err != nil || len(open) != 1 || open[0].Status != store.TransitionSubmitted {
		t.Fatalf("open transitions after the kill = %+v, %v", open, err)
	}
	id := open[0].TransitionID
	// The next scan settles it (called here rather than waiting for the
	// host's timer).
	if _, err := svc.RecoverTransitions(ctx); err != nil {
		t.Fatal(err)
	}
	tr, err := ts.GetTransition(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the kill and a scan the transition is %s", tr.Status)
	old, _ := st.GetTermSession(ctx, first.SessionID)
	switch tr.Status {
	case store.TransitionCommitted:
		nw, err := st.GetTermSession(ctx, tr.TargetSessionID)
		if err != nil || old.Status != store.SessionDetached || nw.Status != store.SessionBound || nw.Binding.Generation != 2 || nw.Binding.NativeThreadID != tr.ObservedThreadID {
			t.Fatalf("committed but half-applied: old %+v new %+v %v", old, nw, err)
		}
	case store.TransitionUncertain:
		if old.Status != store.SessionBound || old.Binding.Generation != 1 {
			t.Fatalf("uncertain but the session changed: %+v", old)
		}
		if row := paneRow(t, svc); row.Transition == nil || len(row.Transition.RecoveryActions) != 2 {
			t.Fatalf("row of an uncertain transition = %+v", row)
		}
		// The agent may take a moment to act on the submitted step: an
		// operator retries --adopt until its files prove it.
		var v termapi.TransitionView
		var err error
		if !poll.WithinEvery(20*time.Second, 200*time.Millisecond, func() bool {
			v, err = svc.ResolveTransition(ctx, id, true)
			if err == nil && v.Status == store.TransitionCommitted {
				return true
			}
			if !errors.Is(err, termapi.ErrRefused) {
				t.Fatalf("resolve --adopt = %+v, %v; screen:\n%s", v, err, rp.debug())
			}
			return false
		}) {
			t.Fatalf("resolve --adopt = %+v, %v; screen:\n%s", v, err, rp.debug())
		}
	default:
		t.Fatalf("transition after the kill and a scan = %+v", tr)
	}
	if row := paneRow(t, svc); row.BindingGeneration != 2 || row.Transition != nil {
		t.Fatalf("row after recovery = %+v", row)
	}
	after := sendAndWait(t, svc, rp, "ECHO=after-crash", "after-crash")
	if after.SessionID != tr.TargetSessionID {
		t.Fatalf("send after recovery went to %s, want %s", after.SessionID, tr.TargetSessionID)
	}
}

// TestE2ECodexThreadTransitions drives Codex 0.171.0's own controls:
// new-thread → send → reply in a new native thread (the TUI's /status card
// agrees); a transition refused while a Turn runs; the workspace's threads
// listed newest first; resume of the older thread → send → the model sees
// that thread's context; clear-thread → a third thread; a human /new →
// conflict → adopt → send.
func TestE2ECodexThreadTransitions(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.Codex, model)
	svc, st := newRealService(t, rp)
	runHost(t, svc)
	ctx := t.Context()

	waitSendable(t, svc, rp)
	if _, err := svc.NewThread(ctx, rp.pane.TerminalID); !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), "no thread yet") {
		t.Fatalf("new-thread before any prompt: %v", err)
	}
	first := sendAndWait(t, svc, rp, "remember MARK-ALPHA-7 ECHO=alpha-done", "alpha-done")
	firstTurn, _ := st.GetTurn(ctx, first.TurnID)
	if row := paneRow(t, svc); row.BindingGeneration != 1 || row.SessionID != first.SessionID || row.NativeThreadID != firstTurn.NativeThreadID {
		t.Fatalf("row before the transition = %+v", row)
	}

	// Codex's screen may still show the turn working after its rollout
	// recorded the reply; a transition waits for an idle pane.
	waitSendable(t, svc, rp)
	v, err := svc.NewThread(ctx, rp.pane.TerminalID)
	if err != nil {
		t.Fatalf("new-thread: %v; screen:\n%s", err, rp.debug())
	}
	if v.Status != store.TransitionCommitted || v.Generation != 2 || v.FromThreadID != firstTurn.NativeThreadID || v.ThreadID == "" ||
		v.ThreadID == v.FromThreadID || v.AgentVersion != codex.ThreadVersion {
		t.Fatalf("new-thread = %+v", v)
	}
	if row := paneRow(t, svc); row.BindingGeneration != 2 || row.SessionID != v.SessionID || row.NativeThreadID != v.ThreadID {
		t.Fatalf("row after the transition = %+v", row)
	}
	// The TUI's own status card names the thread the files proved.
	waitSendable(t, svc, rp)
	if card, err := svc.Inspect(ctx, rp.pane.TerminalID); err != nil || card.SessionID != v.ThreadID {
		t.Fatalf("/status after new-thread = %+v, %v; want session %s", card, err, v.ThreadID)
	}
	second := sendAndWait(t, svc, rp, "remember MARK-BETA-8 ECHO=beta-done", "beta-done")
	secondTurn, _ := st.GetTurn(ctx, second.TurnID)
	if second.SessionID != v.SessionID || secondTurn.NativeThreadID != v.ThreadID || secondTurn.TerminalBindingGeneration != 2 {
		t.Fatalf("first turn of the new thread = %+v", secondTurn)
	}
	if body := lastPrompt(t, model, "MARK-BETA-8"); strings.Contains(body, "MARK-ALPHA-7") {
		t.Fatal("the new thread's request still carries the old thread's context")
	}

	// A running Turn blocks a transition; nothing reaches the pane.
	waitSendable(t, svc, rp)
	slow, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "WAIT=3000 ECHO=slow-done"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ResumeThread(ctx, rp.pane.TerminalID, firstTurn.NativeThreadID); !errors.Is(err, termapi.ErrRefused) {
		t.Fatalf("resume while a Turn runs: %v", err)
	}
	waitTurnStatus(t, svc, slow.TurnID, 60*time.Second, termapi.TurnIdle)

	threads, err := svc.Threads(ctx, rp.pane.TerminalID)
	if err != nil || len(threads.Threads) != 2 {
		t.Fatalf("threads = %+v, %v", threads, err)
	}
	newer, older := threads.Threads[0], threads.Threads[1]
	if newer.ID != v.ThreadID || !newer.Current || !strings.Contains(newer.Title, "MARK-BETA-8") || newer.SessionID != v.SessionID ||
		older.ID != firstTurn.NativeThreadID || older.Current || !strings.Contains(older.Title, "MARK-ALPHA-7") ||
		older.SessionID != first.SessionID || older.SessionStatus != store.SessionDetached || older.UpdatedAt > newer.UpdatedAt || older.CreatedAt == 0 {
		t.Fatalf("threads = %+v", threads)
	}
	waitSendable(t, svc, rp)
	r, err := svc.ResumeThread(ctx, rp.pane.TerminalID, firstTurn.NativeThreadID)
	if err != nil {
		t.Fatalf("resume-thread: %v; screen:\n%s", err, rp.debug())
	}
	if r.Status != store.TransitionCommitted || r.SessionID != first.SessionID || r.Generation != 3 || r.ThreadID != firstTurn.NativeThreadID {
		t.Fatalf("resume = %+v", r)
	}
	third := sendAndWait(t, svc, rp, "what did I ask you to remember? ECHO=gamma-done", "gamma-done")
	thirdTurn, _ := st.GetTurn(ctx, third.TurnID)
	if third.SessionID != first.SessionID || thirdTurn.NativeThreadID != firstTurn.NativeThreadID || thirdTurn.TerminalBindingGeneration != 3 {
		t.Fatalf("send after resume = %+v, want the reactivated %s", thirdTurn, first.SessionID)
	}
	if body := lastPrompt(t, model, "ECHO=gamma-done"); !strings.Contains(body, "MARK-ALPHA-7") || strings.Contains(body, "MARK-BETA-8") {
		t.Fatal("after resume the model does not see the resumed thread's context (MARK-ALPHA-7 only)")
	}

	waitSendable(t, svc, rp)
	c, err := svc.ClearThread(ctx, rp.pane.TerminalID)
	if err != nil || c.Status != store.TransitionCommitted || c.Generation != 4 || c.ThreadID == firstTurn.NativeThreadID || c.ThreadID == v.ThreadID {
		t.Fatalf("clear-thread = %+v, %v; screen:\n%s", c, err, rp.debug())
	}
	last := sendAndWait(t, svc, rp, "ECHO=delta-done", "delta-done")
	if last.SessionID != c.SessionID {
		t.Fatalf("send after clear went to %s, want %s", last.SessionID, c.SessionID)
	}
	if body := lastPrompt(t, model, "ECHO=delta-done"); strings.Contains(body, "MARK-ALPHA-7") {
		t.Fatal("the cleared thread's request still carries the old context")
	}

	// A human /new: the writer lock shows the switch at once, before any
	// prompt; the row is a conflict until adopt-thread.
	waitSendable(t, svc, rp)
	if err := rp.tui.Submit(ctx, "/new"); err != nil {
		t.Fatal(err)
	}
	waitConflict(t, svc, rp, "/new")
	if _, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "ECHO=never"}); !errors.Is(err, termapi.ErrRefused) || !strings.Contains(err.Error(), "adopt-thread") {
		t.Fatalf("send during a conflict: %v", err)
	}
	ad, err := svc.AdoptThread(ctx, rp.pane.TerminalID)
	if err != nil || ad.Status != store.TransitionCommitted || ad.Generation != 5 || ad.ThreadID == c.ThreadID {
		t.Fatalf("adopt = %+v, %v", ad, err)
	}
	if adopted := sendAndWait(t, svc, rp, "ECHO=epsilon-done", "epsilon-done"); adopted.SessionID != ad.SessionID {
		t.Fatalf("send after adopt went to %s, want %s", adopted.SessionID, ad.SessionID)
	}
}

// Codex 0.171 closes the old thread's rollout about a minute after /new;
// until the new thread's first prompt, only its writer lock names it. A
// follow send then must still land in the Session the transition made (it
// made a second Session, whose thread binding collided with the first).
// This waits for Codex to close the rollout, so it is skipped with -short.
func TestE2ECodexSendAfterTheOldRolloutClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("waits about a minute for Codex to close the old rollout")
	}
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.Codex, model)
	svc, st := newRealService(t, rp)
	runHost(t, svc)
	ctx := t.Context()
	sendAndWait(t, svc, rp, "ECHO=alpha-done", "alpha-done")
	waitSendable(t, svc, rp)
	v, err := svc.NewThread(ctx, rp.pane.TerminalID)
	if err != nil {
		t.Fatalf("new-thread: %v; screen:\n%s", err, rp.debug())
	}
	var id agents.Identity
	if !poll.WithinEvery(150*time.Second, 250*time.Millisecond, func() bool {
		id, err = codex.Agent{}.Identify(ctx, rp.pane)
		return err == nil && id.ThreadID == "" && id.Locked == v.ThreadID
	}) {
		t.Fatalf("codex never closed the old rollout: identity %+v, %v", id, err)
	}
	if row := paneRow(t, svc); row.SessionID != v.SessionID || row.NativeThreadID != v.ThreadID || row.BindingGeneration != 2 {
		t.Fatalf("row with only the lock = %+v, want session %s on %s", row, v.SessionID, v.ThreadID)
	}
	res := sendAndWait(t, svc, rp, "ECHO=beta-done", "beta-done")
	turn, _ := st.GetTurn(ctx, res.TurnID)
	if res.SessionID != v.SessionID || turn.NativeThreadID != v.ThreadID || turn.TerminalBindingGeneration != 2 {
		t.Fatalf("send went to session %s (turn %+v), want %s on %s at generation 2", res.SessionID, turn, v.SessionID, v.ThreadID)
	}
	if list, err := st.SessionsByTerminal(ctx, rp.pane.Key); err != nil || len(list) != 2 {
		t.Fatalf("the terminal has %d Sessions (%v), want 2", len(list), err)
	}
}
