package codex_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
	"github.com/clawconnect/clawconnect/internal/terminal/request"
)

const (
	thread = "01a23222-7264-7862-a4e6-4dc736ce863d"
	turnA  = "01a23222-735a-7f83-ad39-a492a897a872"
	turnB  = "01a23222-7c16-7263-ad96-69179b76be8d"
	cwd    = "/srv/work"
)

var t0 = time.Date(2026, 12, 1, 15, 4, 8, 0, time.UTC)

func rec(typ string, payload map[string]any) string {
	b, _ := json.Marshal(map[string]any{"timestamp": t0.Add(time.Second).Format(time.RFC3339Nano), "type": typ, "payload": payload})
	return string(b) + "\n"
}

func meta(id, originator, source string) string {
	return rec("session_meta", map[string]any{"id": id, "timestamp": t0.Format(time.RFC3339Nano), "cwd": cwd,
		"originator": originator, "cli_version": "0.171.0", "source": source})
}

func started(turn string) string {
	return rec("event_msg", map[string]any{"type": "task_started", "turn_id": turn})
}

func user(turn, text string) string {
	p := map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": text}}}
	if turn != "" {
		p["internal_chat_message_metadata_passthrough"] = map[string]any{"turn_id": turn}
	}
	return rec("response_item", p)
}

func complete(turn string, msg any) string {
	return rec("event_msg", map[string]any{"type": "task_complete", "turn_id": turn, "last_agent_message": msg})
}

// rollout writes a rollout file in a private sessions tree and returns its
// path.
func rollout(t testing.TB, dir string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, "sessions", "2026", "12", "01", "rollout-2026-12-01T15-04-08-"+thread+".jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func appendTo(t *testing.T, path string, lines ...string) {
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

func rootOf(t testing.TB, path string) codex.Rollout {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	m, err := codex.ReadSessionMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	return codex.Rollout{Path: path, Dev: uint64(st.Dev), Ino: st.Ino, ThreadID: m.ID, Meta: m}
}

func capture(t testing.TB, path string) codex.Anchor {
	t.Helper()
	a, err := codex.CaptureAnchor(rootOf(t, path), t0)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func wantCode(t *testing.T, err error, code native.Code) {
	t.Helper()
	var se *native.ScanError
	if !errors.As(err, &se) || se.Code != code || !errors.Is(err, native.ErrScan) {
		t.Fatalf("error %v, want a scan error with code %s", err, code)
	}
}

func TestScanAcceptance(t *testing.T) {
	t.Parallel()
	req := request.Hash("do it")
	t.Run("found after the anchor only", func(t *testing.T) {
		t.Parallel()
		path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA), user(turnA, "do it"), complete(turnA, "done"))
		a := capture(t, path)
		if got, err := codex.ScanAcceptance(a, req); err != nil || got.Accepted || got.Code != native.CodeNotAccepted {
			t.Fatalf("before sending: %+v, %v; want pending", got, err)
		}
		appendTo(t, path, started(turnB), user("", "<environment_context>x</environment_context>"), user(turnB, "do it"))
		got, err := codex.ScanAcceptance(a, req)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(path)
		want := native.Acceptance{Accepted: true, Code: native.CodeAccepted, TurnID: turnB, ThreadID: thread, AcceptedAt: t0.Add(time.Second), EndOffset: st.Size()}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("turn from the last task_started when the item has none", func(t *testing.T) {
		t.Parallel()
		path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"))
		a := capture(t, path)
		appendTo(t, path, started(turnB), user("", "do it"))
		if got, err := codex.ScanAcceptance(a, req); err != nil || got.TurnID != turnB {
			t.Fatalf("%+v, %v", got, err)
		}
	})
	t.Run("partial last line is pending", func(t *testing.T) {
		t.Parallel()
		path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"))
		a := capture(t, path)
		line := started(turnB)
		appendTo(t, path, line[:20])
		got, err := codex.ScanAcceptance(a, req)
		if err != nil || got.Accepted || got.Code != native.CodePartialRecord || got.EndOffset != a.Offset {
			t.Fatalf("%+v, %v; want pending partial at the anchor", got, err)
		}
	})
	failures := []struct {
		name  string
		lines []string
		code  native.Code
	}{
		{"no task_started of its turn", []string{user(turnB, "do it")}, native.CodeInvalidAcceptance},
		{"task_started of another turn", []string{started(turnA), user(turnB, "do it")}, native.CodeInvalidAcceptance},
		{"two matches", []string{started(turnA), user(turnA, "do it"), started(turnB), user(turnB, "do it")}, native.CodeDuplicateAcceptance},
		{"turn started twice", []string{started(turnB), started(turnB)}, native.CodeInvalidAcceptance},
		{"not JSON", []string{"garbage\n"}, native.CodeInvalidJSONL},
		{"broken JSON", []string{`{"type":"event_msg","payload":{"type":"task_started",}` + "\n"}, native.CodeInvalidJSONL},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"))
			a := capture(t, path)
			appendTo(t, path, tt.lines...)
			_, err := codex.ScanAcceptance(a, req)
			wantCode(t, err, tt.code)
		})
	}
	t.Run("truncated", func(t *testing.T) {
		t.Parallel()
		path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA))
		a := capture(t, path)
		if err := os.Truncate(path, 10); err != nil {
			t.Fatal(err)
		}
		_, err := codex.ScanAcceptance(a, req)
		wantCode(t, err, native.CodeTruncated)
	})
	t.Run("replaced", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := rollout(t, dir, meta(thread, "codex-tui", "cli"))
		a := capture(t, path)
		// The new file is made while the old one exists, so its inode differs.
		fresh := path + ".new"
		if err := os.WriteFile(fresh, []byte(meta(thread, "codex-tui", "cli")+started(turnB)+user(turnB, "do it")), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(fresh, path); err != nil {
			t.Fatal(err)
		}
		_, err := codex.ScanAcceptance(a, req)
		wantCode(t, err, native.CodeIdentityMismatch)
	})
	t.Run("gone", func(t *testing.T) {
		t.Parallel()
		path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"))
		a := capture(t, path)
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		_, err := codex.ScanAcceptance(a, req)
		wantCode(t, err, native.CodeUnreadable)
	})
	t.Run("virgin anchor not bound yet", func(t *testing.T) {
		t.Parallel()
		got, err := codex.ScanAcceptance(codex.VirginAnchor(t0), req)
		if err != nil || got.Code != native.CodeNotMaterialized {
			t.Fatalf("%+v, %v", got, err)
		}
	})
	t.Run("malformed anchor", func(t *testing.T) {
		t.Parallel()
		_, err := codex.ScanAcceptance(codex.Anchor{Mode: "odd", Path: "/x"}, req)
		wantCode(t, err, native.CodeInvalidAnchor)
	})
}

