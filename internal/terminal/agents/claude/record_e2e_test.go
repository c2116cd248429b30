package claude_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
)

var update = flag.Bool("update", false, "record testdata/ again from the real Claude Code TUI (needs CLAWCONNECT_E2E=1)")

// goldenTurn is one recorded turn: what was sent, where the transcript
// ended before it was sent, and what the fake model answered.
type goldenTurn struct {
	Name    string `json:"name"`
	Request string `json:"request"`
	// Offset is the sanitized transcript's length before the request was
	// sent (0 before the first prompt: the transcript did not exist).
	Offset int `json:"anchor_offset"`
	// Transcript is the transcript recorded after the turn ended.
	Transcript string `json:"transcript"`
	// Reply is the fake model's final reply text.
	Reply string `json:"reply,omitempty"`
	// Pending is the transcript recorded while the turn waited for
	// approval.
	Pending string `json:"pending_transcript,omitempty"`
}

type goldenManifest struct {
	Cwd       string       `json:"cwd"`
	SessionID string       `json:"session_id"`
	Turns     []goldenTurn `json:"turns"`
}

const goldenBase = "/tmp/claude-golden"

// TestRecordRealTUI drives the real Claude Code TUI (default permission
// mode, so Bash asks) through a plain reply, an approved Bash call, an
// interrupted turn and an API error, records screens, the live-session
// registry file and the transcript at each step, and checks the parsers on
// the recording. With -update the recording replaces testdata/.
func TestRecordRealTUI(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.ClaudeCode, model, realtui.Options{Args: []string{"--permission-mode", "default"}})
	dir := t.TempDir()
	if *update {
		dir = "testdata"
		if err := (&realtui.Golden{Dir: dir}).Clear(filepath.Base(questionDir), "fuzz"); err != nil {
			t.Fatal(err)
		}
	}
	base := filepath.Dir(tui.CLI.WorkDir)
	g := &realtui.Golden{Dir: dir, Replace: [][2]string{
		{base, goldenBase},
		{claude.ProjectDirName(base), claude.ProjectDirName(goldenBase)},
	}}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	screen := func(name, s string) {
		t.Helper()
		if err := g.Write("screen-"+name+".txt", []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	pid, err := tui.AgentPID()
	if err != nil {
		t.Fatal(err)
	}
	registry := func(name string) claude.LiveSession {
		t.Helper()
		path := claude.RegistryPath(tui.ClaudeConfigDir(), pid)
		if _, err := g.CopyFile("registry-"+name+".json", path); err != nil {
			t.Fatal(err)
		}
		s, err := claude.ReadLiveSession(tui.ClaudeConfigDir(), pid)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	idle, err := tui.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	screen("idle", idle)
	live := registry("idle")
	transcript := claude.TranscriptPath(tui.ClaudeConfigDir(), live.Cwd, live.SessionID)
	size := func() int {
		data, _ := os.ReadFile(transcript)
		return len(g.Sanitize(string(data)))
	}
	m := goldenManifest{Cwd: g.Sanitize(live.Cwd), SessionID: live.SessionID}
	waitStatus := func(status string) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			s, err := claude.ReadLiveSession(tui.ClaudeConfigDir(), pid)
			if err == nil && s.Status == status {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("registry status never became %q (last %+v, %v)", status, s, err)
			case <-tick.C:
			}
		}
	}
	waitTranscript := func(marker string, n int) {
		t.Helper()
		waitFile(ctx, t, transcript, marker, n)
	}

	// 1. A plain reply, slow to start so that the working screen shows.
	req := "say hello WAIT=1500"
	if err := tui.Type(ctx, req); err != nil {
		t.Fatal(err)
	}
	draft, err := tui.WaitStable(ctx, "the draft", 200*time.Millisecond, func(s string) bool { return strings.Contains(s, req) })
	if err != nil {
		t.Fatal(err)
	}
	screen("draft", draft)
	turn := goldenTurn{Name: "reply", Request: req, Offset: size(), Transcript: "transcript-reply.jsonl"}
	anchor := liveAnchor(t, tui.ClaudeConfigDir(), pid)
	if anchor.FileExisted {
		t.Fatalf("anchor before the first prompt %+v: the transcript already exists", anchor)
	}
	if err := tui.Keys(ctx, "Enter"); err != nil {
		t.Fatal(err)
	}
	working, err := tui.WaitFor(ctx, "the working screen", func(s string) bool { return strings.Contains(s, "esc to interrupt") })
	if err != nil {
		t.Fatal(err)
	}
	screen("working", working)
	waitStatus(claude.StatusBusy)
	registry("busy")
	reply, err := tui.WaitStable(ctx, "the reply", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, fakemodel.DefaultPrefix+req) && tui.Idle(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	screen("reply", reply)
	turn.Reply = fakemodel.DefaultPrefix + req
	waitTranscript(`"turn_duration"`, 1)
	waitStatus(claude.StatusIdle)
	if _, err := g.CopyFile(turn.Transcript, transcript); err != nil {
		t.Fatal(err)
	}
	if anchor, err = anchor.Materialize(); err != nil {
		t.Fatal(err)
	}
	liveCheck(t, anchor, req, native.Completed, turn.Reply)
	m.Turns = append(m.Turns, turn)

	// 2. A Bash command that needs permission, approved with Enter.
	req = "TOOLCALL: touch approved.txt"
	turn = goldenTurn{Name: "approval", Request: req, Offset: size(), Transcript: "transcript-approval.jsonl", Pending: "transcript-approval-pending.jsonl"}
	anchor = liveAnchor(t, tui.ClaudeConfigDir(), pid)
	if err := tui.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	prompt, err := tui.WaitStable(ctx, "the permission dialog", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "Do you want to proceed?") && strings.Contains(s, "Esc to cancel")
	})
	if err != nil {
		t.Fatal(err)
	}
	screen("approval", prompt)
	waitStatus(claude.StatusWaiting)
	registry("waiting")
	if _, err := g.CopyFile(turn.Pending, transcript); err != nil {
		t.Fatal(err)
	}
	if acc, err := claude.ScanAcceptance(anchor, req); err != nil || !acc.Accepted {
		t.Fatalf("live acceptance while waiting = %+v, %v", acc, err)
	} else if ap, err := claude.PendingApproval(anchor, acc.TurnID); err != nil || ap == nil {
		t.Fatalf("live pending approval = %+v, %v", ap, err)
	}
	if err := tui.Keys(ctx, claude.ApproveKey); err != nil {
		t.Fatal(err)
	}
	done, err := tui.WaitStable(ctx, "the tool result reply", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, strings.TrimSpace(fakemodel.ToolResultPrefix)) && tui.Idle(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	screen("approved", done)
	waitTranscript(`"turn_duration"`, 2)
	waitStatus(claude.StatusIdle)
	if _, err := g.CopyFile(turn.Transcript, transcript); err != nil {
		t.Fatal(err)
	}
	for _, r := range model.Requests() {
		if r.IsToolResult {
			turn.Reply = r.Reply
		}
	}
	liveCheck(t, anchor, req, native.Completed, turn.Reply)
	m.Turns = append(m.Turns, turn)

	// 3. A slow reply interrupted with Esc.
	req = "tell a long story SLOW"
	turn = goldenTurn{Name: "interrupted", Request: req, Offset: size(), Transcript: "transcript-interrupted.jsonl"}
	anchor = liveAnchor(t, tui.ClaudeConfigDir(), pid)
	if err := tui.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	model.MustWaitRequest(t, 30*time.Second, func(r fakemodel.Request) bool { return r.Prompt == req }) // arrived, still streaming
	streaming, err := tui.WaitFor(ctx, "the working screen", func(s string) bool { return strings.Contains(s, "esc to interrupt") })
	if err != nil {
		t.Fatal(err)
	}
	screen("streaming", streaming)
	if err := tui.Keys(ctx, claude.InterruptKey); err != nil {
		t.Fatal(err)
	}
	interrupted, err := tui.WaitStable(ctx, "the interrupted screen", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "Interrupted") && tui.Idle(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	screen("interrupted", interrupted)
	waitTranscript("[Request interrupted by user", 1)
	waitStatus(claude.StatusIdle)
	if _, err := g.CopyFile(turn.Transcript, transcript); err != nil {
		t.Fatal(err)
	}
	liveCheck(t, anchor, req, native.Aborted, "")
	m.Turns = append(m.Turns, turn)

	// 4. The model call fails: an API error ends the turn.
	req = "this one fails FAIL400"
	turn = goldenTurn{Name: "api_error", Request: req, Offset: size(), Transcript: "transcript-api-error.jsonl"}
	anchor = liveAnchor(t, tui.ClaudeConfigDir(), pid)
	if err := tui.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	waitTranscript(`"isApiErrorMessage":true`, 1)
	failed, err := tui.WaitStable(ctx, "the API error", 300*time.Millisecond, tui.Idle)
	if err != nil {
		t.Fatal(err)
	}
	screen("api-error", failed)
	waitStatus(claude.StatusIdle)
	if _, err := g.CopyFile(turn.Transcript, transcript); err != nil {
		t.Fatal(err)
	}
	liveCheck(t, anchor, req, native.Failed, "API Error: 400 fakemodel: scripted failure FAIL=400")
	m.Turns = append(m.Turns, turn)

	// 5. A multi-line request, pasted, then Enter once the draft shows.
	req = "first line of a pasted request\nsecond line ECHO=multi-ok"
	turn = goldenTurn{Name: "multiline", Request: req, Offset: size(), Transcript: "transcript-multiline.jsonl", Reply: "multi-ok"}
	anchor = liveAnchor(t, tui.ClaudeConfigDir(), pid)
	if err := tui.Type(ctx, req); err != nil {
		t.Fatal(err)
	}
	multi, err := tui.WaitStable(ctx, "the multi-line draft", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "second line ECHO=multi-ok") || strings.Contains(s, "[Pasted")
	})
	if err != nil {
		t.Fatal(err)
	}
	screen("draft-multiline", multi)
	if err := tui.Keys(ctx, "Enter"); err != nil {
		t.Fatal(err)
	}
	if _, err := tui.WaitStable(ctx, "the multi-line reply", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "● multi-ok") && tui.Idle(s)
	}); err != nil {
		t.Fatal(err)
	}
	waitTranscript(`"turn_duration"`, 3)
	waitStatus(claude.StatusIdle)
	if _, err := g.CopyFile(turn.Transcript, transcript); err != nil {
		t.Fatal(err)
	}
	liveCheck(t, anchor, req, native.Completed, "multi-ok")
	m.Turns = append(m.Turns, turn)

	// 6. A large paste (40 lines with tabs): the agents draw a placeholder
	// in the composer and record the text their own way.
	req = pastedRequest()
	turn = goldenTurn{Name: "paste", Request: req, Offset: size(), Transcript: "transcript-paste.jsonl", Reply: "paste-ok"}
	anchor = liveAnchor(t, tui.ClaudeConfigDir(), pid)
	if err := tui.Type(ctx, req); err != nil {
		t.Fatal(err)
	}
	paste, err := tui.WaitStable(ctx, "the paste placeholder", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "[Pasted")
	})
	if err != nil {
		t.Fatal(err)
	}
	screen("draft-paste", paste)
	if err := tui.Keys(ctx, "Enter"); err != nil {
		t.Fatal(err)
	}
	if _, err := tui.WaitStable(ctx, "the paste reply", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "● paste-ok") && tui.Idle(s)
	}); err != nil {
		t.Fatal(err)
	}
	waitTranscript(`"turn_duration"`, 4)
	waitStatus(claude.StatusIdle)
	if _, err := g.CopyFile(turn.Transcript, transcript); err != nil {
		t.Fatal(err)
	}
	liveCheck(t, anchor, req, native.Completed, "paste-ok")
	m.Turns = append(m.Turns, turn)

	if err := g.Write("pid", []byte(strconv.Itoa(pid)+"\n")); err != nil {
		t.Fatal(err)
	}
	data, _ := json.MarshalIndent(m, "", "  ")
	if err := g.Write("manifest.json", append(data, '\n')); err != nil {
		t.Fatal(err)
	}
	checkGoldens(t, dir)
}

