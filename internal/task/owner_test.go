package task

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
)

// TestSubmitSessionKeyScoped is issue 11 item 4: a caller's sessionKey
// never reaches another agent's namespace. A key of another OpenClaw agent
// is refused with a clear error and nothing is written or sent; a bare key
// is prefixed with this agent's namespace.
func TestSubmitSessionKeyScoped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key, want string // want "" = refused
	}{
		{"agent:other:main", ""},
		{"agent:OTHER:main:thread:x", ""},
		{"Agent:other:main", ""},
		{"agent:mainx:main", ""},
		{"agent:main", ""},
		{"agent::main", ""},
		{"agent:main:", ""},
		{"agent:main:main", "agent:main:main"},
		{"AGENT:Main:proj", "AGENT:Main:proj"},
		{"proj", "agent:main:proj"},
		{"main:thread:x", "agent:main:main:thread:x"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			m := e.manager(nil)
			res, err := m.Submit(t.Context(), SubmitRequest{Task: "x", SessionKey: tt.key})
			if tt.want == "" {
				if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "sessionKey") {
					t.Fatalf("Submit(%q) = %v, want an invalid-input error about sessionKey", tt.key, err)
				}
				if _, err := e.st.GetSession(t.Context(), "main", tt.key); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("a refused key was written: %v", err)
				}
				if n := len(e.gw.started); n != 0 {
					t.Errorf("%d run(s) sent to the gateway for a refused key", n)
				}
				return
			}
			if err != nil {
				t.Fatalf("Submit(%q): %v", tt.key, err)
			}
			if res.SessionKey != tt.want {
				t.Errorf("session key = %q, want %q", res.SessionKey, tt.want)
			}
			e.gw.waitStarted(t, res.JobID)
			e.gw.end(res.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
			await(t, m, res.JobID)
		})
	}
}

// TestSubmitForeignSession is the task-level half of issue 11 item 2: a
// principal cannot post into a session another principal started; the
// refusal reads as not found and comes before the busy guard, so it never
// names the other's job. A caller allowed every session can.
func TestSubmitForeignSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	m := e.manager(nil)
	a, err := m.Submit(t.Context(), SubmitRequest{Task: "alice", Principal: "user:alice"})
	if err != nil {
		t.Fatal(err)
	}
	e.gw.waitStarted(t, a.JobID)
	_, err = m.Submit(t.Context(), SubmitRequest{Task: "bob", SessionKey: a.SessionKey, Principal: "user:bob"})
	if !errors.Is(err, taskapi.ErrNotFound) || strings.Contains(err.Error(), a.JobID) {
		t.Fatalf("bob posting into alice's session = %v, want not found without her job id", err)
	}
	e.gw.end(a.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
	await(t, m, a.JobID)
	for _, p := range []string{"user:bob", "legacy"} {
		if _, err := m.Submit(t.Context(), SubmitRequest{Task: "again", SessionKey: a.SessionKey, Principal: p}); !errors.Is(err, taskapi.ErrNotFound) {
			t.Errorf("principal %q posting into alice's finished session = %v, want not found", p, err)
		}
	}
	got, err := e.st.GetTask(t.Context(), "main", a.JobID)
	if err != nil || got.Principal != "user:alice" {
		t.Fatalf("recorded principal = %+v %v", got, err)
	}
	again, err := m.Submit(t.Context(), SubmitRequest{Task: "alice again", SessionKey: a.SessionKey, Principal: "user:alice"})
	if err != nil {
		t.Fatalf("alice continuing her own session: %v", err)
	}
	e.gw.waitStarted(t, again.JobID)
	e.gw.end(again.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
	await(t, m, again.JobID)
	team, err := m.Submit(t.Context(), SubmitRequest{Task: "team", SessionKey: a.SessionKey, Principal: "user:bob", AnySession: true})
	if err != nil {
		t.Fatalf("team view continuing alice's session: %v", err)
	}
	e.gw.waitStarted(t, team.JobID)
	e.gw.end(team.JobID, Outcome{Status: OutcomeOK, Text: "ok"})
	await(t, m, team.JobID)
}

// TestGatewayDiedMidRunIsAnError is issue 11 item 9: a run that never
// reached a terminal state upstream (no end event in the live window, no
// answer after it) ends as an error saying what happened, not as
// completed_no_summary; a run that did end upstream without text still
// ends completed_no_summary.
func TestGatewayDiedMidRunIsAnError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		gatewayDown bool
		wantWhy     string
	}{
		{"gateway unreachable after the live window", true, "could not be reached"},
		{"gateway back without the run", false, "transcript holds no answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			m := e.manager(func(o *Options) { o.ChatTimeout = 50 * time.Millisecond })
			res, err := m.Submit(t.Context(), SubmitRequest{Task: "x"})
			if err != nil {
				t.Fatal(err)
			}
			e.gw.waitStarted(t, res.JobID)
			if tt.gatewayDown {
				e.gw.mu.Lock()
				e.gw.historyErr = errors.New("dial gateway: connection refused")
				e.gw.mu.Unlock()
			}
			// The run never ends: the live window elapses.
			s := await(t, m, res.JobID)
			if s.Status != "error" || s.TerminalReason != "late-recovery-no-terminal" {
				t.Fatalf("status %s reason %s error %q, want error late-recovery-no-terminal", s.Status, s.TerminalReason, s.Error)
			}
			if !strings.Contains(s.Error, "never reported an end") || !strings.Contains(s.Error, tt.wantWhy) || s.ErrorInfo == nil || s.ErrorInfo.Category != "upstream_lost" {
				t.Errorf("error %q info %+v", s.Error, s.ErrorInfo)
			}
		})
	}
}
