package agentsession

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRecover(t *testing.T) {
	const jobStart = 5000
	tests := []struct {
		name        string
		runtime     string // "" registers none
		obs         *Observation
		marker      string // state in the marker
		turn        string // job asking
		want        *Recovery
		wantStatus  AttachmentStatus
		wantErrCode ErrorCode
		wantCalls   int
	}{
		{name: "completed dated answer is recovered", runtime: "rt",
			obs:  &Observation{State: "completed", FinalResponse: "the answer", LastEventAt: Millis(6000)},
			want: &Recovery{Summary: "the answer", AttachmentID: "att-1", ResultSource: "agent-session"}, wantStatus: "completed", wantCalls: 1},
		{name: "answer dated by termination", runtime: "rt",
			obs:  &Observation{State: "idle", LatestResponse: "x", Termination: &ObservationTermination{At: Millis(5000)}},
			want: &Recovery{Summary: "x", AttachmentID: "att-1", ResultSource: "agent-session"}, wantStatus: "idle", wantCalls: 1},
		{name: "undatable answer rejected but recorded", runtime: "rt",
			obs: &Observation{State: "completed", FinalResponse: "a"}, wantStatus: "completed", wantCalls: 1},
		{name: "answer older than the job rejected but recorded", runtime: "rt",
			obs: &Observation{State: "completed", FinalResponse: "a", LastEventAt: Millis(4999)}, wantStatus: "completed", wantCalls: 1},
		{name: "a running session is folded, not an answer", runtime: "rt",
			obs: &Observation{State: "running", FinalResponse: "partial", LastEventAt: Millis(6000)}, wantStatus: "running", wantCalls: 1},
		{name: "a needs_input found by the read becomes visible", runtime: "rt",
			obs: &Observation{State: "needs_input", LatestResponse: "which?"}, wantStatus: "needs_input", wantCalls: 1},
		{name: "a failed read writes its error only", runtime: "rt",
			obs: &Observation{State: "dead", Error: &ObservationError{Message: "boom"}}, wantStatus: "running",
			wantErrCode: CodeRuntimeError, wantCalls: 1},
		{name: "unknown runtime records the code and keeps the status",
			wantStatus: "running", wantErrCode: CodeUnknownRuntime},
		{name: "an earlier turn's attachment never answers", runtime: "rt", turn: "job-other",
			obs: &Observation{State: "completed", FinalResponse: "a", LastEventAt: Millis(6000)}, wantStatus: "running"},
		{name: "blocked on input: not asked", runtime: "rt", marker: "needs_input",
			obs: &Observation{State: "completed", FinalResponse: "a", LastEventAt: Millis(6000)}, wantStatus: "needs_input"},
		{name: "blocked on permission: not asked", runtime: "rt", marker: "needs_permission", wantStatus: "needs_permission"},
		{name: "failed: not asked", runtime: "rt", marker: "failed", wantStatus: "failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			var reg *Registry
			if tc.runtime != "" {
				reg = NewRegistry()
				mustRegister(t, reg, Runtime{ID: tc.runtime, Inspect: func(context.Context, Ref) (*Observation, error) {
					calls++
					return tc.obs, nil
				}})
			}
			bb := newBookBundle(t, reg)
			state := tc.marker
			if state == "" {
				state = "running"
			}
			bb.apply(t, "k", "job1", `<agent-session>{"runtime":"rt","sessionId":"s1","state":"`+state+`"}</agent-session>`)
			turn := tc.turn
			if turn == "" {
				turn = "job1"
			}
			got, err := bb.book.Recover(t.Context(), "k", turn, jobStart)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Recover mismatch (-want +got):\n%s", diff)
			}
			if calls != tc.wantCalls {
				t.Errorf("runtime asked %d times, want %d", calls, tc.wantCalls)
			}
			cur, _ := bb.book.Current(t.Context(), "k")
			if cur.Status != tc.wantStatus {
				t.Errorf("status = %q, want %q", cur.Status, tc.wantStatus)
			}
			var code ErrorCode
			if cur.Error != nil {
				code = cur.Error.Code
			}
			if code != tc.wantErrCode {
				t.Errorf("record error code = %q, want %q", code, tc.wantErrCode)
			}
			if tc.want != nil && (cur.LastResult == nil || cur.LastResult.Summary != tc.want.Summary) {
				t.Errorf("lastResult = %+v", cur.LastResult)
			}
		})
	}
	t.Run("nothing attached", func(t *testing.T) {
		bb := newBookBundle(t, nil)
		if got, err := bb.book.Recover(t.Context(), "k", "j", 0); got != nil || err != nil {
			t.Errorf("Recover = %+v, %v", got, err)
		}
	})
	t.Run("a concurrent newer write wins", func(t *testing.T) {
		reg := NewRegistry()
		var bb *bookBundle
		mustRegister(t, reg, Runtime{ID: "rt", Inspect: func(ctx context.Context, _ Ref) (*Observation, error) {
			// A newer read lands while this one is in flight.
			g, _, _, _ := bb.book.Begin(ctx, "k")
			if ok, _ := bb.book.WriteBack(ctx, "k", g, Status{State: StateNeedsInput}); !ok {
				t.Error("newer write refused")
			}
			return &Observation{State: "completed", FinalResponse: "a", LastEventAt: Millis(6000)}, nil
		}})
		bb = newBookBundle(t, reg)
		bb.apply(t, "k", "job1", markerS1)
		if got, _ := bb.book.Recover(t.Context(), "k", "job1", jobStart); got != nil {
			t.Errorf("stale read recovered %+v", got)
		}
	})
}

