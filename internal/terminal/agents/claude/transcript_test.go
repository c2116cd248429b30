package claude_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

const (
	session = "4aac4e62-b9b2-441d-87a2-f95d8c004556"
	cwd     = "/srv/work"
)

var t0 = time.Date(2026, 12, 1, 15, 9, 0, 0, time.UTC)

// line renders one transcript record with the fields every record of the
// session carries.
func line(fields map[string]any) string {
	r := map[string]any{"isSidechain": false, "sessionId": session, "cwd": cwd, "entrypoint": "cli", "version": "2.1.332",
		"timestamp": t0.Format(time.RFC3339Nano)}
	for k, v := range fields {
		r[k] = v
	}
	b, _ := json.Marshal(r)
	return string(b) + "\n"
}

func prompt(uuid, parent, text string) string {
	var p any
	if parent != "" {
		p = parent
	}
	return line(map[string]any{"type": "user", "uuid": uuid, "parentUuid": p, "message": map[string]any{"role": "user", "content": text}})
}

func assistant(uuid, parent, id, stop string, blocks ...any) string {
	return line(map[string]any{"type": "assistant", "uuid": uuid, "parentUuid": parent,
		"message": map[string]any{"id": id, "role": "assistant", "content": blocks, "stop_reason": stop}})
}

func text(s string) any { return map[string]any{"type": "text", "text": s} }

func toolUse(id, name string, input map[string]any) any {
	return map[string]any{"type": "tool_use", "id": id, "name": name, "input": input}
}

func toolResult(uuid, parent, id string) string {
	return line(map[string]any{"type": "user", "uuid": uuid, "parentUuid": parent,
		"message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"}}}})
}

func duration(uuid, parent string) string {
	return line(map[string]any{"type": "system", "subtype": "turn_duration", "uuid": uuid, "parentUuid": parent, "durationMs": 5})
}

// noise is a record without uuid, as Claude Code writes many.
const noise = `{"type":"permission-mode","permissionMode":"default","sessionId":"` + session + `"}` + "\n"

func transcript(t testing.TB, lines ...string) (claude.Anchor, string) {
	t.Helper()
	configDir := filepath.Join(t.TempDir(), ".claude")
	path := claude.TranscriptPath(configDir, cwd, session)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := claude.CaptureAnchor(configDir, claude.LiveSession{PID: 7, SessionID: session, Cwd: cwd, StartedAtMs: 1, Status: claude.StatusIdle}, t0)
	if err != nil {
		t.Fatal(err)
	}
	return a, path
}

func appendTo(t testing.TB, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "")); err != nil {
		t.Fatal(err)
	}
}

func wantCode(t *testing.T, err error, code native.Code) {
	t.Helper()
	var se *native.ScanError
	if !errors.As(err, &se) || se.Code != code {
		t.Fatalf("error %v, want a scan error with code %s", err, code)
	}
}

var old = prompt("p0", "", "do it") + assistant("a0", "p0", "m0", "end_turn", text("old")) + duration("d0", "a0")

