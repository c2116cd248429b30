package codex_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/request"
	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
)

var update = flag.Bool("update", false, "record testdata/ again from the real Codex TUI (needs CLAWCONNECT_E2E=1)")

// goldenTurn is one recorded turn: what was sent, where the rollout ended
// before it was sent, and what the fake model answered.
type goldenTurn struct {
	Name    string `json:"name"`
	Request string `json:"request"`
	// Offset is the sanitized rollout's length before the request was sent
	// (0 before the first prompt: the rollout did not exist).
	Offset int `json:"anchor_offset"`
	// Rollout is the rollout recorded after the turn ended.
	Rollout string `json:"rollout"`
	// Reply is the fake model's final reply text ("" when interrupted).
	Reply string `json:"reply,omitempty"`
	// Pending is the rollout recorded while the turn waited for approval.
	Pending string `json:"pending_rollout,omitempty"`
}

type goldenManifest struct {
	Cwd   string       `json:"cwd"`
	Turns []goldenTurn `json:"turns"`
}

const goldenCwd = "/tmp/codex-golden/work"

// TestRecordRealTUI drives the real Codex TUI through a plain reply, an
// approval and an interrupted turn, records the screens and the rollout at
// each step, and checks the parsers on what it recorded. With -update the
// recording replaces testdata/.
func TestRecordRealTUI(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{})
	dir := t.TempDir()
	if *update {
		dir = "testdata"
		if err := (&realtui.Golden{Dir: dir}).Clear(filepath.Base(questionDir), "fuzz"); err != nil {
			t.Fatal(err)
		}
	}
	base := filepath.Dir(tui.CLI.WorkDir)
	g := &realtui.Golden{Dir: dir, Replace: [][2]string{{base, filepath.Dir(goldenCwd)}}}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	screen := func(name, s string) {
		t.Helper()
		if err := g.Write("screen-"+name+".txt", []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	idle, err := tui.WaitReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	screen("idle", idle)
	idleANSI, err := tui.CaptureANSI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Write("screen-idle.ansi", []byte(idleANSI)); err != nil {
		t.Fatal(err)
	}

	rollout := func() string {
		t.Helper()
		files, err := tui.SessionFiles()
		if err != nil || len(files) != 1 {
			t.Fatalf("rollouts %v (%v), want exactly one", files, err)
		}
		return files[0]
	}
	size := func() int {
		files, _ := tui.SessionFiles()
		if len(files) == 0 {
			return 0
		}
		data, _ := os.ReadFile(files[0])
		return len(g.Sanitize(string(data)))
	}
	m := goldenManifest{Cwd: goldenCwd}

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
	draftANSI, err := tui.CaptureANSI(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Write("screen-draft.ansi", []byte(draftANSI)); err != nil {
		t.Fatal(err)
	}
	turn := goldenTurn{Name: "reply", Request: req, Offset: size(), Rollout: "rollout-reply.jsonl"}
	live := newLive(t, tui)
	if inv := live.inventory(); inv.Status != codex.VerifiedAbsent {
		t.Fatalf("inventory before the first prompt = %+v, want verified_absent", inv)
	}
	anchor := codex.VirginAnchor(time.Now())
	if err := tui.Keys(ctx, "Enter"); err != nil {
		t.Fatal(err)
	}
	working, err := tui.WaitFor(ctx, "the working screen", func(s string) bool { return strings.Contains(s, "esc to interrupt") })
	if err != nil {
		t.Fatal(err)
	}
	screen("working", working)
	reply, err := tui.WaitStable(ctx, "the reply", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, fakemodel.DefaultPrefix+req) && tui.Idle(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	screen("reply", reply)
	turn.Reply = fakemodel.DefaultPrefix + req
	waitRecord(ctx, t, rollout, `"task_complete"`, 1)
	inv := live.inventory()
	if inv.Status != codex.Resolved || len(inv.Roots) != 1 || inv.Roots[0].Path != rollout() {
		t.Fatalf("inventory after the first prompt = %+v, want the one rollout %s", inv, rollout())
	}
	if anchor, err = anchor.Bind(inv.Roots[0]); err != nil {
		t.Fatal(err)
	}
	live.check(anchor, req, fakemodel.DefaultPrefix+req)
	if _, err := g.CopyFile(turn.Rollout, rollout()); err != nil {
		t.Fatal(err)
	}
	m.Turns = append(m.Turns, turn)

	// 2. A command that needs approval, approved with its shortcut.
	req = "TOOLCALL: ESCALATE touch approved.txt"
	turn = goldenTurn{Name: "approval", Request: req, Offset: size(), Rollout: "rollout-approval.jsonl", Pending: "rollout-approval-pending.jsonl"}
	anchor = live.anchor()
	if err := tui.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	prompt, err := tui.WaitStable(ctx, "the approval prompt", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "Would you like to run the following command?") && strings.Contains(s, "esc to cancel")
	})
	if err != nil {
		t.Fatal(err)
	}
	screen("approval", prompt)
	if _, err := g.CopyFile(turn.Pending, rollout()); err != nil {
		t.Fatal(err)
	}
	if err := tui.Keys(ctx, codex.ApproveKey); err != nil {
		t.Fatal(err)
	}
	done, err := tui.WaitStable(ctx, "the tool result reply", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, strings.TrimSpace(fakemodel.ToolResultPrefix)) && tui.Idle(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	screen("approved", done)
	waitRecord(ctx, t, rollout, `"task_complete"`, 2)
	if _, err := g.CopyFile(turn.Rollout, rollout()); err != nil {
		t.Fatal(err)
	}
	for _, r := range model.Requests() {
		if r.IsToolResult {
			turn.Reply = r.Reply
		}
	}
	live.check(anchor, req, turn.Reply)
	m.Turns = append(m.Turns, turn)

	// 3. A slow reply interrupted with Esc.
	req = "tell a long story SLOW"
	turn = goldenTurn{Name: "interrupted", Request: req, Offset: size(), Rollout: "rollout-interrupted.jsonl"}
	anchor = live.anchor()
	if err := tui.Submit(ctx, req); err != nil {
		t.Fatal(err)
	}
	if _, err := tui.WaitFor(ctx, "streaming text", func(s string) bool {
		return strings.Contains(s, "FAKE-REPLY") && strings.Contains(s, "tell a long") && strings.Count(s, "FAKE-REPLY") >= 2
	}); err != nil {
		t.Fatal(err)
	}
	streaming, _ := tui.Capture(ctx)
	screen("streaming", streaming)
	if err := tui.Keys(ctx, codex.InterruptKey); err != nil {
		t.Fatal(err)
	}
	interrupted, err := tui.WaitStable(ctx, "the interrupted screen", 300*time.Millisecond, func(s string) bool {
		return strings.Contains(s, "interrupted") && tui.Idle(s)
	})
	if err != nil {
		t.Fatal(err)
	}
	screen("interrupted", interrupted)
	waitRecord(ctx, t, rollout, `"turn_aborted"`, 1)
	if _, err := g.CopyFile(turn.Rollout, rollout()); err != nil {
		t.Fatal(err)
	}
	live.check(anchor, req, "")
	m.Turns = append(m.Turns, turn)

	// 4. A multi-line request, pasted, then Enter once the draft shows. It
	// starts with blanks, which Codex drops from what it records: the
	// prepared payload (trimmed) must still match.
	req = "  first line of a pasted request\nsecond line ECHO=multi-ok"
	turn = goldenTurn{Name: "multiline", Request: req, Offset: size(), Rollout: "rollout-multiline.jsonl", Reply: "multi-ok"}
	anchor = live.anchor()
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
		return strings.Contains(s, "• multi-ok") && tui.Idle(s)
	}); err != nil {
		t.Fatal(err)
	}
	waitRecord(ctx, t, rollout, `"task_complete"`, 3)
	if _, err := g.CopyFile(turn.Rollout, rollout()); err != nil {
		t.Fatal(err)
	}
	live.check(anchor, req, "multi-ok")
	m.Turns = append(m.Turns, turn)

	// 5. A large paste (40 lines with tabs): the agents draw a placeholder
	// in the composer and record the text their own way.
	req = pastedRequest()
	turn = goldenTurn{Name: "paste", Request: req, Offset: size(), Rollout: "rollout-paste.jsonl", Reply: "paste-ok"}
	anchor = live.anchor()
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
		return strings.Contains(s, "• paste-ok") && tui.Idle(s)
	}); err != nil {
		t.Fatal(err)
	}
	waitRecord(ctx, t, rollout, `"task_complete"`, 4)
	if _, err := g.CopyFile(turn.Rollout, rollout()); err != nil {
		t.Fatal(err)
	}
	live.check(anchor, req, "paste-ok")
	m.Turns = append(m.Turns, turn)

	data, _ := json.MarshalIndent(m, "", "  ")
	if err := g.Write("manifest.json", append(data, '\n')); err != nil {
		t.Fatal(err)
	}
	checkGoldens(t, dir)
}

