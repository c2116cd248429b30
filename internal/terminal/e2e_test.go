package terminal

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
	"github.com/clawconnect/clawconnect/termapi"
)

// lastPane is the pane of the running end-to-end test (they do not run in
// parallel), for failure messages.
var lastPane *realPane

// realPane is a real coding-agent TUI in a pane of a private tmux server.
type realPane struct {
	t      testing.TB
	tui    *realtui.TUI
	socket string
	terms  *TmuxTerminals
	agent  agents.Agent
	pane   agents.Pane
}

// startRealTUI starts kind's TUI against model in a private tmux server and
// waits until its pane is idle and discovered.
func startRealTUI(t testing.TB, kind realcli.Kind, model *fakemodel.Server, args ...string) *realPane {
	t.Helper()
	tui := realtui.Require(t, kind, model, realtui.Options{Width: 200, Height: 50, Args: args})
	terms, err := NewTmuxTerminals(tmux.Options{Sockets: []string{tui.Socket}, NoDefaultServer: true})
	if err != nil {
		t.Fatal(err)
	}
	agent := DefaultAgents()[map[realcli.Kind]string{realcli.Codex: termapi.AgentCodex, realcli.ClaudeCode: termapi.AgentClaude}[kind]]
	rp := &realPane{t: t, tui: tui, socket: tui.Socket, terms: terms, agent: agent}
	lastPane = rp
	rp.awaitIdle(t, "")
	return rp
}

// awaitIdle waits until the pane's agent, one other than the terminal id
// gone names, is discovered and idle for the parser.
func (rp *realPane) awaitIdle(t testing.TB, gone string) {
	t.Helper()
	var panes []agents.Pane
	var err error
	var last string
	if !poll.WithinEvery(60*time.Second, 200*time.Millisecond, func() bool {
		panes, err = rp.terms.Discover(t.Context())
		if err == nil && len(panes) == 1 && panes[0].TerminalID != gone {
			// The same agent process twice in a row: Codex's launcher
			// hands over to its native binary during start-up.
			stable := panes[0].TerminalID == rp.pane.TerminalID
			rp.pane = panes[0]
			if text, err := rp.terms.Capture(t.Context(), rp.pane); err == nil {
				last = text
				if s := rp.agent.Screen(text); stable && s.Activity == "idle" && s.ComposerEmpty {
					return true
				}
			}
		}
		return false
	}) {
		t.Fatalf("the %s TUI is not idle for the parser (panes %d, err %v); screen:\n%s", rp.tui.CLI.Kind, len(panes), err, last)
	}
}

func (rp *realPane) screen() string {
	text, _ := rp.terms.Capture(context.Background(), rp.pane)
	return text
}

// debug is the screen and the discovery rows, for failure messages.
func (rp *realPane) debug() string {
	text := rp.screen()
	rows, err := rp.terms.Finder.Discover(context.Background())
	text += fmt.Sprintf("\n--- discovery (err %v):\n", err)
	for _, r := range rows {
		text += fmt.Sprintf("%s pid=%d controllable=%v reason=%q candidates=%v launchers=%v\n", r.TerminalID, r.Process.PID, r.Controllable, r.Reason, r.Candidates, r.Launchers)
	}
	return text
}

