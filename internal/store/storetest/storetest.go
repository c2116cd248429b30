// Package storetest is the one conformance suite every store.Store
// implementation passes: SQLite always, PostgreSQL when TEST_DATABASE_URL is
// set. Backends call Run from their own tests with a constructor that
// returns a fresh, empty store.
package storetest

import (
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
)

// NewStore returns a fresh, empty store for one test; it registers its own
// cleanup.
type NewStore func(t *testing.T) store.Store

// Task returns a valid running task for tests.
func Task(id, agent, session string, startedAt int64) *store.Task {
	return &store.Task{
		ID: id, Agent: agent, SessionKey: session, Status: store.StatusRunning,
		Prompt:  taskapi.Prompt{Task: "do " + id, Context: "ctx", SenderName: "tester"},
		Message: "msg " + id, StartedAt: startedAt, LastEventAt: startedAt,
		Upstream: "reconnecting", Transcript: "detached", Cancellation: "none",
		Artifacts: taskapi.Artifacts{FilesChanged: []string{}, CommandsRun: []string{}},
	}
}

// Run runs the whole suite.
func Run(t *testing.T, newStore NewStore) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateGetRoundTrip", testRoundTrip},
		{"EveryFieldSurvives", testEveryFieldSurvives},
		{"Scope", testScope},
		{"SessionBusy", testSessionBusy},
		{"ConcurrentSubmitsOneWins", testConcurrentSubmits},
		{"DuplicateID", testDuplicateID},
		{"UpdateCompareAndSet", testUpdateCAS},
		{"TouchPoll", testTouchPoll},
		{"Logs", testLogs},
		{"UpdateWithLogs", testUpdateWithLogs},
		{"ListSessionsPages", testListSessions},
		{"SessionTasksPages", testSessionTasks},
		{"Leases", testLeases},
		{"FencedWrites", testFencedWrites},
		{"ReleaseDeadOwner", testReleaseDeadOwner},
		{"ManyLeases", testManyLeases},
		{"Processes", testProcesses},
		{"Attachments", testAttachments},
		{"Sweep", testSweep},
		{"Principal", testPrincipal},
		{"ListByPrincipal", testListByPrincipal},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(t, newStore(t))
		})
	}
}
