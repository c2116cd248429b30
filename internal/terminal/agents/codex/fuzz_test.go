package codex_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/request"
)

// FuzzScanRollout scans arbitrary bytes after an anchor and checks that
// the scans either give a consistent result or a *native.ScanError, never
// panic, and never report evidence the bytes do not hold.
func FuzzScanRollout(f *testing.F) {
	f.Add(started(turnB) + user(turnB, "do it") + complete(turnB, "ok"))
	f.Add(started(turnB) + user("", "do it") + rec("event_msg", map[string]any{"type": "turn_aborted", "turn_id": turnB}))
	f.Add(`{"type":"event_msg","payload":{"type":"task_complete"` + "\n")
	f.Add("{}\n{\n")
	a := codex.Anchor{Mode: codex.Existing, ThreadID: thread, Path: "/x/rollout.jsonl", Dev: 1, Ino: 1, Offset: 1000, FileExisted: true}
	f.Fuzz(func(t *testing.T, tail string) {
		acc, err := codex.ScanAcceptanceBytes(a, []byte(tail), request.Hash("do it"))
		if err != nil {
			if !errors.Is(err, native.ErrScan) {
				t.Fatalf("acceptance error %v is not a scan error", err)
			}
		} else if acc.Accepted && (acc.TurnID == "" || !strings.Contains(tail, "do it")) || acc.EndOffset < a.Offset || acc.EndOffset > a.Offset+int64(len(tail)) {
			t.Fatalf("acceptance %+v", acc)
		}
		c, err := codex.ScanCompletionBytes(a, []byte(tail), turnB)
		if err != nil {
			if !errors.Is(err, native.ErrScan) {
				t.Fatalf("completion error %v is not a scan error", err)
			}
			return
		}
		if c.State != native.Pending && !strings.Contains(strings.ToLower(tail), turnB) {
			t.Fatalf("completion %+v without a record of the turn", c)
		}
		if len([]rune(c.Text)) > native.MaxText {
			t.Fatalf("text of %d characters", len([]rune(c.Text)))
		}
	})
}