// newBenchSQLite opens a SQLite store in a temporary directory.
func newBenchSQLite(t testing.TB) store.Store {
	st, err := sqlite.Open(context.Background(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newRealService(t *testing.T, rp *realPane) (*Service, store.Store) {
	st := newBenchSQLite(t)
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return NewService(Options{Store: st, Terminals: rp.terms, Agents: DefaultAgents(), Logger: logger}), st
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func runHost(t *testing.T, svc *Service) *hostpkg.Host {
	h := hostpkg.New(svc, hostpkg.Options{Store: svc.o.Store, Recheck: 2 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func waitTurnStatus(t *testing.T, svc *Service, id string, timeout time.Duration, want ...termapi.TurnStatus) termapi.TurnView {
	t.Helper()
	var v termapi.TurnView
	if !poll.WithinEveryOn(timeout, 200*time.Millisecond, nextChangeOf(svc), func() bool {
		var err error
		if v, err = svc.Status(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(want, v.Status)
	}) {
		screen := ""
		if lastPane != nil {
			screen = lastPane.debug()
		}
		t.Fatalf("turn %s is %s, want %v: %+v\nscreen:\n%s", id, v.Status, want, v, screen)
	}
	return v
}

func TestE2ECodexSendWaitExactReply(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.Codex, model)
	svc, st := newRealService(t, rp)
	runHost(t, svc)
	ctx := t.Context()

	list, err := svc.List(ctx)
	if err != nil || len(list.Terminals) != 1 || list.Terminals[0].Agent != termapi.AgentCodex {
		t.Fatalf("list = %+v, %v", list, err)
	}
	res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "Reply with ECHO=hello-from-codex"})
	if err != nil {
		t.Fatalf("send: %v (%+v); screen:\n%s", err, res, rp.debug())
	}
	if res.SubmissionOutcome != termapi.OutcomeAccepted {
		t.Fatalf("send = %+v", res)
	}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	v, err := svc.Wait(wctx, res.TurnID)
	if err != nil {
		t.Fatalf("wait: %v; screen:\n%s", err, rp.debug())
	}
	if v.Status != termapi.TurnIdle || v.Result == nil || v.Result.Text != "hello-from-codex" {
		t.Fatalf("turn = %+v", v)
	}

	// The pane is managed now; a human typing in it between turns makes
	// the exact session refuse, and following the pane works.
	list, _ = svc.List(ctx)
	if row := list.Terminals[0]; row.ManagementState != "managed" || row.SessionID != res.SessionID {
		t.Fatalf("row after the turn = %+v", row)
	}
	waitCheckpoint(t, st, res.SessionID)
	if err := rp.tui.Submit(ctx, "ECHO=typed-by-a-human"); err != nil {
		t.Fatal(err)
	}
	waitIdleAfter(t, rp, "typed-by-a-human")
	_, err = svc.Send(ctx, termapi.SendRequest{SessionID: res.SessionID, Request: "ECHO=never-sent"})
	if err == nil || !strings.Contains(err.Error(), "someone typed") {
		t.Fatalf("session_exact after human input: %v", err)
	}
	res2, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "ECHO=second-turn"})
	if err != nil {
		t.Fatalf("follow-current: %v", err)
	}
	if v := waitTurnStatus(t, svc, res2.TurnID, 90*time.Second, termapi.TurnIdle); v.Result.Text != "second-turn" {
		t.Fatalf("second turn = %+v", v)
	}
}

func waitCheckpoint(t *testing.T, st store.Store, sessionID string) {
	t.Helper()
	if !poll.WithinEvery(10*time.Second, 50*time.Millisecond, func() bool {
		s, err := st.GetTermSession(t.Context(), sessionID)
		return err == nil && len(s.Binding.Checkpoint) > 0
	}) {
		t.Fatal("no checkpoint on the session")
	}
}

// waitIdleAfter waits until the pane shows text and is idle again.
func waitIdleAfter(t *testing.T, rp *realPane, text string) {
	t.Helper()
	if !poll.WithinEvery(60*time.Second, 200*time.Millisecond, func() bool {
		s := rp.screen()
		return strings.Count(s, text) >= 2 && rp.agent.Screen(s).Activity == "idle"
	}) {
		t.Fatalf("pane did not answer %q; screen:\n%s", text, rp.debug())
	}
}

func TestE2ECodexApproveCancelStallDeath(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.Codex, model)
	svc, _ := newRealService(t, rp)
	runHost(t, svc)
	ctx := t.Context()

	// A shell command that needs approval → approve → done.
	res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "TOOLCALL: ESCALATE touch approved.txt"})
	if err != nil {
		t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
	}
	v := waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnWaitingForOpenClaw)
	if v.Approval == nil || v.Approval.Kind != "run_command" || !strings.Contains(v.Approval.Command, "touch approved.txt") {
		t.Fatalf("approval = %+v; screen:\n%s", v.Approval, rp.debug())
	}
	if _, err := svc.Approve(ctx, res.TurnID, "not-the-fingerprint"); err == nil {
		t.Fatal("approve with a wrong fingerprint was accepted")
	}
	if _, err := svc.Approve(ctx, res.TurnID, v.Approval.Fingerprint); err != nil {
		t.Fatalf("approve: %v; screen:\n%s", err, rp.debug())
	}
	v = waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled)
	if v.Status != termapi.TurnIdle || !strings.HasPrefix(v.Result.Text, strings.TrimSpace(fakemodel.ToolResultPrefix)) {
		t.Fatalf("approved turn = %+v", v)
	}

	// Cancel a slow reply. (The TUI may still draw the last turn as
	// working for a moment after it wrote task_complete.)
	waitSendable(t, svc, rp)
	res, err = svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "tell a long story SLOW"})
	if err != nil {
		t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
	}
	if _, err := rp.tui.WaitFor(ctx, "streaming", func(s string) bool { return strings.Count(s, "FAKE-REPLY") >= 1 && strings.Contains(s, "tell a long") }); err != nil {
		t.Fatal(err)
	}
	if v, err := svc.Cancel(ctx, res.TurnID); err != nil || v.Status != termapi.TurnCancelled {
		t.Fatalf("cancel = %+v, %v", v, err)
	}
	if _, err := rp.tui.WaitFor(ctx, "idle after the interrupt", rp.tui.Idle); err != nil {
		t.Fatal(err)
	}

	// A slow reply past a short inactivity timeout → stalled → renew → done.
	waitSendable(t, svc, rp)
	res, err = svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "WAIT=3000 ECHO=late-reply", InactivityTimeout: time.Second})
	if err != nil {
		t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
	}
	v = waitTurnStatus(t, svc, res.TurnID, 30*time.Second, termapi.TurnStalled)
	if !strings.Contains(v.StalledReason, "no activity") {
		t.Fatalf("stalled = %+v", v)
	}
	if _, err := svc.Renew(ctx, res.TurnID, 5); err != nil {
		t.Fatal(err)
	}
	if v := waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnIdle); v.Result.Text != "late-reply" {
		t.Fatalf("renewed turn = %+v", v)
	}

	// The agent process killed mid-turn → stalled.
	waitSendable(t, svc, rp)
	res, err = svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "HANG"})
	if err != nil {
		t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
	}
	if err := syscall.Kill(rp.pane.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	v = waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnStalled, termapi.TurnIdle)
	if v.Status != termapi.TurnStalled || !strings.Contains(v.StalledReason, "exited") {
		t.Fatalf("turn after the agent died = %+v", v)
	}
}