// liveAnchor captures an anchor on the real, idle session and checks it
// against the transcript's size and permissions.
func liveAnchor(t *testing.T, configDir string, pid int) claude.Anchor {
	t.Helper()
	s, err := claude.ReadLiveSession(configDir, pid)
	if err != nil {
		t.Fatal(err)
	}
	a, err := claude.CaptureAnchor(configDir, s, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(a.Path); err == nil && (st.Size() != a.Offset || st.Mode().Perm()&0o077 != 0) {
		t.Fatalf("anchor offset %d, transcript size %d mode %v", a.Offset, st.Size(), st.Mode())
	}
	return a
}

// liveCheck scans the real transcript from the anchor: the request is
// accepted and its turn ended in state with text.
func liveCheck(t *testing.T, a claude.Anchor, req string, state native.CompletionState, text string) {
	t.Helper()
	acc, err := claude.ScanAcceptance(a, req)
	if err != nil || !acc.Accepted {
		t.Fatalf("live acceptance of %q = %+v, %v", req, acc, err)
	}
	c, err := claude.ScanCompletion(a, acc.TurnID)
	if err != nil || c.State != state || c.Text != text {
		t.Fatalf("live completion of %q = %+v, %v; want %s %q", req, c, err, state, text)
	}
}

// pastedRequest is a request large enough for the TUI to show it as a
// paste placeholder: 40 lines with tabs.
func pastedRequest() string {
	var b strings.Builder
	for i := range 40 {
		fmt.Fprintf(&b, "line %02d\tof a large pasted request\n", i)
	}
	b.WriteString("ECHO=paste-ok")
	return b.String()
}
