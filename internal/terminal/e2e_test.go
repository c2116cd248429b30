package terminal

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal/tmux"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
)

// realPane is a real coding-agent TUI in a pane of a private tmux server.
type realPane struct {
	t      *testing.T
	socket string
	cli    *realcli.CLI
	terms  *TmuxTerminals
	agent  Agent
	pane   Pane
}

// startRealTUI starts kind's TUI against model in a private tmux server and
// waits until its pane is idle.
func startRealTUI(t *testing.T, kind realcli.Kind, model *fakemodel.Server) *realPane {
	t.Helper()
	cli := realcli.Require(t, kind, model)
	dir, err := os.MkdirTemp("", "cc-tmux-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	socket := filepath.Join(dir, "s")
	shell := "cd " + cli.WorkDir + " && exec " + cli.ShellCommand(cli.InteractiveArgs()...)
	out, err := exec.Command("tmux", "-S", socket, "-f", "/dev/null", "new-session", "-d", "-s", "work", "-x", "200", "-y", "50", shell).CombinedOutput()
	if err != nil {
		t.Fatalf("start tmux: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", socket, "kill-server").Run() })
	terms, err := NewTmuxTerminals(tmux.Options{Sockets: []string{socket}, NoDefaultServer: true})
	if err != nil {
		t.Fatal(err)
	}
	agent := DefaultAgents()[map[realcli.Kind]string{realcli.Codex: AgentCodex, realcli.ClaudeCode: AgentClaude}[kind]]
	rp := &realPane{t: t, socket: socket, cli: cli, terms: terms, agent: agent}
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		panes, err := terms.Discover(t.Context())
		if err == nil && len(panes) == 1 {
			rp.pane = panes[0]
			if text, err := terms.Capture(t.Context(), rp.pane); err == nil {
				last = text
				if s := agent.Screen(text); s.Activity == "idle" && s.ComposerEmpty {
					return rp
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the %s TUI did not become idle (panes %d, err %v); screen:\n%s", kind, len(panes), err, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (rp *realPane) screen() string {
	text, _ := rp.terms.Capture(context.Background(), rp.pane)
	return text
}

func newRealService(t *testing.T, rp *realPane) (*Service, store.TerminalStore) {
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return NewService(Options{Store: st, Terminals: rp.terms, Agents: DefaultAgents()}), st
}

func runHost(t *testing.T, svc *Service) *Host {
	h := NewHost(svc, HostOptions{Recheck: 2 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func waitTurnStatus(t *testing.T, svc *Service, id string, timeout time.Duration, want ...string) TurnView {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	for {
		v, err := svc.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if v.Status == w {
				return v
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("turn %s is %s, want %v: %+v", id, v.Status, want, v)
		case <-svc.changes():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func TestE2ECodexSendWaitExactReply(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	rp := startRealTUI(t, realcli.Codex, model)
	svc, st := newRealService(t, rp)
	runHost(t, svc)
	ctx := t.Context()

	list, err := svc.List(ctx)
	if err != nil || len(list.Terminals) != 1 || list.Terminals[0].Agent != AgentCodex {
		t.Fatalf("list = %+v, %v", list, err)
	}
	res, err := svc.Send(ctx, SendRequest{TerminalID: rp.pane.TerminalID, Request: "Reply with ECHO=hello-from-codex"})
	if err != nil {
		t.Fatalf("send: %v (%+v); screen:\n%s", err, res, rp.screen())
	}
	if res.SubmissionOutcome != OutcomeAccepted {
		t.Fatalf("send = %+v", res)
	}
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	v, err := svc.Wait(wctx, res.TurnID)
	if err != nil {
		t.Fatalf("wait: %v; screen:\n%s", err, rp.screen())
	}
	if v.Status != store.TurnIdle || v.Result == nil || v.Result.Text != "hello-from-codex" {
		t.Fatalf("turn = %+v", v)
	}

	// The pane is managed now; a human typing in it between turns makes
	// the exact session refuse, and following the pane works.
	list, _ = svc.List(ctx)
	if row := list.Terminals[0]; row.ManagementState != "managed" || row.SessionID != res.SessionID {
		t.Fatalf("row after the turn = %+v", row)
	}
	waitCheckpoint(t, st, res.SessionID)
	if err := exec.Command("tmux", "-S", rp.socket, "send-keys", "-t", "work", "-l", "ECHO=typed-by-a-human").Run(); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("tmux", "-S", rp.socket, "send-keys", "-t", "work", "C-m").Run(); err != nil {
		t.Fatal(err)
	}
	waitIdleAfter(t, rp, "typed-by-a-human")
	_, err = svc.Send(ctx, SendRequest{SessionID: res.SessionID, Request: "ECHO=never-sent"})
	if err == nil || !strings.Contains(err.Error(), "someone typed") {
		t.Fatalf("session_exact after human input: %v", err)
	}
	res2, err := svc.Send(ctx, SendRequest{TerminalID: rp.pane.TerminalID, Request: "ECHO=second-turn"})
	if err != nil {
		t.Fatalf("follow-current: %v", err)
	}
	if v := waitTurnStatus(t, svc, res2.TurnID, 90*time.Second, store.TurnIdle); v.Result.Text != "second-turn" {
		t.Fatalf("second turn = %+v", v)
	}
}

func waitCheckpoint(t *testing.T, st store.TerminalStore, sessionID string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := st.GetTermSession(t.Context(), sessionID)
		if err == nil && len(s.Binding.Checkpoint) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint on the session")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitIdleAfter waits until the pane shows text and is idle again.
func waitIdleAfter(t *testing.T, rp *realPane, text string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := rp.screen()
		if strings.Count(s, text) >= 2 && rp.agent.Screen(s).Activity == "idle" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pane did not answer %q; screen:\n%s", text, s)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