// live checks the readers on the real, running TUI's process and rollout.
type live struct {
	t   *testing.T
	tui *realtui.TUI
	pid int
}

func newLive(t *testing.T, tui *realtui.TUI) *live {
	t.Helper()
	pid, err := tui.AgentPID()
	if err != nil {
		t.Fatal(err)
	}
	return &live{t: t, tui: tui, pid: pid}
}

// inventory takes the open-root inventory of the real codex process.
func (l *live) inventory() codex.Inventory {
	l.t.Helper()
	files, err := realtui.OpenFiles(l.pid)
	if err != nil {
		l.t.Fatal(err)
	}
	cwd, err := realtui.Cwd(l.pid)
	if err != nil {
		l.t.Fatal(err)
	}
	in := codex.InventoryInput{CodexHome: l.tui.CodexHome(), Cwd: cwd}
	for _, f := range files {
		in.OpenFiles = append(in.OpenFiles, codex.OpenFile{FD: f.FD, Path: f.Path, Dev: f.Dev, Ino: f.Ino})
	}
	inv, err := codex.TakeInventory(in)
	if err != nil {
		l.t.Fatal(err)
	}
	return inv
}

// anchor captures an anchor at the end of the real rollout and checks it
// against the file's size.
func (l *live) anchor() codex.Anchor {
	l.t.Helper()
	inv := l.inventory()
	if inv.Status != codex.Resolved {
		l.t.Fatalf("inventory %+v, want resolved", inv)
	}
	a, err := codex.CaptureAnchor(inv.Roots[0], time.Now())
	if err != nil {
		l.t.Fatal(err)
	}
	st, err := os.Stat(a.Path)
	if err != nil || st.Size() != a.Offset || st.Mode().Perm()&0o022 != 0 {
		l.t.Fatalf("anchor offset %d, file %v (%v)", a.Offset, st, err)
	}
	return a
}

// check scans the real rollout from the anchor: the request is accepted
// and its turn ended with reply ("" = aborted).
func (l *live) check(a codex.Anchor, req, reply string) {
	l.t.Helper()
	p, err := request.Prepare(req)
	if err != nil {
		l.t.Fatal(err)
	}
	acc, err := codex.ScanAcceptance(a, p.Hash)
	if err != nil || !acc.Accepted {
		l.t.Fatalf("live acceptance of %q = %+v, %v", req, acc, err)
	}
	c, err := codex.ScanCompletion(a, acc.TurnID)
	if err != nil {
		l.t.Fatalf("live completion of %q: %v", req, err)
	}
	if reply == "" && c.State != native.Aborted || reply != "" && (c.State != native.Completed || c.Text != reply) {
		l.t.Fatalf("live completion of %q = %+v, want reply %q", req, c, reply)
	}
}

// waitRecord waits until the rollout holds n lines containing marker.
func waitRecord(ctx context.Context, t *testing.T, path func() string, marker string, n int) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		data, _ := os.ReadFile(path())
		if strings.Count(string(data), marker) >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rollout never held %d %s records:\n%s", n, marker, data)
		case <-tick.C:
		}
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