func TestScanCompletion(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", native.MaxText+10)
	tests := []struct {
		name  string
		lines []string
		want  native.Completion
		code  native.Code // failure
	}{
		{"pending", []string{started(turnB), user(turnB, "x")},
			native.Completion{State: native.Pending, Code: native.CodeNotComplete, TurnID: turnB}, ""},
		{"other turn's completion ignored", []string{complete(turnA, "not mine")},
			native.Completion{State: native.Pending, Code: native.CodeNotComplete, TurnID: turnB}, ""},
		{"completed, redacted", []string{complete(strings.ToUpper(turnB), "key sk-abcdefghijklmnopqrstu ok")},
			native.Completion{State: native.Completed, Code: native.CodeCompletionFound, TurnID: turnB, Text: "key [REDACTED] ok", CompletedAt: t0.Add(time.Second)}, ""},
		{"null message is an empty reply", []string{complete(turnB, nil)},
			native.Completion{State: native.Completed, Code: native.CodeCompletionFound, TurnID: turnB, CompletedAt: t0.Add(time.Second)}, ""},
		{"clipped to MaxText characters", []string{complete(turnB, long)},
			native.Completion{State: native.Completed, Code: native.CodeCompletionFound, TurnID: turnB, Text: long[:2*native.MaxText], Truncated: true, CompletedAt: t0.Add(time.Second)}, ""},
		{"aborted", []string{rec("event_msg", map[string]any{"type": "turn_aborted", "turn_id": turnB, "reason": "interrupted"})},
			native.Completion{State: native.Aborted, Code: native.CodeTurnAborted, TurnID: turnB, Reason: "interrupted", CompletedAt: t0.Add(time.Second)}, ""},
		{"two completions", []string{complete(turnB, "a"), complete(turnB, "b")}, native.Completion{}, native.CodeDuplicateCompletion},
		{"completed and aborted", []string{complete(turnB, "a"), rec("event_msg", map[string]any{"type": "turn_aborted", "turn_id": turnB})}, native.Completion{}, native.CodeDuplicateCompletion},
		{"no text field", []string{rec("event_msg", map[string]any{"type": "task_complete", "turn_id": turnB})}, native.Completion{}, native.CodeInvalidCompletion},
		{"bad timestamp", []string{`{"timestamp":"yesterday","type":"event_msg","payload":{"type":"task_complete","turn_id":"` + turnB + `","last_agent_message":"x"}}` + "\n"}, native.Completion{}, native.CodeInvalidCompletion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA), complete(turnA, "old"))
			a := capture(t, path)
			appendTo(t, path, tt.lines...)
			got, err := codex.ScanCompletion(a, turnB)
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
	t.Run("no turn id", func(t *testing.T) {
		t.Parallel()
		_, err := codex.ScanCompletion(codex.Anchor{Mode: codex.Existing, Path: "/x"}, "")
		wantCode(t, err, native.CodeInvalidAnchor)
	})
	t.Run("unbound anchor", func(t *testing.T) {
		t.Parallel()
		_, err := codex.ScanCompletion(codex.VirginAnchor(t0), turnB)
		wantCode(t, err, native.CodeInvalidAnchor)
	})
}

