package codex_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/request"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

func TestGoldens(t *testing.T) {
	t.Parallel()
	checkGoldens(t, "testdata")
}

var rowMark = regexp.MustCompile(`^(\s*)›(\s*\d+\.)`)

func readGolden(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// promptRegion returns the lines of an approval prompt as the fingerprint
// covers them: marker to footer, trailing spaces trimmed, the highlighted
// option's marker drawn as a blank.
func promptRegion(t *testing.T, text, marker, footer string) []string {
	t.Helper()
	var out []string
	in := false
	for _, l := range strings.Split(text, "\n") {
		l = rowMark.ReplaceAllString(strings.TrimRight(l, " "), "$1 $2")
		if strings.TrimSpace(l) == marker {
			in, out = true, nil
		}
		if in {
			out = append(out, l)
			if strings.TrimSpace(l) == footer {
				return out
			}
		}
	}
	t.Fatalf("no prompt region %q … %q in\n%s", marker, footer, text)
	return nil
}

// checkGoldens checks the screen parser and the rollout scans against a
// recording of the real TUI (testdata/, or a fresh one from
// TestRecordRealTUI).
func checkGoldens(t *testing.T, dir string) {
	t.Helper()
	approval := readGolden(t, dir, "screen-approval.txt")
	region := promptRegion(t, approval, "Would you like to run the following command?", "Press enter to confirm or esc to cancel")
	screens := map[string]screen.Screen{
		"screen-idle.txt":            {Activity: screen.Idle},
		"screen-idle.ansi":           {Activity: screen.Idle},
		"screen-draft.txt":           {Activity: screen.Idle, Draft: "say hello WAIT=1500"},
		"screen-draft.ansi":          {Activity: screen.Idle, Draft: "say hello WAIT=1500"},
		"screen-draft-paste.txt":     {Activity: screen.Idle, Draft: "[Pasted Content 1373 chars]"},
		"screen-draft-multiline.txt": {Activity: screen.Idle, Draft: "first line of a pasted request\nsecond line ECHO=multi-ok"},
		"screen-working.txt":         {Activity: screen.Working},
		"screen-reply.txt":           {Activity: screen.Idle},
		"screen-approved.txt":        {Activity: screen.Idle},
		"screen-streaming.txt":       {Activity: screen.Working},
		"screen-interrupted.txt":     {Activity: screen.Idle},
		"screen-approval.txt": {Activity: screen.AwaitingApproval, Approval: &screen.Approval{
			Kind: screen.RunCommand, Profile: codex.ApprovalProfile, Fingerprint: screen.Fingerprint(region),
			Command: "touch approved.txt", Approvable: true}},
	}
	for name, want := range screens {
		got := codex.ParseScreen(readGolden(t, dir, name))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseScreen(%s) (-want +got):\n%s", name, diff)
		}
	}

	if paste := readGolden(t, dir, "screen-draft-paste.txt"); !screen.DraftShows(codex.ParseScreen(paste).Draft, pastedRequest()) {
		t.Errorf("the paste placeholder does not show the pasted request")
	}
	if screen.DraftShows(codex.ParseScreen(readGolden(t, dir, "screen-draft-paste.txt")).Draft, pastedRequest()+"\nx") {
		t.Errorf("the paste placeholder shows a request of another size")
	}

	var m goldenManifest
	if err := json.Unmarshal([]byte(readGolden(t, dir, "manifest.json")), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Turns) != 5 {
		t.Fatalf("manifest has %d turns, want 5", len(m.Turns))
	}
	var turnIDs []string
	for i, turn := range m.Turns {
		path := copyRollout(t, dir, turn.Rollout)
		meta, err := codex.ReadSessionMeta(path)
		if err != nil {
			t.Fatal(err)
		}
		if meta.Cwd != m.Cwd || meta.Originator != codex.OriginatorTUI || meta.Source != codex.SourceCLI || meta.Subagent || meta.CLIVersion != "0.171.0" {
			t.Errorf("%s: session_meta %+v", turn.Rollout, meta)
		}
		a := anchorAt(t, path, meta.ID, int64(turn.Offset))
		p, err := request.Prepare(turn.Request)
		if err != nil {
			t.Fatal(err)
		}
		acc, err := codex.ScanAcceptance(a, p.Hash)
		if err != nil {
			t.Fatalf("%s: ScanAcceptance: %v", turn.Name, err)
		}
		if !acc.Accepted || acc.TurnID == "" || acc.ThreadID != meta.ID {
			t.Fatalf("%s: acceptance %+v", turn.Name, acc)
		}
		for _, prev := range turnIDs {
			if prev == acc.TurnID {
				t.Errorf("%s: turn id %s was already accepted by an earlier turn", turn.Name, prev)
			}
		}
		turnIDs = append(turnIDs, acc.TurnID)
		if ids, err := codex.TurnsStartedAfter(a); err != nil || len(ids) != 1 || ids[0] != acc.TurnID {
			t.Errorf("%s: turns started after the anchor = %v, %v; want [%s]", turn.Name, ids, err, acc.TurnID)
		}
		c, err := codex.ScanCompletion(a, acc.TurnID)
		if err != nil {
			t.Fatalf("%s: ScanCompletion: %v", turn.Name, err)
		}
		want := native.Completion{State: native.Completed, Code: native.CodeCompletionFound, TurnID: acc.TurnID, Text: turn.Reply}
		if turn.Name == "interrupted" {
			want = native.Completion{State: native.Aborted, Code: native.CodeTurnAborted, TurnID: acc.TurnID, Reason: "interrupted"}
		}
		if diff := cmp.Diff(want, c, cmpIgnoreTimes); diff != "" {
			t.Errorf("%s: completion (-want +got):\n%s", turn.Name, diff)
		}
		if c.CompletedAt.Before(acc.AcceptedAt) {
			t.Errorf("%s: completed at %v before accepted at %v", turn.Name, c.CompletedAt, acc.AcceptedAt)
		}
		// The previous turn's request is not accepted again after this anchor.
		if i > 0 {
			prev, _ := request.Prepare(m.Turns[i-1].Request)
			if got, err := codex.ScanAcceptance(a, prev.Hash); err != nil || got.Accepted {
				t.Errorf("%s: the previous request matched after the anchor: %+v %v", turn.Name, got, err)
			}
		}
		if turn.Pending != "" {
			pending := copyRollout(t, dir, turn.Pending)
			pa := anchorAt(t, pending, meta.ID, int64(turn.Offset))
			if got, err := codex.ScanAcceptance(pa, p.Hash); err != nil || got.TurnID != acc.TurnID {
				t.Errorf("%s: acceptance while waiting for approval = %+v, %v", turn.Name, got, err)
			}
			got, err := codex.ScanCompletion(pa, acc.TurnID)
			if err != nil || got.State != native.Pending || got.Code != native.CodeNotComplete {
				t.Errorf("%s: completion while waiting for approval = %+v, %v; want pending", turn.Name, got, err)
			}
		}
	}
}

