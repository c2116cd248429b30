package termapi_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/termapi"
)

func pane(id, agent, activity string, sendable bool, reason string) termapi.TerminalRow {
	r := termapi.TerminalRow{ID: id, Agent: agent, Cwd: "/w/" + agent, ActivityState: activity, Reason: reason, AvailableActions: []termapi.Action{}}
	if sendable {
		r.AvailableActions = append(r.AvailableActions, termapi.Action{Action: "send", Scope: "terminal_follow_current"})
	}
	return r
}

func TestChooseIdle(t *testing.T) {
	t.Parallel()
	codexIdle := pane("terminal:v2:tmux:codex:a:0.0:1", "codex", "idle", true, "")
	codexIdle2 := pane("terminal:v2:tmux:codex:b:0.0:2", "codex", "idle", true, "")
	codexBusy := pane("terminal:v2:tmux:codex:c:0.0:3", "codex", "working", false, "the agent is working")
	claudeIdle := pane("terminal:v2:tmux:claude:d:0.0:4", "claude", "idle", true, "")
	// Idle on screen but a Turn or typed text blocks the send.
	claudeBlocked := pane("terminal:v2:tmux:claude:e:0.0:5", "claude", "idle", false, "the composer holds unsent text")
	cand := func(r termapi.TerminalRow, reason string) termapi.Candidate {
		return termapi.Candidate{TerminalID: r.ID, Agent: r.Agent, Cwd: r.Cwd, Reason: reason}
	}
	for _, tc := range []struct {
		name  string
		rows  []termapi.TerminalRow
		agent string
		want  string // the chosen pane
		// or the refusal
		eligible   int
		candidates []termapi.Candidate
	}{
		{name: "one idle among busy", rows: []termapi.TerminalRow{codexBusy, codexIdle, claudeBlocked}, want: codexIdle.ID},
		{name: "agent filter picks the one of that kind", rows: []termapi.TerminalRow{codexIdle, claudeIdle}, agent: "claude", want: claudeIdle.ID},
		{name: "two idle refused with both listed", rows: []termapi.TerminalRow{codexIdle, codexBusy, claudeIdle}, eligible: 2,
			candidates: []termapi.Candidate{cand(codexIdle, ""), cand(claudeIdle, "")}},
		{name: "two idle of the asked agent", rows: []termapi.TerminalRow{codexIdle, codexIdle2, claudeIdle}, agent: "codex", eligible: 2,
			candidates: []termapi.Candidate{cand(codexIdle, ""), cand(codexIdle2, "")}},
		{name: "none idle lists every pane with its reason", rows: []termapi.TerminalRow{codexBusy, claudeBlocked},
			candidates: []termapi.Candidate{cand(codexBusy, "the agent is working"), cand(claudeBlocked, "the composer holds unsent text")}},
		{name: "no pane at all", rows: nil},
		{name: "none of the asked agent", rows: []termapi.TerminalRow{codexIdle}, agent: "claude"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := termapi.ChooseIdle(tc.rows, tc.agent)
			if tc.want != "" {
				if err != nil || got.ID != tc.want {
					t.Fatalf("ChooseIdle = %q, %v; want %q", got.ID, err, tc.want)
				}
				return
			}
			var ref *termapi.DelegateRefusal
			if !errors.As(err, &ref) || !errors.Is(err, termapi.ErrRefused) {
				t.Fatalf("ChooseIdle = %q, %v; want a refusal", got.ID, err)
			}
			if ref.Eligible != tc.eligible {
				t.Errorf("eligible = %d, want %d", ref.Eligible, tc.eligible)
			}
			if diff := cmp.Diff(tc.candidates, ref.Candidates); diff != "" {
				t.Errorf("candidates (-want +got):\n%s", diff)
			}
			for _, c := range tc.candidates {
				if !strings.Contains(err.Error(), c.TerminalID) || !strings.Contains(err.Error(), c.Cwd) {
					t.Errorf("the refusal does not name %s in %s: %v", c.TerminalID, c.Cwd, err)
				}
			}
		})
	}
}

// fakeTurns is a Delegator over fixed rows that records the sends.
type fakeTurns struct {
	rows  []termapi.TerminalRow
	sends []termapi.SendRequest
}

func (f *fakeTurns) List(context.Context) (termapi.ListResult, error) {
	return termapi.ListResult{Terminals: f.rows}, nil
}