func TestCaptureAnchor(t *testing.T) {
	t.Parallel()
	t.Run("at the end", func(t *testing.T) {
		t.Parallel()
		path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA))
		a := capture(t, path)
		st, _ := os.Stat(path)
		if a.Offset != st.Size() || a.Mode != codex.Existing || !a.FileExisted || a.ThreadID != thread || a.Fingerprint() == "" {
			t.Fatalf("%+v", a)
		}
	})
	refuse := []struct {
		name  string
		setup func(t *testing.T, path string) codex.Rollout
	}{
		{"partial line", func(t *testing.T, path string) codex.Rollout {
			appendTo(t, path, `{"type":`)
			return rootOf(t, path)
		}},
		{"replaced since the inventory", func(t *testing.T, path string) codex.Rollout {
			r := rootOf(t, path)
			r.Ino++
			return r
		}},
		{"group-writable", func(t *testing.T, path string) codex.Rollout {
			if err := os.Chmod(path, 0o620); err != nil {
				t.Fatal(err)
			}
			return rootOf(t, path)
		}},
		{"symbolic link", func(t *testing.T, path string) codex.Rollout {
			r := rootOf(t, path)
			link := path + ".link.jsonl"
			if err := os.Symlink(path, link); err != nil {
				t.Fatal(err)
			}
			r.Path = link
			return r
		}},
	}
	for _, tt := range refuse {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"))
			if a, err := codex.CaptureAnchor(tt.setup(t, path), t0); err == nil {
				t.Fatalf("captured %+v, want an error", a)
			}
		})
	}
}

func TestBind(t *testing.T) {
	t.Parallel()
	path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnB), user(turnB, "do it"))
	r := rootOf(t, path)
	a, err := codex.VirginAnchor(t0).Bind(r)
	if err != nil {
		t.Fatal(err)
	}
	if a.Offset != 0 || a.Path != path || a.ThreadID != thread || !a.Bound() {
		t.Fatalf("%+v", a)
	}
	if got, err := codex.ScanAcceptance(a, request.Hash("do it")); err != nil || got.TurnID != turnB {
		t.Fatalf("acceptance from a bound virgin anchor: %+v, %v", got, err)
	}
	if _, err := a.Bind(r); err == nil {
		t.Error("binding a bound anchor again succeeded")
	}
	if _, err := codex.VirginAnchor(t0.Add(2 * time.Second)).Bind(r); err == nil {
		t.Error("bound a rollout created before the anchor")
	}
	other := codex.VirginAnchor(t0)
	other.ThreadID = turnA
	if _, err := other.Bind(r); err == nil {
		t.Error("bound a rollout of another thread")
	}
}

