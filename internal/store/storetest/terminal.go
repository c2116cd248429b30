package storetest

import (
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// TermSession returns a valid bound Session for tests.
func TermSession(id, thread, terminalKey string) *store.TermSession {
	return &store.TermSession{
		SessionID: id, Agent: "codex", Workspace: "/w", Status: store.SessionBound,
		Lineage: store.Lineage{CreatedBy: "attach"}, CreatedAt: 1000, UpdatedAt: 1000,
		Binding: &store.Binding{
			BindingID: "binding-" + id, Generation: 1, TerminalID: "terminal:v2:tmux:codex:s:0.0:42",
			TerminalKey: terminalKey, NativeThreadID: thread,
			NativeProcess: store.NativeProcess{PID: 42, ProcessBirth: "b1"}, BoundAt: 1000, LastVerifiedAt: 1000,
		},
	}
}

// NewTurn returns a Turn and its prepared dispatch entry for s.
func NewTurn(id string, s *store.TermSession, at int64) store.TurnCreate {
	t := &store.Turn{
		TurnID: id, SessionID: s.SessionID, Agent: s.Agent, Workspace: s.Workspace,
		TerminalBindingID: s.Binding.BindingID, TerminalBindingGeneration: s.Binding.Generation,
		UserRequest: "hello " + id, Status: termapi.TurnCreated, CreatedAt: at, UpdatedAt: at,
		Takeover: store.Takeover{
			TerminalID: s.Binding.TerminalID, TerminalKey: s.Binding.TerminalKey, AgentPID: 42,
			RequestText: "hello " + id, StartedAt: at, InactivityTimeoutMinutes: 60, HardTimeoutMinutes: 720,
			Submission: store.Submission{MessageID: "msg-" + id, MessageType: "task", RequestHash: "h", Status: termapi.DispatchPrepared, PreparedAt: at},
		},
	}
	d := &store.Dispatch{
		TerminalKey: s.Binding.TerminalKey, GenerationID: "gen-" + id, SessionID: s.SessionID, TurnID: id,
		MessageID: "msg-" + id, MessageType: "task", RequestHash: "h", Status: termapi.DispatchPrepared,
		BindingID: s.Binding.BindingID, BindingGeneration: s.Binding.Generation, PreparedAt: at,
	}
	return store.TurnCreate{Turn: t, Dispatch: d, Events: []store.TurnEvent{{TS: at, Type: "terminal_message_submit_prepared"}}}
}

// RunTerminal runs the terminal-record suite.
func RunTerminal(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"SessionRoundTripAndCAS", testSessionCAS},
		{"SessionBindingRules", testBindingRules},
		{"OneSessionPerThread", testOneSessionPerThread},
		{"TurnCreateBlocksSecondSend", testTurnBlocks},
		{"DispatchLedger", testDispatchLedger},
		{"TurnWriteCASAndEvents", testTurnWrite},
		{"TurnEveryFieldSurvives", testTurnEveryField},
		{"TurnPrincipalIsFixed", testTurnPrincipal},
		{"TurnWriteFollowsTheLifecycle", testTurnLifecycle},
		{"CompletionClaimOnce", testCompletionClaim},
		{"SessionSaveJoinsTheTurnWrite", testSessionSaveInTurnWrite},
		{"ConcurrentClaimsOneWins", testConcurrentClaims},
		{"DeadOwnerFreesCallbackAttempts", testDeadOwnerFreesCallbackAttempts},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func mustCreateSession(t *testing.T, s store.TerminalStore, ss *store.TermSession) {
	t.Helper()
	if err := s.CreateTermSession(t.Context(), ss); err != nil {
		t.Fatal(err)
	}
}
