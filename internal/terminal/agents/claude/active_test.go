package claude_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// busy is the live session of a TUI that works on a turn.
var busy = claude.LiveSession{PID: 7, SessionID: session, Cwd: cwd, StartedAtMs: 1, Status: claude.StatusBusy}

// endOf anchors at the current end of the transcript at path while the
// session is busy, as a watch that joins a running task does.
func endOf(t testing.TB, path string) claude.Anchor {
	t.Helper()
	configDir := filepath.Dir(filepath.Dir(filepath.Dir(path)))
	if _, err := claude.CaptureAnchor(configDir, busy, t0); !errors.Is(err, claude.ErrNotIdle) {
		t.Fatalf("CaptureAnchor of a busy session: %v, want ErrNotIdle", err)
	}
	end, err := claude.CaptureEnd(configDir, busy, t0)
	if err != nil {
		t.Fatal(err)
	}
	return end
}

// checkJoined asserts that a is positioned at the line of prompt record
// uuid and that the scans from a see exactly that open turn first.
func checkJoined(t *testing.T, path string, a claude.Anchor, uuid string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if a.Offset < 0 || a.Offset > int64(len(data)) || (a.Offset > 0 && data[a.Offset-1] != '\n') {
		t.Fatalf("anchor offset %d is not a line start", a.Offset)
	}
	if first, _, _ := bytes.Cut(data[a.Offset:], []byte("\n")); !bytes.Contains(first, []byte(`"uuid":"`+uuid+`"`)) {
		t.Fatalf("the line at the anchor is not record %s: %.200s", uuid, first)
	}
	ids, err := claude.PromptsAfter(a)
	if err != nil || len(ids) == 0 || ids[0] != uuid {
		t.Fatalf("prompts after the joined anchor = %v, %v; want %s first", ids, err, uuid)
	}
	if c, err := claude.ScanCompletion(a, uuid); err != nil || c.State != native.Pending {
		t.Fatalf("completion from the joined anchor = %+v, %v; want pending", c, err)
	}
}