func TestTakeInventory(t *testing.T) {
	t.Parallel()
	open := func(t *testing.T, path string) codex.OpenFile {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return codex.OpenFile{FD: 30, Path: path, Dev: uint64(st.Dev), Ino: st.Ino}
	}
	write := func(t *testing.T, home, id string, lines ...string) string {
		path := filepath.Join(home, "sessions", "2026", "12", "01", "rollout-2026-12-01T15-04-08-"+id+".jsonl")
		_ = os.MkdirAll(filepath.Dir(path), 0o700)
		if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	other := "01a23222-0000-7000-8000-000000000001"
	child := "01a23222-0000-7000-8000-000000000002"
	t.Run("none open", func(t *testing.T) {
		t.Parallel()
		home := t.TempDir()
		inv, err := codex.TakeInventory(codex.InventoryInput{CodexHome: home, Cwd: cwd, OpenFiles: []codex.OpenFile{{FD: 3, Path: "/dev/null"}}})
		if err != nil || inv.Status != codex.VerifiedAbsent || len(inv.Roots) != 0 || inv.Fingerprint == "" {
			t.Fatalf("%+v, %v", inv, err)
		}
	})
	t.Run("one root, a subagent skipped", func(t *testing.T) {
		t.Parallel()
		home := t.TempDir()
		root := write(t, home, thread, meta(thread, "codex-tui", "cli"))
		sub := write(t, home, child, rec("session_meta", map[string]any{"id": child, "cwd": cwd, "originator": "codex-tui", "source": map[string]any{"subagent": "review"}}))
		inv, err := codex.TakeInventory(codex.InventoryInput{CodexHome: home, Cwd: cwd + "/", OpenFiles: []codex.OpenFile{open(t, root), open(t, sub)}})
		if err != nil || inv.Status != codex.Resolved || len(inv.Roots) != 1 || inv.Roots[0].ThreadID != thread || len(inv.Skipped) != 1 {
			t.Fatalf("%+v, %v", inv, err)
		}
	})
	t.Run("one root open on two descriptors", func(t *testing.T) {
		t.Parallel()
		home := t.TempDir()
		root := write(t, home, thread, meta(thread, "codex-tui", "cli"))
		a, b := open(t, root), open(t, root)
		b.FD++
		inv, err := codex.TakeInventory(codex.InventoryInput{CodexHome: home, Cwd: cwd, OpenFiles: []codex.OpenFile{a, b}})
		if err != nil || inv.Status != codex.Resolved || len(inv.Roots) != 1 {
			t.Fatalf("%+v, %v", inv, err)
		}
	})
	t.Run("two roots", func(t *testing.T) {
		t.Parallel()
		home := t.TempDir()
		a := write(t, home, thread, meta(thread, "codex-tui", "cli"))
		b := write(t, home, other, meta(other, "codex-tui", "cli"))
		inv, err := codex.TakeInventory(codex.InventoryInput{CodexHome: home, Cwd: cwd, OpenFiles: []codex.OpenFile{open(t, b), open(t, a)}})
		if err != nil || inv.Status != codex.Unbound || inv.Reason != codex.ReasonMultipleRoots || len(inv.Roots) != 2 || inv.Roots[0].Path > inv.Roots[1].Path {
			t.Fatalf("%+v, %v", inv, err)
		}
	})
	refuse := []struct {
		name string
		in   func(t *testing.T, home string) codex.InventoryInput
	}{
		{"other cwd", func(t *testing.T, home string) codex.InventoryInput {
			p := write(t, home, thread, meta(thread, "codex-tui", "cli"))
			return codex.InventoryInput{CodexHome: home, Cwd: "/elsewhere", OpenFiles: []codex.OpenFile{open(t, p)}}
		}},
		{"exec rollout", func(t *testing.T, home string) codex.InventoryInput {
			p := write(t, home, thread, meta(thread, "codex_exec", "exec"))
			return codex.InventoryInput{CodexHome: home, Cwd: cwd, OpenFiles: []codex.OpenFile{open(t, p)}}
		}},
		{"one file under two names", func(t *testing.T, home string) codex.InventoryInput {
			p := write(t, home, thread, meta(thread, "codex-tui", "cli"))
			link := filepath.Join(filepath.Dir(p), "rollout-2026-12-01T15-04-09-"+thread+".jsonl")
			if err := os.Link(p, link); err != nil {
				t.Fatal(err)
			}
			return codex.InventoryInput{CodexHome: home, Cwd: cwd, OpenFiles: []codex.OpenFile{open(t, p), open(t, link)}}
		}},
		{"id differs from the name", func(t *testing.T, home string) codex.InventoryInput {
			p := write(t, home, thread, meta(other, "codex-tui", "cli"))
			return codex.InventoryInput{CodexHome: home, Cwd: cwd, OpenFiles: []codex.OpenFile{open(t, p)}}
		}},
		{"deleted", func(t *testing.T, home string) codex.InventoryInput {
			p := write(t, home, thread, meta(thread, "codex-tui", "cli"))
			f := open(t, p)
			f.Path += " (deleted)"
			return codex.InventoryInput{CodexHome: home, Cwd: cwd, OpenFiles: []codex.OpenFile{f}}
		}},
		{"another file at the path", func(t *testing.T, home string) codex.InventoryInput {
			p := write(t, home, thread, meta(thread, "codex-tui", "cli"))
			f := open(t, p)
			f.Ino++
			return codex.InventoryInput{CodexHome: home, Cwd: cwd, OpenFiles: []codex.OpenFile{f}}
		}},
		{"outside sessions", func(t *testing.T, home string) codex.InventoryInput {
			p := filepath.Join(home, "rollout-2026-12-01T15-04-08-"+thread+".jsonl")
			if err := os.WriteFile(p, []byte(meta(thread, "codex-tui", "cli")), 0o600); err != nil {
				t.Fatal(err)
			}
			_ = os.MkdirAll(filepath.Join(home, "sessions"), 0o700)
			return codex.InventoryInput{CodexHome: home, Cwd: cwd, OpenFiles: []codex.OpenFile{open(t, p)}}
		}},
		{"no complete first line", func(t *testing.T, home string) codex.InventoryInput {
			p := write(t, home, thread, `{"type":"session_meta"`)
			return codex.InventoryInput{CodexHome: home, Cwd: cwd, OpenFiles: []codex.OpenFile{open(t, p)}}
		}},
		{"too many", func(t *testing.T, home string) codex.InventoryInput {
			in := codex.InventoryInput{CodexHome: home, Cwd: cwd}
			for i := range codex.MaxOpenRollouts + 1 {
				in.OpenFiles = append(in.OpenFiles, codex.OpenFile{FD: i, Path: fmt.Sprintf("/x/rollout-%d.jsonl", i)})
			}
			return in
		}},
		{"no home", func(t *testing.T, home string) codex.InventoryInput { return codex.InventoryInput{Cwd: cwd} }},
	}
	for _, tt := range refuse {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if inv, err := codex.TakeInventory(tt.in(t, t.TempDir())); err == nil {
				t.Fatalf("inventory %+v, want an error", inv)
			}
		})
	}
}

