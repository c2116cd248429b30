package codex_test

import (
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

func TestActiveTaskAnchor(t *testing.T) {
	t.Parallel()
	t.Run("the running task's line, then its completion is found from there", func(t *testing.T) {
		t.Parallel()
		head := meta(thread, "codex-tui", "cli") + started(turnA) + user(turnA, "first") + complete(turnA, "one")
		path := rollout(t, t.TempDir(), head, started(turnB), user(turnB, "typed by a human"))
		a, turn, err := codex.ActiveTaskAnchor(capture(t, path))
		if err != nil {
			t.Fatal(err)
		}
		if turn != turnB || a.Offset != int64(len(head)) {
			t.Fatalf("active task %s at %d, want %s at %d", turn, a.Offset, turnB, len(head))
		}
		turns, err := codex.TurnsStartedAfter(a)
		if err != nil || len(turns) != 1 || turns[0] != turnB {
			t.Fatalf("turns after the moved anchor = %v, %v", turns, err)
		}
		appendTo(t, path, complete(turnB, "two"))
		c, err := codex.ScanCompletion(a, turnB)
		if err != nil || c.State != native.Completed || c.Text != "two" {
			t.Fatalf("completion from the moved anchor = %+v, %v", c, err)
		}
	})
	t.Run("no running task", func(t *testing.T) {
		t.Parallel()
		path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA), user(turnA, "first"), complete(turnA, "one"))
		_, _, err := codex.ActiveTaskAnchor(capture(t, path))
		wantCode(t, err, native.CodeNotComplete)
	})
	t.Run("an aborted task is not running", func(t *testing.T) {
		t.Parallel()
		path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA),
			rec("event_msg", map[string]any{"type": "turn_aborted", "turn_id": turnA, "reason": "interrupted"}))
		_, _, err := codex.ActiveTaskAnchor(capture(t, path))
		wantCode(t, err, native.CodeNotComplete)
	})
	t.Run("an unbound anchor is refused", func(t *testing.T) {
		t.Parallel()
		_, _, err := codex.ActiveTaskAnchor(codex.VirginAnchor(t0))
		wantCode(t, err, native.CodeInvalidAnchor)
	})
}