func TestActiveTaskAnchor(t *testing.T) {
	t.Parallel()
	p1 := prompt("p1", "d0", "a long task")
	working := assistant("a1", "p1", "m1", "tool_use", toolUse("tu1", "Bash", map[string]any{"command": "make"}))
	t.Run("joins the open turn and follows it to its end", func(t *testing.T) {
		t.Parallel()
		_, path := transcript(t, old, noise, p1, working)
		end := endOf(t, path)
		a, uuid, err := claude.ActiveTaskAnchor(end)
		if err != nil || uuid != "p1" {
			t.Fatalf("ActiveTaskAnchor = %s, %v; want p1", uuid, err)
		}
		if a.Offset != int64(len(old+noise)) || a.Path != end.Path || a.Dev != end.Dev || a.Ino != end.Ino || a.SessionID != session {
			t.Fatalf("joined anchor %+v (end %+v)", a, end)
		}
		checkJoined(t, path, a, "p1")
		appendTo(t, path, toolResult("r1", "a1", "tu1"), assistant("a2", "r1", "m2", "end_turn", text("built")), duration("d1", "a2"))
		if c, err := claude.ScanCompletion(a, "p1"); err != nil || c.State != native.Completed || c.Text != "built" {
			t.Fatalf("completion after the turn ended = %+v, %v", c, err)
		}
		if _, _, err := claude.ActiveTaskAnchor(endOf(t, path)); err == nil {
			t.Fatal("joined a turn that has ended")
		}
	})
	t.Run("a prompt with nothing after it yet", func(t *testing.T) {
		t.Parallel()
		_, path := transcript(t, old, p1)
		a, uuid, err := claude.ActiveTaskAnchor(endOf(t, path))
		if err != nil || uuid != "p1" {
			t.Fatalf("ActiveTaskAnchor = %s, %v; want p1", uuid, err)
		}
		checkJoined(t, path, a, "p1")
	})
	t.Run("the first record of the file", func(t *testing.T) {
		t.Parallel()
		_, path := transcript(t, prompt("p1", "", "first"), assistant("a1", "p1", "m1", "", text("thinking")))
		a, uuid, err := claude.ActiveTaskAnchor(endOf(t, path))
		if err != nil || uuid != "p1" || a.Offset != 0 {
			t.Fatalf("ActiveTaskAnchor = %+v %s, %v; want p1 at 0", a, uuid, err)
		}
	})
	t.Run("records that are not human prompts", func(t *testing.T) {
		t.Parallel()
		notPrompts := []string{
			toolResult("r0", "a1", "tu1"),
			line(map[string]any{"type": "user", "uuid": "s1", "parentUuid": "a1", "isSidechain": true, "message": map[string]any{"role": "user", "content": "a subagent's task"}}),
			line(map[string]any{"type": "user", "uuid": "g1", "parentUuid": "a1", "agentId": "x", "message": map[string]any{"role": "user", "content": "an agent's task"}}),
			line(map[string]any{"type": "user", "uuid": "m1", "parentUuid": "a1", "isMeta": true, "message": map[string]any{"role": "user", "content": "<local-command-caveat>x</local-command-caveat>"}}),
			line(map[string]any{"type": "user", "uuid": "c1", "parentUuid": nil, "isCompactSummary": true, "message": map[string]any{"role": "user", "content": "This session is being continued from a previous conversation"}}),
			line(map[string]any{"type": "user", "uuid": "i1", "parentUuid": "a1", "message": map[string]any{"role": "user", "content": "[Request interrupted by user for tool use]"}}),
			line(map[string]any{"type": "user", "uuid": "o1", "parentUuid": "a1", "sessionId": "other", "message": map[string]any{"role": "user", "content": "another session"}}),
			line(map[string]any{"type": "user", "uuid": "w1", "parentUuid": "a1", "cwd": "/elsewhere", "message": map[string]any{"role": "user", "content": "another workspace"}}),
		}
		for _, rec := range notPrompts {
			// After an open turn: the join is that turn's prompt.
			_, path := transcript(t, old, p1, working, rec)
			a, uuid, err := claude.ActiveTaskAnchor(endOf(t, path))
			if err != nil || uuid != "p1" {
				t.Fatalf("after %s: ActiveTaskAnchor = %s, %v; want p1", rec, uuid, err)
			}
			checkJoined(t, path, a, "p1")
			// After a finished turn: nothing runs.
			_, path = transcript(t, old, rec)
			_, uuid, err = claude.ActiveTaskAnchor(endOf(t, path))
			wantCode(t, err, native.CodeNotComplete)
			if uuid != "" {
				t.Fatalf("after a finished turn and %s: joined %s", rec, uuid)
			}
		}
	})
	refused := []struct {
		name  string
		lines []string
		want  string
	}{
		{"a completed turn", []string{old}, "already ended (completion_found)"},
		{"an interrupted turn", []string{old, p1, assistant("a1", "p1", "m1", "", text("F")),
			line(map[string]any{"type": "user", "uuid": "u1", "parentUuid": "a1", "message": map[string]any{"role": "user", "content": []any{text("[Request interrupted by user]")}}})},
			"already ended (turn_aborted)"},
		{"a turn that failed", []string{old, p1, line(map[string]any{"type": "assistant", "uuid": "a1", "parentUuid": "p1", "isApiErrorMessage": true, "error": "x",
			"message": map[string]any{"id": "e1", "role": "assistant", "content": []any{text("API Error: 500")}}})}, "already ended (api_error)"},
		{"no prompt at all", []string{noise, line(map[string]any{"type": "attachment", "uuid": "x1", "parentUuid": nil})}, "no human prompt"},
	}
	for _, tt := range refused {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			t.Parallel()
			_, path := transcript(t, tt.lines...)
			_, _, err := claude.ActiveTaskAnchor(endOf(t, path))
			wantCode(t, err, native.CodeNotComplete)
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v does not say %q", err, tt.want)
			}
		})
	}
	t.Run("a newer prompt recorded after the end anchor", func(t *testing.T) {
		t.Parallel()
		_, path := transcript(t, old)
		end := endOf(t, path)
		appendTo(t, path, p1)
		a, uuid, err := claude.ActiveTaskAnchor(end)
		if err != nil || uuid != "p1" || a.Offset != int64(len(old)) {
			t.Fatalf("ActiveTaskAnchor = %+v %s, %v", a, uuid, err)
		}
	})
	t.Run("before the transcript exists", func(t *testing.T) {
		t.Parallel()
		end, err := claude.CaptureEnd(t.TempDir(), busy, t0)
		if err != nil || end.FileExisted {
			t.Fatalf("%+v, %v", end, err)
		}
		_, _, err = claude.ActiveTaskAnchor(end)
		wantCode(t, err, native.CodeNotMaterialized)
	})
}