func TestParseSessionMeta(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{`{"type":"event_msg"}`, `{"type":"session_meta","payload":{}}`, `nope`,
		`{"type":"session_meta","payload":{"id":"x","timestamp":"soon"}}`, `{"type":"session_meta","payload":{"id":"x","source":3}}`} {
		if m, err := codex.ParseSessionMeta([]byte(bad)); err == nil {
			t.Errorf("ParseSessionMeta(%s) = %+v, want an error", bad, m)
		}
	}
	if id := codex.ThreadIDFromName("rollout-2026-12-01T15-04-08-" + strings.ToUpper(thread) + ".jsonl"); id != thread {
		t.Errorf("ThreadIDFromName = %q", id)
	}
	if id := codex.ThreadIDFromName("rollout-x.jsonl"); id != "" {
		t.Errorf("ThreadIDFromName of a name without id = %q", id)
	}
}

func TestTurnsStartedAfter(t *testing.T) {
	t.Parallel()
	path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA), complete(turnA, "x"))
	a := capture(t, path)
	if ids, err := codex.TurnsStartedAfter(a); err != nil || len(ids) != 0 {
		t.Fatalf("%v, %v; want none", ids, err)
	}
	appendTo(t, path, started(turnB), user(turnB, "typed by a human"))
	if ids, err := codex.TurnsStartedAfter(a); err != nil || len(ids) != 1 || ids[0] != turnB {
		t.Fatalf("%v, %v; want [%s]", ids, err, turnB)
	}
	if ids, err := codex.TurnsStartedAfter(codex.VirginAnchor(t0)); err != nil || ids != nil {
		t.Fatalf("virgin: %v, %v", ids, err)
	}
	if err := os.Truncate(path, 3); err != nil {
		t.Fatal(err)
	}
	_, err := codex.TurnsStartedAfter(a)
	wantCode(t, err, native.CodeTruncated)
}