func TestScanAcceptance(t *testing.T) {
	t.Parallel()
	t.Run("after the anchor only, CRLF and trailing newlines alike", func(t *testing.T) {
		t.Parallel()
		a, path := transcript(t, old)
		if got, err := claude.ScanAcceptance(a, "do it"); err != nil || got.Accepted {
			t.Fatalf("before sending: %+v, %v", got, err)
		}
		appendTo(t, path, noise, prompt("p1", "d0", "do it\r\nnow\n"))
		got, err := claude.ScanAcceptance(a, "do it\nnow")
		if err != nil || !got.Accepted || got.TurnID != "p1" || got.ThreadID != session || !got.AcceptedAt.Equal(t0) {
			t.Fatalf("%+v, %v", got, err)
		}
	})
	ignored := []struct{ name, rec string }{
		{"sidechain", line(map[string]any{"type": "user", "uuid": "p1", "isSidechain": true, "message": map[string]any{"role": "user", "content": "do it"}})},
		{"agent", line(map[string]any{"type": "user", "uuid": "p1", "agentId": "x", "message": map[string]any{"role": "user", "content": "do it"}})},
		{"other session", line(map[string]any{"type": "user", "uuid": "p1", "sessionId": "other", "message": map[string]any{"role": "user", "content": "do it"}})},
		{"other cwd", line(map[string]any{"type": "user", "uuid": "p1", "cwd": "/elsewhere", "message": map[string]any{"role": "user", "content": "do it"}})},
		{"block content", line(map[string]any{"type": "user", "uuid": "p1", "message": map[string]any{"role": "user", "content": []any{text("do it")}}})},
	}
	for _, tt := range ignored {
		t.Run("ignores "+tt.name, func(t *testing.T) {
			t.Parallel()
			a, path := transcript(t, old)
			appendTo(t, path, tt.rec)
			if got, err := claude.ScanAcceptance(a, "do it"); err != nil || got.Accepted {
				t.Fatalf("%+v, %v", got, err)
			}
		})
	}
	t.Run("partial line pending", func(t *testing.T) {
		t.Parallel()
		a, path := transcript(t, old)
		appendTo(t, path, prompt("p1", "d0", "do it")[:30])
		if got, err := claude.ScanAcceptance(a, "do it"); err != nil || got.Code != native.CodePartialRecord || got.EndOffset != a.Offset {
			t.Fatalf("%+v, %v", got, err)
		}
	})
	t.Run("two matches", func(t *testing.T) {
		t.Parallel()
		a, path := transcript(t, old)
		appendTo(t, path, prompt("p1", "d0", "do it"), prompt("p2", "p1", "do it"))
		_, err := claude.ScanAcceptance(a, "do it")
		wantCode(t, err, native.CodeDuplicateAcceptance)
	})
	t.Run("not JSON", func(t *testing.T) {
		t.Parallel()
		a, path := transcript(t, old)
		appendTo(t, path, "nope\n")
		_, err := claude.ScanAcceptance(a, "do it")
		wantCode(t, err, native.CodeInvalidJSONL)
	})
	t.Run("truncated", func(t *testing.T) {
		t.Parallel()
		a, path := transcript(t, old)
		if err := os.Truncate(path, 5); err != nil {
			t.Fatal(err)
		}
		_, err := claude.ScanAcceptance(a, "do it")
		wantCode(t, err, native.CodeTruncated)
	})
	t.Run("replaced", func(t *testing.T) {
		t.Parallel()
		a, path := transcript(t, old)
		if err := os.WriteFile(path+".new", []byte(old+prompt("p1", "d0", "do it")), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
		_, err := claude.ScanAcceptance(a, "do it")
		wantCode(t, err, native.CodeIdentityMismatch)
	})
	t.Run("opened up to others", func(t *testing.T) {
		t.Parallel()
		a, path := transcript(t, old)
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := claude.ScanAcceptance(a, "do it")
		wantCode(t, err, native.CodeUnreadable)
	})
}

func TestScanCompletion(t *testing.T) {
	t.Parallel()
	p1 := prompt("p1", "d0", "do it")
	tests := []struct {
		name  string
		lines []string
		want  native.Completion
		code  native.Code
	}{
		{"running", []string{p1, noise, assistant("a1", "p1", "m1", "", text("thinking"))},
			native.Completion{State: native.Pending, Code: native.CodeNotComplete, TurnID: "p1"}, ""},
		{"completed, text of the final message joined", []string{p1,
			assistant("a1", "p1", "m1", "tool_use", text("first")),
			assistant("a2", "a1", "m1", "tool_use", toolUse("t1", "Bash", map[string]any{"command": "ls"})),
			toolResult("r1", "a2", "t1"),
			assistant("a3", "r1", "m2", "end_turn", text("part one")),
			assistant("a4", "a3", "m2", "end_turn", text("token ghp_0123456789abcdefABCDEF0123")),
			duration("d1", "a4"), prompt("p2", "d1", "next")},
			native.Completion{State: native.Completed, Code: native.CodeCompletionFound, TurnID: "p1", Text: "part one\ntoken [REDACTED]", CompletedAt: t0}, ""},
		{"unanswered tool call keeps it pending", []string{p1,
			assistant("a1", "p1", "m1", "tool_use", toolUse("t1", "Bash", map[string]any{"command": "ls"})),
			assistant("a2", "a1", "m2", "end_turn", text("x")), duration("d1", "a2")},
			native.Completion{State: native.Pending, Code: native.CodeNotComplete, TurnID: "p1"}, ""},
		{"background work keeps it pending", []string{p1,
			assistant("a1", "p1", "m1", "tool_use", toolUse("t1", "Bash", map[string]any{"command": "sleep 9", "run_in_background": true})),
			toolResult("r1", "a1", "t1"), assistant("a2", "r1", "m2", "end_turn", text("x")), duration("d1", "a2")},
			native.Completion{State: native.Pending, Code: native.CodeNotComplete, TurnID: "p1"}, ""},
		{"another turn's records ignored", []string{p1, assistant("x1", "a0", "mx", "end_turn", text("no")), duration("x2", "x1")},
			native.Completion{State: native.Pending, Code: native.CodeNotComplete, TurnID: "p1"}, ""},
		{"api error", []string{p1, line(map[string]any{"type": "assistant", "uuid": "a1", "parentUuid": "p1", "isApiErrorMessage": true, "error": "invalid_request",
			"message": map[string]any{"id": "x", "role": "assistant", "content": []any{text("API Error: 400 bad")}}})},
			native.Completion{State: native.Failed, Code: native.CodeAPIError, TurnID: "p1", Text: "API Error: 400 bad", CompletedAt: t0}, ""},
		{"interrupted", []string{p1, assistant("a1", "p1", "m1", "", text("F")),
			line(map[string]any{"type": "user", "uuid": "u1", "parentUuid": "a1", "message": map[string]any{"role": "user", "content": []any{text("[Request interrupted by user]")}}})},
			native.Completion{State: native.Aborted, Code: native.CodeTurnAborted, TurnID: "p1", Reason: "interrupted", CompletedAt: t0}, ""},
		{"two turn_duration", []string{p1, assistant("a1", "p1", "m1", "end_turn", text("x")), duration("d1", "a1"), duration("d2", "a1")}, native.Completion{}, native.CodeDuplicateCompletion},
		{"turn_duration without end_turn", []string{p1, assistant("a1", "p1", "m1", "max_tokens", text("x")), duration("d1", "a1")}, native.Completion{}, native.CodeInvalidCompletion},
		{"uuid twice", []string{p1, assistant("a1", "p1", "m1", "", text("x")), assistant("a1", "p1", "m1", "", text("x"))}, native.Completion{}, native.CodeInvalidTranscript},
		{"prompt not after the anchor", []string{prompt("p9", "d0", "other")}, native.Completion{}, native.CodeInvalidAcceptance},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, path := transcript(t, old)
			appendTo(t, path, tt.lines...)
			got, err := claude.ScanCompletion(a, "p1")
			if tt.code != "" {
				wantCode(t, err, tt.code)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, _ := os.Stat(path)
			tt.want.EndOffset = st.Size()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestPendingApproval(t *testing.T) {
	t.Parallel()
	p1 := prompt("p1", "d0", "do it")
	bash := assistant("a1", "p1", "m1", "tool_use", toolUse("t1", "Bash", map[string]any{"command": "touch x"}))
	tests := []struct {
		name  string
		lines []string
		want  bool
	}{
		{"one unanswered Bash call", []string{p1, bash}, true},
		{"answered", []string{p1, bash, toolResult("r1", "a1", "t1")}, false},
		{"not Bash", []string{p1, assistant("a1", "p1", "m1", "tool_use", toolUse("t1", "Edit", map[string]any{"file": "x"}))}, false},
		{"two unanswered", []string{p1, assistant("a1", "p1", "m1", "tool_use", toolUse("t1", "Bash", map[string]any{"command": "a"}), toolUse("t2", "Bash", map[string]any{"command": "b"}))}, false},
		{"no tool call", []string{p1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, path := transcript(t, old)
			appendTo(t, path, tt.lines...)
			ap, err := claude.PendingApproval(a, "p1")
			if err != nil || (ap != nil) != tt.want {
				t.Fatalf("%+v, %v; want pending=%v", ap, err, tt.want)
			}
			if ap != nil && (ap.ToolUseID != "t1" || len(ap.CommandSHA256) != 64 || len(ap.Fingerprint) != 64 ||
				ap.Command != "touch x" || ap.Cwd != cwd || !ap.OnlyCommand) {
				t.Errorf("%+v", ap)
			}
		})
	}
}

// TestPendingApprovalOnlyCommand: the exact input is told apart from one
// where something besides the command decides what runs.
func TestPendingApprovalOnlyCommand(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, input string
		only        bool
	}{
		{"command", `{"command":"make test"}`, true},
		{"with description and timeout", `{"command":"make test","description":"run the tests","timeout":60000}`, true},
		{"in the background", `{"command":"make test","run_in_background":true}`, false},
		{"sandbox off", `{"command":"make test","dangerouslyDisableSandbox":true}`, false},
		{"unknown field", `{"command":"make test","shell":"zsh"}`, false},
		{"command twice", `{"command":"make test","command":"rm -rf x"}`, false},
		{"other case", `{"Command":"make test"}`, false},
		{"description not a string", `{"command":"make test","description":1}`, false},
		{"timeout a string", `{"command":"make test","timeout":"1"}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, path := transcript(t, old)
			rec := strings.Replace(assistant("a1", "p1", "m1", "tool_use", toolUse("t1", "Bash", map[string]any{"command": "PLACEHOLDER"})),
				`{"command":"PLACEHOLDER"}`, tt.input, 1)
			appendTo(t, path, prompt("p1", "d0", "do it"), rec)
			ap, err := claude.PendingApproval(a, "p1")
			if err != nil || ap == nil {
				t.Fatalf("%+v, %v", ap, err)
			}
			if ap.OnlyCommand != tt.only {
				t.Errorf("OnlyCommand = %v, want %v", ap.OnlyCommand, tt.only)
			}
		})
	}
}

func TestCaptureAnchor(t *testing.T) {
	t.Parallel()
	live := claude.LiveSession{PID: 7, SessionID: session, Cwd: cwd, StartedAtMs: 1, Status: claude.StatusIdle}
	t.Run("before the transcript exists, then materialized", func(t *testing.T) {
		t.Parallel()
		configDir := t.TempDir()
		a, err := claude.CaptureAnchor(configDir, live, t0)
		if err != nil || a.FileExisted || a.Offset != 0 {
			t.Fatalf("%+v, %v", a, err)
		}
		if got, err := claude.ScanAcceptance(a, "do it"); err != nil || got.Code != native.CodeNotMaterialized {
			t.Fatalf("%+v, %v", got, err)
		}
		if _, err := a.Materialize(); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("materialize before the file exists: %v", err)
		}
		_ = os.MkdirAll(filepath.Dir(a.Path), 0o700)
		if err := os.WriteFile(a.Path, []byte(prompt("p1", "", "do it")), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := claude.ScanAcceptance(a, "do it"); err != nil || got.TurnID != "p1" {
			t.Fatalf("%+v, %v", got, err)
		}
		m, err := a.Materialize()
		if err != nil || m.Ino == 0 || m.Offset != 0 {
			t.Fatalf("%+v, %v", m, err)
		}
	})
	t.Run("not idle", func(t *testing.T) {
		t.Parallel()
		busy := live
		busy.Status = claude.StatusBusy
		if _, err := claude.CaptureAnchor(t.TempDir(), busy, t0); !errors.Is(err, claude.ErrNotIdle) {
			t.Fatalf("error %v, want ErrNotIdle", err)
		}
	})
	refuse := []struct {
		name  string
		setup func(t *testing.T, path string)
	}{
		{"partial line", func(t *testing.T, path string) { appendTo(t, path, `{"type":`) }},
		{"group-readable", func(t *testing.T, path string) { _ = os.Chmod(path, 0o640) }},
		{"symbolic link", func(t *testing.T, path string) {
			_ = os.Rename(path, path+".real")
			_ = os.Symlink(path+".real", path)
		}},
	}
	for _, tt := range refuse {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			configDir := t.TempDir()
			path := claude.TranscriptPath(configDir, cwd, session)
			_ = os.MkdirAll(filepath.Dir(path), 0o700)
			if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, path)
			if a, err := claude.CaptureAnchor(configDir, live, t0); err == nil {
				t.Fatalf("captured %+v, want an error", a)
			}
		})
	}
}

func TestPromptsAfter(t *testing.T) {
	t.Parallel()
	a, path := transcript(t, old)
	if ids, err := claude.PromptsAfter(a); err != nil || len(ids) != 0 {
		t.Fatalf("%v, %v; want none", ids, err)
	}
	appendTo(t, path, prompt("p1", "d0", "typed by a human"), assistant("a1", "p1", "m1", "", text("F")),
		line(map[string]any{"type": "user", "uuid": "u1", "parentUuid": "a1", "message": map[string]any{"role": "user", "content": "[Request interrupted by user]"}}),
		prompt("p2", "u1", "and again"))
	if ids, err := claude.PromptsAfter(a); err != nil || strings.Join(ids, ",") != "p1,p2" {
		t.Fatalf("%v, %v; want [p1 p2]", ids, err)
	}
}

func TestScanAcceptancePaste(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, recorded string
		want           bool
	}{
		{"paste", "\n\n<pasted_content id=\"ab\">\nline 1\tx\nline 2\n</pasted_content id=\"ab\">\n", true},
		{"paste with tabs already spaces", "<pasted_content id=\"c\">\nline 1    x\nline 2\n</pasted_content id=\"c\">", true},
		{"unclosed tag", "\n\n<pasted_content id=\"ab\">\nline 1\tx\nline 2\n", false},
		{"mismatched id", "<pasted_content id=\"ab\">\nline 1\tx\nline 2\n</pasted_content id=\"zz\">", false},
		{"other text", "<pasted_content id=\"ab\">\nline 1\tx\nline 3\n</pasted_content id=\"ab\">", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, path := transcript(t, old)
			appendTo(t, path, prompt("p1", "d0", tt.recorded))
			got, err := claude.ScanAcceptance(a, "line 1\tx\nline 2")
			if err != nil || got.Accepted != tt.want {
				t.Fatalf("%+v, %v; want accepted=%v", got, err, tt.want)
			}
		})
	}
}

// TestPromptSince resumes one cursor as the transcript grows: a prompt
// written since is found, an interruption note is not a prompt, a record
// being written is left for later, and a replaced transcript is final.
func TestPromptSince(t *testing.T) {
	t.Parallel()
	a, path := transcript(t, old)
	c, err := claude.PromptSince(a, native.Cursor{})
	if err != nil || c.Found {
		t.Fatalf("%+v, %v; want none", c, err)
	}
	appendTo(t, path, assistant("a1", "d0", "m1", "", text("F")),
		line(map[string]any{"type": "user", "uuid": "u1", "parentUuid": "a1", "sessionId": session, "cwd": cwd,
			"message": map[string]any{"role": "user", "content": "[Request interrupted by user]"}}))
	p := prompt("p1", "u1", "typed by a human")
	appendTo(t, path, p[:30])
	if c, err = claude.PromptSince(a, c); err != nil || c.Found {
		t.Fatalf("%+v, %v; want none yet", c, err)
	}
	appendTo(t, path, p[30:])
	if c, err = claude.PromptSince(a, c); err != nil || !c.Found {
		t.Fatalf("%+v, %v; want the prompt", c, err)
	}

	b, bpath := transcript(t, old)
	c, _ = claude.PromptSince(b, native.Cursor{})
	if err := os.WriteFile(bpath+".new", []byte(old+old), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bpath+".new", bpath); err != nil {
		t.Fatal(err)
	}
	_, err = claude.PromptSince(b, c)
	wantCode(t, err, native.CodeIdentityMismatch)

	// A session before its first prompt: no transcript yet, then one.
	configDir := filepath.Join(t.TempDir(), ".claude")
	v, err := claude.CaptureAnchor(configDir, claude.LiveSession{PID: 7, SessionID: session, Cwd: cwd, StartedAtMs: 1, Status: claude.StatusIdle}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if c, err = claude.PromptSince(v, native.Cursor{}); err != nil || c.Found {
		t.Fatalf("no transcript: %+v, %v", c, err)
	}
	if err := os.MkdirAll(filepath.Dir(v.Path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(v.Path, []byte(noise+prompt("p9", "", "first")), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = claude.PromptSince(v, c); err != nil || !c.Found {
		t.Fatalf("first prompt: %+v, %v", c, err)
	}
}

// FuzzPromptSince checks that the resumable scan, fed the bytes in two
// parts, answers as PromptsAfter does over the whole.
func FuzzPromptSince(f *testing.F) {
	f.Add(prompt("p1", "d0", "typed")+assistant("a1", "p1", "m1", "end_turn", text("x")), 40)
	f.Add(noise+"{}\n", 3)
	f.Add(`{"uuid":"u","type":"user","message":{"role":"user","content":"x"}}`+"\nnot json\n", 70)
	f.Fuzz(func(t *testing.T, tail string, cut int) {
		a, path := transcript(t, old)
		cut = min(max(cut, 0), len(tail))
		appendTo(t, path, tail[:cut])
		c, _ := claude.PromptSince(a, native.Cursor{})
		appendTo(t, path, tail[cut:])
		c, err := claude.PromptSince(a, c)
		ids, werr := claude.PromptsAfter(a)
		var se, wse *native.ScanError
		switch {
		case errors.As(werr, &wse):
			// The whole-file scan stops at the first bad line; the
			// resumed one may have found a prompt before it.
			if !c.Found && (!errors.As(err, &se) || se.Code != wse.Code) {
				t.Fatalf("resumed %+v, %v; whole %v", c, err, werr)
			}
		case err != nil:
			t.Fatalf("resumed error %v; whole %v, %v", err, ids, werr)
		case c.Found != (len(ids) > 0):
			t.Fatalf("resumed found=%v; whole %v", c.Found, ids)
		}
	})
}

// FuzzPendingApproval reads arbitrary bytes after an anchor as a turn
// waiting on a Bash call: a scan error or an approval whose hash is its
// command's, never a panic.
func FuzzPendingApproval(f *testing.F) {
	f.Add(prompt("p1", "d0", "do it") + assistant("a1", "p1", "m1", "tool_use", toolUse("t1", "Bash", map[string]any{"command": "make test"})))
	f.Add(prompt("p1", "d0", "do it") + strings.Replace(assistant("a1", "p1", "m1", "tool_use", toolUse("t1", "Bash", map[string]any{"command": "X"})),
		`{"command":"X"}`, `{"command":"a","command":"b","timeout":1}`, 1))
	a := claude.Anchor{SessionID: session, Cwd: cwd, PID: 7, StartedAtMs: 1, Path: "/x/t.jsonl", FileExisted: true, Dev: 1, Ino: 1, Offset: 100}
	f.Fuzz(func(t *testing.T, tail string) {
		ap, err := claude.PendingApprovalBytes(a, []byte(tail), "p1")
		if err != nil {
			if !errors.Is(err, native.ErrScan) {
				t.Fatalf("error %v is not a scan error", err)
			}
			return
		}
		if ap == nil {
			return
		}
		sum := sha256.Sum256([]byte(ap.Command))
		if ap.Command == "" || ap.CommandSHA256 != hex.EncodeToString(sum[:]) || len(ap.Fingerprint) != 64 {
			t.Fatalf("%+v", ap)
		}
	})
}