func TestActiveTaskAnchorRefusesAnotherFile(t *testing.T) {
	t.Parallel()
	open := []string{old, prompt("p1", "d0", "a long task")}
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
		code  native.Code
	}{
		{"replaced", func(t *testing.T, path string) {
			if err := os.WriteFile(path+".new", []byte(strings.Join(open, "")), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}, native.CodeIdentityMismatch},
		{"a symbolic link", func(t *testing.T, path string) {
			if err := os.Rename(path, path+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(path+".real", path); err != nil {
				t.Fatal(err)
			}
		}, native.CodeUnreadable},
		{"opened up to others", func(t *testing.T, path string) {
			if err := os.Chmod(path, 0o644); err != nil {
				t.Fatal(err)
			}
		}, native.CodeUnreadable},
		{"truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, int64(len(old))+10); err != nil {
				t.Fatal(err)
			}
		}, native.CodeTruncated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, path := transcript(t, open...)
			end := endOf(t, path)
			tt.setup(t, path)
			_, _, err := claude.ActiveTaskAnchor(end)
			wantCode(t, err, tt.code)
		})
	}
}

// filler is a record without uuid of exactly n bytes (newline included).
func filler(n int) string {
	head := `{"type":"api-request-shape","sessionId":"` + session + `","body":"`
	tail := "\"}\n"
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
}