// TestTurnStartedSince resumes one cursor as the rollout grows: records
// written since are read, a record being written is left for later, and
// a found turn, a bad line and a truncation are final answers.
func TestTurnStartedSince(t *testing.T) {
	t.Parallel()
	path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA), complete(turnA, "x"))
	a := capture(t, path)
	c, err := codex.TurnStartedSince(a, native.Cursor{})
	if err != nil || c.Found || c.Offset != a.Offset {
		t.Fatalf("%+v, %v; want nothing found at the anchor", c, err)
	}
	appendTo(t, path, complete(turnA, "more"))
	torn := started(turnB)
	appendTo(t, path, torn[:20])
	c, err = codex.TurnStartedSince(a, c)
	if err != nil || c.Found {
		t.Fatalf("%+v, %v; a record being written is not a turn yet", c, err)
	}
	read := c.Offset
	appendTo(t, path, torn[20:])
	if c, err = codex.TurnStartedSince(a, c); err != nil || !c.Found || c.Offset <= read {
		t.Fatalf("%+v, %v; want the turn found after offset %d", c, err, read)
	}
	if err := os.Truncate(path, 3); err != nil {
		t.Fatal(err)
	}
	if again, err := codex.TurnStartedSince(a, c); err != nil || !again.Found {
		t.Fatalf("a found turn is final: %+v, %v", again, err)
	}

	bad := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"))
	b := capture(t, bad)
	appendTo(t, bad, "this is not json\n")
	c, err = codex.TurnStartedSince(b, native.Cursor{})
	wantCode(t, err, native.CodeInvalidJSONL)
	appendTo(t, bad, started(turnB))
	_, err = codex.TurnStartedSince(b, c)
	wantCode(t, err, native.CodeInvalidJSONL)

	cut := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA))
	d := capture(t, cut)
	c, _ = codex.TurnStartedSince(d, native.Cursor{})
	if err := os.Truncate(cut, 3); err != nil {
		t.Fatal(err)
	}
	_, err = codex.TurnStartedSince(d, c)
	wantCode(t, err, native.CodeTruncated)
}

// FuzzTurnStartedSince checks that the resumable scan, fed the bytes in
// two parts, answers as TurnsStartedAfter does over the whole.
func FuzzTurnStartedSince(f *testing.F) {
	f.Add(started(turnB)+user(turnB, "x"), 10)
	f.Add(rec("event_msg", map[string]any{"type": "user_message"}), 0)
	f.Add("{}\n{\n", 3)
	f.Add("\n\nnot json\n", 4)
	f.Fuzz(func(t *testing.T, tail string, cut int) {
		path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"))
		a := capture(t, path)
		cut = min(max(cut, 0), len(tail))
		appendTo(t, path, tail[:cut])
		c, _ := codex.TurnStartedSince(a, native.Cursor{})
		appendTo(t, path, tail[cut:])
		c, err := codex.TurnStartedSince(a, c)
		ids, werr := codex.TurnsStartedAfter(a)
		var se, wse *native.ScanError
		switch {
		case errors.As(werr, &wse):
			// The whole-file scan stops at the first bad line; the
			// resumed one may have found a turn before it.
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
