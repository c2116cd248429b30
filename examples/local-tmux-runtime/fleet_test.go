package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/agentsession/module"
)

var socketSeq atomic.Int64

// privateTmux starts nothing but returns the command prefix of a private
// tmux server for this test; the server is killed at cleanup.
func privateTmux(t *testing.T) []string {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	sock := fmt.Sprintf("cc-fleet-test-%d-%d", os.Getpid(), socketSeq.Add(1))
	prefix := []string{"tmux", "-L", sock, "-f", "/dev/null"}
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", sock, "kill-server").Run() })
	return prefix
}

func tmuxRun(t *testing.T, prefix []string, args ...string) {
	t.Helper()
	out, err := exec.Command(prefix[0], append(append([]string{}, prefix[1:]...), args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
}

// writeSession writes <home>/<handle>/meta.json naming transcriptPath and,
// when lines is not nil, the transcript itself at <home>/<handle>/t.jsonl.
func writeSession(t *testing.T, home, handle, transcriptPath string, lines []string) {
	t.Helper()
	dir := filepath.Join(home, handle)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta := fmt.Sprintf(`{"transcriptPath":%q}`, transcriptPath)
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), []byte(meta), 0o644); err != nil {
		t.Fatal(err)
	}
	if lines != nil {
		if err := os.WriteFile(filepath.Join(dir, "t.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func assistant(ts, text string) string {
	return fmt.Sprintf(`{"type":"assistant","timestamp":%q,"message":{"content":[{"type":"text","text":%q},{"type":"tool_use","name":"x"}]}}`, ts, text)
}

var goodTranscript = []string{
	`{"type":"user","timestamp":"2026-01-01T00:00:00Z","message":{"content":"do it"}}`,
	assistant("2026-01-01T00:00:05Z", "older answer"),
	assistant("2026-01-01T00:01:00.250Z", "  the final answer  "),
	`{"type":"assistant","message":{"content":[{"type":"text","text":"undated newest"}]}}`,
	assistant("not a date", "badly dated"),
	`{"type":"assistant","timestamp":"2026-01-01T00:02:00Z","message":{"content":[{"type":"text","text":"   "}]}}`,
	`{"type":"assistant","timestamp":"2026-01-01T00:02:00Z","message":{"content":"not an array"}}`,
	`{"type":"system","timestamp":"2026-01-01T00:03:00Z"}`,
	`{this line is not json`,
	``,
}

func TestFleetInspect(t *testing.T) {
	tmux := privateTmux(t)
	home := t.TempDir()
	outside := filepath.Join(t.TempDir(), "outside.jsonl")
	if err := os.WriteFile(outside, []byte(assistant("2026-01-01T00:00:00Z", "leaked")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := Fleet{Home: home, Tmux: tmux}

	writeSession(t, home, "ended", "ended/t.jsonl", goodTranscript)
	writeSession(t, home, "live", "live/t.jsonl", goodTranscript)
	writeSession(t, home, "s1", "s1/t.jsonl", goodTranscript) // only s10 is live
	writeSession(t, home, "escape-abs", outside, nil)
	writeSession(t, home, "escape-rel", "../"+filepath.Base(filepath.Dir(outside))+"/outside.jsonl", nil)
	writeSession(t, home, "no-transcript", "no-transcript/missing.jsonl", nil)
	writeSession(t, home, "undatable", "undatable/t.jsonl", []string{`{"type":"assistant","message":{"content":[{"type":"text","text":"x"}]}}`})
	if err := os.MkdirAll(filepath.Join(home, "bad-meta"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "bad-meta", "meta.json"), []byte(`{"transcriptPath":5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(home, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	writeSession(t, home, "escape-link", "link.jsonl", nil)

	tmuxRun(t, tmux, "new-session", "-d", "-s", "live")
	tmuxRun(t, tmux, "new-session", "-d", "-s", "s10")

	completed := &agentsession.Observation{State: "completed", Alive: agentsession.Bool(false),
		FinalResponse: "the final answer", LastEventAt: agentsession.Millis(time.Date(2026, 1, 1, 0, 1, 0, 250e6, time.UTC).UnixMilli())}
	tests := []struct {
		name   string
		handle string
		want   *agentsession.Observation
	}{
		{"a live pane is alive with no state", "live", &agentsession.Observation{Alive: agentsession.Bool(true)}},
		{"an ended pane answers from its transcript", "ended", completed},
		{"a live s10 does not make s1 live", "s1", completed},
		{"an absolute escape is refused", "escape-abs", notAlive()},
		{"a ../ escape is refused", "escape-rel", notAlive()},
		{"a symlink escape is refused", "escape-link", notAlive()},
		{"a missing transcript", "no-transcript", notAlive()},
		{"an undatable answer is skipped", "undatable", notAlive()},
		{"a bad meta.json", "bad-meta", notAlive()},
		{"no meta.json", "nobody", notAlive()},
		{"an unsafe handle", "../ended", notAlive()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := f.Inspect(t.Context(), agentsession.Ref{Runtime: RuntimeID, SessionID: tc.handle})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(agentsession.Stamp{})); diff != "" {
				t.Errorf("Inspect(%s) mismatch (-want +got):\n%s", tc.handle, diff)
			}
		})
	}
	t.Run("the pane ending flips the answer", func(t *testing.T) {
		tmuxRun(t, tmux, "kill-session", "-t", "=live")
		got, _ := f.Inspect(t.Context(), agentsession.Ref{SessionID: "live"})
		if diff := cmp.Diff(completed, got, cmp.AllowUnexported(agentsession.Stamp{})); diff != "" {
			t.Errorf("mismatch (-want +got):\n%s", diff)
		}
	})
}

func TestFleetInspectNeverExecsForBadInput(t *testing.T) {
	f := Fleet{Home: t.TempDir(), Tmux: []string{filepath.Join(t.TempDir(), "no-tmux-here")}}
	for _, h := range []string{"", "a/b", "..", ".hidden", strings.Repeat("a", 129)} {
		got, err := f.Inspect(t.Context(), agentsession.Ref{SessionID: h})
		if err != nil || got.Alive == nil || *got.Alive {
			t.Errorf("Inspect(%q) = %+v, %v", h, got, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got, err := f.Inspect(ctx, agentsession.Ref{SessionID: "ok"}); err != nil || *got.Alive {
		t.Errorf("aborted Inspect = %+v, %v", got, err)
	}
	// A valid handle with no tmux to ask is a failed read, not a dead session.
	if _, err := f.Inspect(t.Context(), agentsession.Ref{SessionID: "ok"}); err == nil {
		t.Error("Inspect without tmux succeeded")
	}
}

func TestReadTail(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t")
	if err := os.WriteFile(p, []byte("first line\nsecond\nthird\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readTail(p, 10)
	if err != nil || string(got) != "third\n" {
		t.Errorf("readTail = %q, %v", got, err)
	}
	if _, err := readTail(filepath.Join(t.TempDir(), "none"), 10); err == nil {
		t.Error("readTail of a missing file succeeded")
	}
}

// TestModuleEndToEnd builds the example, loads it the way an operator
// would (a module list entry with arguments), and reads an ended pane's
// answer through the host's registry.
func TestModuleEndToEnd(t *testing.T) {
	tmux := privateTmux(t)
	bin := moduleBinary(t)
	home := t.TempDir()
	writeSession(t, home, "worker-1", "worker-1/t.jsonl", goodTranscript)
	tmuxRun(t, tmux, "new-session", "-d", "-s", "worker-2")

	reg := agentsession.NewRegistry()
	spec := fmt.Sprintf("%s -fleet-home %s -tmux-socket %s", bin, home, tmux[2])
	l := module.Load(t.Context(), spec, reg, module.LoadOptions{})
	defer l.Close()
	if diff := cmp.Diff([]string{RuntimeID}, l.Runtimes()); diff != "" {
		t.Fatalf("runtimes (-want +got):\n%s", diff)
	}
	rt, _ := reg.Get(RuntimeID)
	if diff := cmp.Diff(agentsession.Capabilities{Inspect: true}, rt.Capabilities()); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
	now := time.Now()
	inspect := func(handle string) agentsession.Status {
		return reg.Dispatch(t.Context(), agentsession.Ref{Runtime: RuntimeID, SessionID: handle},
			agentsession.Request{Op: agentsession.OpInspect}, agentsession.CallOptions{Timeout: 20 * time.Second, Now: now})
	}
	ignore := cmpopts.IgnoreFields(agentsession.Status{}, "ReconciledAt")
	want := agentsession.Status{Runtime: RuntimeID, Provider: Provider, SessionID: "worker-1", State: "completed",
		Alive: agentsession.Bool(false), FinalResponse: "the final answer", LastEventAt: 1767225660250,
		Termination: &agentsession.Termination{Reason: "completed", At: 1767225660250}}
	if diff := cmp.Diff(want, inspect("worker-1"), ignore); diff != "" {
		t.Errorf("ended pane (-want +got):\n%s", diff)
	}
	live := inspect("worker-2")
	if live.State != agentsession.StateUnknown || live.Alive == nil || !*live.Alive || live.FinalResponse != "" {
		t.Errorf("live pane: %+v", live)
	}
	st := reg.Dispatch(t.Context(), agentsession.Ref{Runtime: RuntimeID, SessionID: "worker-1"},
		agentsession.Request{Op: agentsession.OpContinue, Prompt: "more"}, agentsession.CallOptions{})
	if st.Error == nil || st.Error.Code != agentsession.CodeUnsupportedOperation {
		t.Errorf("continue: %+v", st)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	if err := run(t.Context(), []string{"-no-such-flag"}); err == nil {
		t.Error("run accepted an unknown flag")
	}
}

// TestTier3RecoveryThroughModule is the seam-level form of the issue's
// acceptance check: a task whose context carries a marker for a claude-fleet
// session, and whose parent turn ended with no text, is answered from the
// ended pane's transcript with resultSource "agent-session"; with no module
// configured the same read records unknown_runtime, keeps the status, and
// answers nothing (the task completes on its own terms).
func TestTier3RecoveryThroughModule(t *testing.T) {
	tmux := privateTmux(t)
	bin := moduleBinary(t)
	home := t.TempDir()
	writeSession(t, home, "worker-1", "worker-1/t.jsonl", goodTranscript)
	jobStarted := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC).UnixMilli()
	taskContext := "Summarize the run.\n" + `<agent-session>{"runtime":"` + RuntimeID + `","sessionId":"worker-1","state":"running"}</agent-session>`

	for _, tc := range []struct {
		name    string
		spec    string
		want    *agentsession.Recovery
		code    agentsession.ErrorCode
		summary string
	}{
		{name: "module configured", spec: fmt.Sprintf("%s -fleet-home %s -tmux-socket %s", bin, home, tmux[2]),
			want: &agentsession.Recovery{Summary: "the final answer", ResultSource: agentsession.ResultSourceAgentSession}},
		{name: "variable unset", spec: "", code: agentsession.CodeUnknownRuntime},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := agentsession.NewRegistry()
			l := module.Load(t.Context(), tc.spec, reg, module.LoadOptions{})
			defer l.Close()
			book, err := agentsession.NewBook(t.Context(), agentsession.NewMemoryStore(), agentsession.BookOptions{Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			defer book.Close()
			h := agentsession.ParseHandoff(taskContext)
			if h.Text != "Summarize the run." {
				t.Errorf("agent sees %q", h.Text)
			}
			att, err := book.Apply(t.Context(), "agent:main:t1", "job-1", h.Directive)
			if err != nil {
				t.Fatal(err)
			}
			got, err := book.Recover(t.Context(), "agent:main:t1", "job-1", jobStarted)
			if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil {
				tc.want.AttachmentID = att.ID
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Recover mismatch (-want +got):\n%s", diff)
			}
			cur, _ := book.Current(t.Context(), "agent:main:t1")
			if tc.code != "" {
				if cur.Error == nil || cur.Error.Code != tc.code || cur.Status != "running" {
					t.Errorf("record after an unknown-runtime read: %+v", cur)
				}
			} else if cur.Status != "completed" || cur.LastResult == nil || cur.Error != nil {
				t.Errorf("record after recovery: %+v", cur)
			}
		})
	}
}