func TestActiveTaskAnchorWindow(t *testing.T) {
	t.Parallel()
	p1 := prompt("p1", "d0", "a long task")
	// The prompt line starting exactly MaxActiveTaskScan bytes before the
	// end is the window's first complete line; one byte further back it is
	// not in the window.
	for _, tt := range []struct {
		name  string
		extra int
		ok    bool
	}{{"at the window's first byte", 0, true}, {"one byte beyond the window", 1, false}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rest := claude.MaxActiveTaskScan - len(p1) + tt.extra
			var fill []string
			for rest > 0 {
				n := min(rest, 1<<20)
				if rest-n > 0 && rest-n < 200 {
					n = rest - 200
				}
				fill = append(fill, filler(n))
				rest -= n
			}
			_, path := transcript(t, append([]string{old, p1}, fill...)...)
			end := endOf(t, path)
			if got := end.Offset - int64(len(old)); got != claude.MaxActiveTaskScan+int64(tt.extra) {
				t.Fatalf("the prompt starts %d bytes before the end", got)
			}
			a, uuid, err := claude.ActiveTaskAnchor(end)
			if !tt.ok {
				wantCode(t, err, native.CodeNotComplete)
				if !strings.Contains(err.Error(), "no human prompt") {
					t.Fatalf("error %v does not say the window holds no prompt", err)
				}
				return
			}
			if err != nil || uuid != "p1" || a.Offset != int64(len(old)) {
				t.Fatalf("ActiveTaskAnchor = %d %s, %v", a.Offset, uuid, err)
			}
		})
	}
	t.Run("a huge last record the window starts inside", func(t *testing.T) {
		t.Parallel()
		huge := line(map[string]any{"type": "attachment", "uuid": "h1", "parentUuid": "p1", "attachment": strings.Repeat("y", claude.MaxActiveTaskScan+1000)})
		_, path := transcript(t, old, p1, huge)
		_, _, err := claude.ActiveTaskAnchor(endOf(t, path))
		wantCode(t, err, native.CodeNotComplete)
	})
	t.Run("a huge last record still being written", func(t *testing.T) {
		t.Parallel()
		_, path := transcript(t, old, p1)
		end := endOf(t, path)
		appendTo(t, path, `{"type":"attachment","uuid":"h1","parentUuid":"p1","attachment":"`+strings.Repeat("y", claude.MaxActiveTaskScan+1000))
		a, uuid, err := claude.ActiveTaskAnchor(end)
		if err != nil || uuid != "p1" || a.Offset != int64(len(old)) {
			t.Fatalf("ActiveTaskAnchor = %d %s, %v", a.Offset, uuid, err)
		}
		if c, err := claude.ScanCompletion(a, uuid); err != nil || c.State != native.Pending || c.Code != native.CodePartialRecord {
			t.Fatalf("completion = %+v, %v; want pending on a partial record", c, err)
		}
	})
	t.Run("no complete line in the window", func(t *testing.T) {
		t.Parallel()
		_, path := transcript(t, old, p1)
		end := endOf(t, path)
		appendTo(t, path, strings.Repeat("y", claude.MaxActiveTaskScan+1000))
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		// An end inside a line (CaptureEnd refuses to take one there).
		end.Offset = st.Size()
		_, _, err = claude.ActiveTaskAnchor(end)
		wantCode(t, err, native.CodeNotComplete)
		if !strings.Contains(err.Error(), "no complete line") {
			t.Fatalf("error %v", err)
		}
	})
}

// FuzzActiveTask reads arbitrary bytes as a whole transcript: a scan error
// or an anchor at the start of the line of a prompt record whose turn the
// completion scan from there finds open, never a panic.
func FuzzActiveTask(f *testing.F) {
	f.Add(old + prompt("p1", "d0", "go") + assistant("a1", "p1", "m1", "", text("x")))
	f.Add(old)
	f.Add(prompt("p1", "", "go") + "\n" + toolResult("r1", "p1", "t1"))
	f.Add("{\n}\n")
	end := claude.Anchor{SessionID: session, Cwd: cwd, PID: 7, StartedAtMs: 1, Path: "/x/t.jsonl", FileExisted: true, Dev: 1, Ino: 1}
	f.Fuzz(func(t *testing.T, data string) {
		a, uuid, err := claude.ActiveTaskBytes(end, []byte(data))
		if err != nil {
			if !errors.Is(err, native.ErrScan) {
				t.Fatalf("error %v is not a scan error", err)
			}
			return
		}
		if a.Offset < 0 || a.Offset > int64(len(data)) || (a.Offset > 0 && data[a.Offset-1] != '\n') {
			t.Fatalf("offset %d is not a line start", a.Offset)
		}
		first, _, _ := strings.Cut(data[a.Offset:], "\n")
		var rec struct {
			UUID string `json:"uuid"`
		}
		if err := json.Unmarshal([]byte(first), &rec); err != nil || uuid == "" || rec.UUID != uuid {
			t.Fatalf("joined %q from a line that is not its record (%v): %q", uuid, err, first)
		}
		c, err := claude.ScanCompletionBytes(a, []byte(data[a.Offset:]), uuid)
		if err != nil || c.State != native.Pending {
			t.Fatalf("completion from the joined anchor = %+v, %v", c, err)
		}
	})
}