func (f *fakeTurns) Send(_ context.Context, r termapi.SendRequest) (termapi.SendResult, error) {
	f.sends = append(f.sends, r)
	return termapi.SendResult{TurnID: "turn-1", SubmissionOutcome: termapi.OutcomeAccepted}, nil
}

func TestDelegateSendsToTheOneIdlePane(t *testing.T) {
	t.Parallel()
	idle := pane("terminal:v2:tmux:codex:a:0.0:1", "codex", "idle", true, "")
	f := &fakeTurns{rows: []termapi.TerminalRow{pane("terminal:v2:tmux:claude:b:0.0:2", "claude", "working", false, "busy"), idle}}
	res, row, err := termapi.Delegate(t.Context(), f, "", termapi.SendRequest{Request: "run the tests", OriginSession: "agent:main:s"})
	if err != nil || res.TurnID != "turn-1" || row.ID != idle.ID {
		t.Fatalf("Delegate = %+v, %q, %v", res, row.ID, err)
	}
	want := []termapi.SendRequest{{TerminalID: idle.ID, Request: "run the tests", OriginSession: "agent:main:s"}}
	if diff := cmp.Diff(want, f.sends); diff != "" {
		t.Fatalf("sends (-want +got):\n%s", diff)
	}
}

func TestDelegateRefusesWithoutSending(t *testing.T) {
	t.Parallel()
	two := []termapi.TerminalRow{pane("terminal:v2:tmux:codex:a:0.0:1", "codex", "idle", true, ""),
		pane("terminal:v2:tmux:codex:b:0.0:2", "codex", "idle", true, "")}
	for _, tc := range []struct {
		name  string
		agent string
		req   termapi.SendRequest
		want  error
	}{
		{"several idle panes", "codex", termapi.SendRequest{Request: "x"}, termapi.ErrRefused},
		{"a target given", "", termapi.SendRequest{Request: "x", TerminalID: "terminal:v2:x"}, termapi.ErrBadInput},
		{"an unknown agent", "gemini", termapi.SendRequest{Request: "x"}, termapi.ErrBadInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeTurns{rows: two}
			_, _, err := termapi.Delegate(t.Context(), f, tc.agent, tc.req)
			if !errors.Is(err, tc.want) || len(f.sends) != 0 {
				t.Fatalf("Delegate = %v with %d sends; want %v and none", err, len(f.sends), tc.want)
			}
		})
	}
}

func TestCheckTimeouts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		inact, hard time.Duration
		bad         string // part of the error; "" = accepted
	}{
		{"defaults", 0, 0, ""},
		{"both set", 30 * time.Minute, 2 * time.Hour, ""},
		{"only inactivity", time.Minute, 0, ""},
		{"a week", 0, termapi.MaxTurnTimeout, ""},
		{"negative inactivity", -time.Minute, 0, "inactivity timeout -1m0s is out of range"},
		{"hard over a week", 0, termapi.MaxTurnTimeout + time.Minute, "hard timeout 168h1m0s is out of range"},
		{"inactivity past hard", 2 * time.Hour, time.Hour, "longer than the hard timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := termapi.CheckTimeouts(termapi.SendRequest{InactivityTimeout: tc.inact, HardTimeout: tc.hard})
			if tc.bad == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, termapi.ErrBadInput) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("CheckTimeouts = %v, want bad input with %q", err, tc.bad)
			}
		})
	}
}

func TestShownStatus(t *testing.T) {
	t.Parallel()
	approval := &termapi.Approval{Fingerprint: "fp"}
	for _, tc := range []struct {
		v    termapi.TurnView
		want string
	}{
		{termapi.TurnView{Status: termapi.TurnWaitingForOpenClaw, OriginSession: "agent:main:s", Approval: approval}, "waiting_for_openclaw"},
		{termapi.TurnView{Status: termapi.TurnWaitingForOpenClaw, Approval: approval}, "waiting_for_approval"},
		{termapi.TurnView{Status: termapi.TurnWaitingForOpenClaw}, "waiting_for_answer"},
		{termapi.TurnView{Status: termapi.TurnRunning}, "running"},
	} {
		if got := termapi.ShownStatus(tc.v); got != tc.want {
			t.Errorf("ShownStatus(%+v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