func TestBlockedDelegation(t *testing.T) {
	blocked := &Attachment{Runtime: "rt", Handle: "s1", Status: "needs_input", DelegatedTurnID: "job1"}
	full := &Attachment{Runtime: "rt", Handle: "s1", Status: "needs_permission", DelegatedTurnID: "job1",
		LatestResponse: "May I run rm?", RemoteURL: "https://example.test/s1"}
	tests := []struct {
		name    string
		a       *Attachment
		job     string
		running bool
		want    *BlockedDelegation
	}{
		{"terminal form", blocked, "job1", false, &BlockedDelegation{Runtime: "rt", Handle: "s1", State: StateNeedsInput,
			Notice: "This turn produced no result of its own: the delegated session rt/s1 is waiting for input. Answer it through that session — the task is not finished."}},
		{"terminal form with text and url", full, "job1", false, &BlockedDelegation{Runtime: "rt", Handle: "s1",
			State: StateNeedsPermission, RemoteURL: "https://example.test/s1",
			Notice: "This turn produced no result of its own: the delegated session rt/s1 is waiting for permission. It last said: May I run rm? Open it at https://example.test/s1. Answer it through that session — the task is not finished."}},
		{"active form", blocked, "job1", true, &BlockedDelegation{Runtime: "rt", Handle: "s1", State: StateNeedsInput, Active: true,
			Notice: "This task is not progressing: the delegated session rt/s1 is waiting for input. Polling cannot advance it — answer it through that session, then keep polling."}},
		{"another job's delegation", blocked, "job2", false, nil},
		{"not blocked", &Attachment{Runtime: "rt", Handle: "s1", Status: "running", DelegatedTurnID: "job1"}, "job1", false, nil},
		{"superseded", &Attachment{Status: AttachmentSuperseded, DelegatedTurnID: "job1"}, "job1", false, nil},
		{"no attachment", nil, "job1", false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := BlockedDelegationFor(tc.job, tc.running, tc.a)
			var gotp *BlockedDelegation
			if ok {
				gotp = &got
			}
			if diff := cmp.Diff(tc.want, gotp); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if r := DelegateBlockedReason(StateNeedsInput); r != "delegate-blocked:needs_input" || !IsDelegateBlockedReason(r) || IsDelegateBlockedReason("live-final") {
		t.Errorf("terminal reason helpers: %q", r)
	}
	if TerminalReasonRecovery != "agent-session-recovery" {
		t.Errorf("TerminalReasonRecovery = %q", TerminalReasonRecovery)
	}
}

// TestRecoverUndatedCompletedIsRecorded is issue 11 item 13: a module's
// completed observation without lastEventAt does not answer the job (an
// undatable answer may be an earlier turn's), but it is no longer dropped
// without a trace: the record keeps it, dated by the observation time, and
// a warning says why it was not taken.
func TestRecoverUndatedCompletedIsRecorded(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, Runtime{ID: "rt", Inspect: func(context.Context, Ref) (*Observation, error) {
		return &Observation{State: "completed", FinalResponse: "undated answer"}, nil
	}})
	bb := &bookBundle{store: NewMemoryStore(), reg: reg}
	bb.now.Store(7000)
	var logs bytes.Buffer
	b, err := NewBook(t.Context(), bb.store, BookOptions{
		Registry: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Now:   func() time.Time { return time.UnixMilli(bb.now.Load()) },
		NewID: func() string { return fmt.Sprintf("att-%d", bb.ids.Add(1)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	bb.book = b
	bb.apply(t, "k", "job1", markerS1)
	got, err := b.Recover(t.Context(), "k", "job1", 5000)
	if err != nil || got != nil {
		t.Fatalf("Recover = %+v, %v; an undatable answer must not answer the job", got, err)
	}
	cur, _ := b.Current(t.Context(), "k")
	if cur.LastResult == nil || cur.LastResult.Summary != "undated answer" || cur.LastResult.ObservedAt != 7000 {
		t.Errorf("lastResult = %+v, want the answer dated by the observation time 7000", cur.LastResult)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "neither lastEventAt") {
		t.Errorf("no warning says why the answer was ignored:\n%s", logs.String())
	}
}