// waitSendable waits until the pane offers a send.
func waitSendable(t *testing.T, svc *Service, rp *realPane) {
	t.Helper()
	var list termapi.ListResult
	var err error
	if !poll.WithinEvery(30*time.Second, 200*time.Millisecond, func() bool {
		list, err = svc.List(t.Context())
		return err == nil && len(list.Terminals) == 1 && len(list.Terminals[0].AvailableActions) > 0
	}) {
		t.Fatalf("pane not sendable: %+v %v; screen:\n%s", list, err, rp.debug())
	}
}

func TestE2EClaudeSendApproveDone(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.ClaudeCode, model, "--permission-mode", "default")
	svc, _ := newRealService(t, rp)
	runHost(t, svc)
	ctx := t.Context()

	res, err := svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "Reply with ECHO=hello-from-claude"})
	if err != nil {
		t.Fatalf("send: %v (%+v); screen:\n%s", err, res, rp.debug())
	}
	if v := waitTurnStatus(t, svc, res.TurnID, 90*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled); v.Status != termapi.TurnIdle || v.Result.Text != "hello-from-claude" {
		t.Fatalf("turn = %+v; screen:\n%s", v, rp.debug())
	}

	waitSendable(t, svc, rp)
	res, err = svc.Send(ctx, termapi.SendRequest{TerminalID: rp.pane.TerminalID, Request: "TOOLCALL: touch claude-approved.txt"})
	if err != nil {
		t.Fatalf("send: %v; screen:\n%s", err, rp.debug())
	}
	v := waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnWaitingForOpenClaw, termapi.TurnIdle)
	if v.Status != termapi.TurnWaitingForOpenClaw || v.Approval == nil || v.Approval.Command != "" {
		t.Fatalf("turn = %+v (a Claude approval carries no command); screen:\n%s", v, rp.debug())
	}
	if _, err := svc.Approve(ctx, res.TurnID, v.Approval.Fingerprint); err != nil {
		t.Fatalf("approve: %v; screen:\n%s", err, rp.debug())
	}
	v = waitTurnStatus(t, svc, res.TurnID, 60*time.Second, termapi.TurnIdle, termapi.TurnFailed, termapi.TurnStalled)
	if v.Status != termapi.TurnIdle || !strings.HasPrefix(v.Result.Text, strings.TrimSpace(fakemodel.ToolResultPrefix)) {
		t.Fatalf("approved turn = %+v; screen:\n%s", v, rp.debug())
	}
}
