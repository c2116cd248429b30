package claude_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/screen"
)

func TestGoldens(t *testing.T) {
	t.Parallel()
	checkGoldens(t, "testdata")
}

func readGolden(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// dialogRegion returns the permission dialog as the fingerprint covers it:
// from the rule above "Bash command" to the footer, trailing spaces
// trimmed.
func dialogRegion(t *testing.T, text string) []string {
	t.Helper()
	lines := strings.Split(text, "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	start, end := -1, -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "Bash command" {
			start = i - 1
		}
		if strings.HasPrefix(strings.TrimSpace(l), "Esc to cancel") {
			end = i + 1
		}
	}
	if start < 0 || end < 0 || !strings.HasPrefix(strings.TrimSpace(lines[start]), "───") {
		t.Fatalf("no permission dialog in\n%s", text)
	}
	return unmarkRows(lines[start:end])
}

var rowMark = regexp.MustCompile(`^(\s*)❯(\s*\d+\.)`)

// unmarkRows draws the highlighted row's marker of lines as a blank, as a
// fingerprint covers them.
func unmarkRows(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = rowMark.ReplaceAllString(l, "$1 $2")
	}
	return out
}

// setup copies a golden transcript to where Claude Code keeps it under a
// private config directory, with the permissions Claude Code gives it.
func setup(t *testing.T, dir, name string, m goldenManifest) (configDir, path string) {
	t.Helper()
	configDir = filepath.Join(t.TempDir(), ".claude")
	path = claude.TranscriptPath(configDir, m.Cwd, m.SessionID)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(readGolden(t, dir, name)), 0o600); err != nil {
		t.Fatal(err)
	}
	return configDir, path
}