var cmpIgnoreTimes = cmp.FilterPath(func(p cmp.Path) bool {
	n := p.Last().String()
	return n == ".CompletedAt" || n == ".EndOffset"
}, cmp.Ignore())

// copyRollout copies a golden rollout into a private directory with the
// permissions Codex gives it (0600), under the name it had.
func copyRollout(t *testing.T, dir, name string) string {
	t.Helper()
	data := readGolden(t, dir, name)
	var meta struct {
		Payload struct {
			ID string `json:"id"`
		} `json:"payload"`
	}
	first, _, _ := strings.Cut(data, "\n")
	if err := json.Unmarshal([]byte(first), &meta); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sessions", "2026", "12", "01", "rollout-2026-12-01T15-04-08-"+meta.Payload.ID+".jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// anchorAt builds the anchor a sender would have captured at offset.
func anchorAt(t *testing.T, path, thread string, offset int64) codex.Anchor {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	mode := codex.Existing
	if offset == 0 {
		mode = codex.PreMaterialization
	}
	return codex.Anchor{Mode: mode, ThreadID: thread, Path: path, Dev: uint64(st.Dev), Ino: st.Ino, Offset: offset,
		FileExisted: offset > 0, CapturedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
}

// unmarkRows draws the highlighted row's marker of lines as a blank, as a
// fingerprint covers them.
func unmarkRows(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = rowMark.ReplaceAllString(l, "$1 $2")
	}
	return out
}