// anchorAt builds the anchor a sender would have captured at offset (0:
// before the transcript existed).
func anchorAt(t *testing.T, path string, m goldenManifest, offset int64) claude.Anchor {
	t.Helper()
	a := claude.Anchor{SessionID: m.SessionID, Cwd: m.Cwd, PID: 1, StartedAtMs: 1, Path: path, Offset: offset,
		CapturedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	if offset > 0 {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		a.FileExisted, a.Dev, a.Ino = true, uint64(st.Dev), st.Ino
	}
	return a
}

var ignoreTimes = cmp.FilterPath(func(p cmp.Path) bool {
	n := p.Last().String()
	return n == ".CompletedAt" || n == ".EndOffset"
}, cmp.Ignore())

// checkGoldens checks the screen parser, the registry reader and the
// transcript scans against a recording of the real TUI (testdata/, or a
// fresh one from TestRecordRealTUI).
func checkGoldens(t *testing.T, dir string) {
	t.Helper()
	approval := readGolden(t, dir, "screen-approval.txt")
	screens := map[string]screen.Screen{
		"screen-idle.txt":            {Activity: screen.Idle},
		"screen-draft.txt":           {Activity: screen.Idle, Draft: "say hello WAIT=1500"},
		"screen-draft-paste.txt":     {Activity: screen.Idle, Draft: "[Pasted text #1 +40 lines]"},
		"screen-draft-multiline.txt": {Activity: screen.Idle, Draft: "first line of a pasted request\nsecond line ECHO=multi-ok"},
		"screen-working.txt":         {Activity: screen.Working},
		"screen-reply.txt":           {Activity: screen.Idle},
		"screen-approved.txt":        {Activity: screen.Idle},
		"screen-streaming.txt":       {Activity: screen.Working},
		"screen-interrupted.txt":     {Activity: screen.Idle},
		"screen-api-error.txt":       {Activity: screen.Idle},
		"screen-approval.txt": {Activity: screen.AwaitingApproval, Approval: &screen.Approval{
			Kind: screen.RunCommand, Profile: claude.ApprovalProfile, Fingerprint: screen.Fingerprint(dialogRegion(t, approval)),
			Approvable: true}},
	}
	for name, want := range screens {
		got := claude.ParseScreen(readGolden(t, dir, name))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseScreen(%s) (-want +got):\n%s", name, diff)
		}
	}

	if paste := readGolden(t, dir, "screen-draft-paste.txt"); !screen.DraftShows(claude.ParseScreen(paste).Draft, pastedRequest()) {
		t.Errorf("the paste placeholder does not show the pasted request")
	}
	if screen.DraftShows(claude.ParseScreen(readGolden(t, dir, "screen-draft-paste.txt")).Draft, pastedRequest()+"\nx") {
		t.Errorf("the paste placeholder shows a request of another size")
	}

	var m goldenManifest
	if err := json.Unmarshal([]byte(readGolden(t, dir, "manifest.json")), &m); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]string{
		"registry-idle.json":    {claude.StatusIdle, ""},
		"registry-busy.json":    {claude.StatusBusy, ""},
		"registry-waiting.json": {claude.StatusWaiting, "permission prompt"},
	} {
		s, err := claude.ParseLiveSession([]byte(readGolden(t, dir, name)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.SessionID != m.SessionID || s.Cwd != m.Cwd || s.Kind != claude.KindInteractive || s.Entrypoint != "cli" ||
			s.Version != "2.1.332" || s.StartedAtMs == 0 || s.Status != want[0] || s.WaitingFor != want[1] ||
			!strings.HasSuffix(s.Tmux, ".%0") {
			t.Errorf("%s: %+v", name, s)
		}
	}

	if len(m.Turns) != 6 {
		t.Fatalf("manifest has %d turns, want 6", len(m.Turns))
	}
	for i, turn := range m.Turns {
		_, path := setup(t, dir, turn.Transcript, m)
		a := anchorAt(t, path, m, int64(turn.Offset))
		acc, err := claude.ScanAcceptance(a, turn.Request)
		if err != nil {
			t.Fatalf("%s: ScanAcceptance: %v", turn.Name, err)
		}
		if !acc.Accepted || acc.TurnID == "" || acc.ThreadID != m.SessionID || acc.AcceptedAt.IsZero() {
			t.Fatalf("%s: acceptance %+v", turn.Name, acc)
		}
		if i > 0 {
			if got, err := claude.ScanAcceptance(a, m.Turns[i-1].Request); err != nil || got.Accepted {
				t.Errorf("%s: the previous request matched after the anchor: %+v %v", turn.Name, got, err)
			}
		}
		if ids, err := claude.PromptsAfter(a); err != nil || len(ids) != 1 || ids[0] != acc.TurnID {
			t.Errorf("%s: prompts after the anchor = %v, %v; want [%s]", turn.Name, ids, err, acc.TurnID)
		}
		c, err := claude.ScanCompletion(a, acc.TurnID)
		if err != nil {
			t.Fatalf("%s: ScanCompletion: %v", turn.Name, err)
		}
		var want native.Completion
		switch turn.Name {
		case "interrupted":
			want = native.Completion{State: native.Aborted, Code: native.CodeTurnAborted, TurnID: acc.TurnID, Reason: "interrupted"}
		case "api_error":
			want = native.Completion{State: native.Failed, Code: native.CodeAPIError, TurnID: acc.TurnID, Text: "API Error: 400 fakemodel: scripted failure FAIL=400"}
		default:
			want = native.Completion{State: native.Completed, Code: native.CodeCompletionFound, TurnID: acc.TurnID, Text: turn.Reply}
		}
		if diff := cmp.Diff(want, c, ignoreTimes); diff != "" {
			t.Errorf("%s: completion (-want +got):\n%s", turn.Name, diff)
		}
		if c.CompletedAt.Before(acc.AcceptedAt) {
			t.Errorf("%s: completed at %v before accepted at %v", turn.Name, c.CompletedAt, acc.AcceptedAt)
		}
		if ap, err := claude.PendingApproval(a, acc.TurnID); err != nil || ap != nil {
			t.Errorf("%s: pending approval after the turn ended = %+v, %v", turn.Name, ap, err)
		}
		checkJoinGolden(t, turn.Name, path, m, "", 0)
		if turn.Pending == "" {
			continue
		}
		_, pending := setup(t, dir, turn.Pending, m)
		pa := anchorAt(t, pending, m, int64(turn.Offset))
		checkJoinGolden(t, turn.Name+" (waiting for approval)", pending, m, acc.TurnID, int64(turn.Offset))
		if got, err := claude.ScanCompletion(pa, acc.TurnID); err != nil || got.State != native.Pending {
			t.Errorf("%s: completion while waiting for approval = %+v, %v; want pending", turn.Name, got, err)
		}
		ap, err := claude.PendingApproval(pa, acc.TurnID)
		if err != nil || ap == nil {
			t.Fatalf("%s: pending approval = %+v, %v", turn.Name, ap, err)
		}
		sum := sha256.Sum256([]byte("touch approved.txt"))
		if ap.CommandSHA256 != hex.EncodeToString(sum[:]) || ap.ToolUseID == "" || ap.Fingerprint == "" {
			t.Errorf("%s: pending approval %+v", turn.Name, ap)
		}
	}
}

// checkJoinGolden joins the task running at the end of a recorded
// transcript: the turn of promptUUID (which starts after offset and waits
// on a Bash approval), or, with promptUUID "", none, because the recorded
// turn has ended.
func checkJoinGolden(t *testing.T, name, path string, m goldenManifest, promptUUID string, offset int64) {
	t.Helper()
	configDir := filepath.Dir(filepath.Dir(filepath.Dir(path)))
	end, err := claude.CaptureEnd(configDir, claude.LiveSession{PID: 1, SessionID: m.SessionID, Cwd: m.Cwd, StartedAtMs: 1, Status: claude.StatusBusy}, time.Now())
	if err != nil {
		t.Fatalf("%s: CaptureEnd: %v", name, err)
	}
	a, uuid, err := claude.ActiveTaskAnchor(end)
	if promptUUID == "" {
		var se *native.ScanError
		if !errors.As(err, &se) || se.Code != native.CodeNotComplete {
			t.Errorf("%s: joined %s at %d (%v) after the recorded turn ended", name, uuid, a.Offset, err)
		}
		return
	}
	if err != nil || uuid != promptUUID || a.Offset < offset {
		t.Fatalf("%s: ActiveTaskAnchor = %s at %d, %v; want %s after %d", name, uuid, a.Offset, err, promptUUID, offset)
	}
	if ids, err := claude.PromptsAfter(a); err != nil || len(ids) != 1 || ids[0] != promptUUID {
		t.Errorf("%s: prompts after the joined anchor = %v, %v", name, ids, err)
	}
	if c, err := claude.ScanCompletion(a, promptUUID); err != nil || c.State != native.Pending {
		t.Errorf("%s: completion from the joined anchor = %+v, %v; want pending", name, c, err)
	}
	if ap, err := claude.PendingApproval(a, promptUUID); err != nil || ap == nil {
		t.Errorf("%s: the joined turn's pending approval = %+v, %v", name, ap, err)
	}
}
