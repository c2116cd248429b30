package task

import "github.com/clawconnect/clawconnect/taskapi"

// The wire types of the task tools' results are declared in the public
// taskapi package, so that a host's own task service returns the very
// types the manager returns; the aliases keep this package's names.

// LogEntry is taskapi.LogEntry.
type LogEntry = taskapi.LogEntry

// NextAction is taskapi.NextAction.
type NextAction = taskapi.NextAction

// NextActionArgs is taskapi.NextActionArgs.
type NextActionArgs = taskapi.NextActionArgs

// Artifacts is taskapi.Artifacts.
type Artifacts = taskapi.Artifacts

// ErrorInfo is taskapi.ErrorInfo.
type ErrorInfo = taskapi.ErrorInfo

// Recovery is taskapi.Recovery.
type Recovery = taskapi.Recovery

// Liveness is taskapi.Liveness.
type Liveness = taskapi.Liveness

// Prompt is taskapi.Prompt.
type Prompt = taskapi.Prompt

// ContinuationState is taskapi.ContinuationState.
type ContinuationState = taskapi.ContinuationState

// BlockedDelegation is taskapi.BlockedDelegation.
type BlockedDelegation = taskapi.BlockedDelegation

// Snapshot is taskapi.Snapshot.
type Snapshot = taskapi.Snapshot

// Diagnostics is taskapi.Diagnostics.
type Diagnostics = taskapi.Diagnostics

// Detail is taskapi.Detail.
type Detail = taskapi.Detail

// TaskDetail is taskapi.TaskDetail.
type TaskDetail = taskapi.TaskDetail

// PromptResult is taskapi.PromptResult.
type PromptResult = taskapi.PromptResult

// TaskStatus is taskapi.TaskStatus.
type TaskStatus = taskapi.TaskStatus

// TaskSummary is taskapi.TaskSummary.
type TaskSummary = taskapi.TaskSummary

// ListView is taskapi.ListView.
type ListView = taskapi.ListView

// SessionMode is taskapi.SessionMode.
type SessionMode = taskapi.SessionMode

// SessionResult is taskapi.SessionResult.
type SessionResult = taskapi.SessionResult

// SessionList is taskapi.SessionList.
type SessionList = taskapi.SessionList

// RunResult is taskapi.RunResult.
type RunResult = taskapi.RunResult

// CancelResult is taskapi.CancelResult.
type CancelResult = taskapi.CancelResult

// The presets, statuses, views and modes of taskapi.
const (
	DetailCore                = taskapi.DetailCore
	DetailSummary             = taskapi.DetailSummary
	DetailUpdates             = taskapi.DetailUpdates
	DetailArtifacts           = taskapi.DetailArtifacts
	DetailDiagnostics         = taskapi.DetailDiagnostics
	DetailPrompt              = taskapi.DetailPrompt
	DetailFull                = taskapi.DetailFull
	DetailFullWithDiagnostics = taskapi.DetailFullWithDiagnostics
	TaskQueued                = taskapi.TaskQueued
	TaskRunning               = taskapi.TaskRunning
	TaskDone                  = taskapi.TaskDone
	TaskFailed                = taskapi.TaskFailed
	TaskBlocked               = taskapi.TaskBlocked
	TaskNeedsHuman            = taskapi.TaskNeedsHuman
	TaskCancelled             = taskapi.TaskCancelled
	ViewActive                = taskapi.ViewActive
	ViewAll                   = taskapi.ViewAll
	ModeSnapshot              = taskapi.ModeSnapshot
	ModeEvents                = taskapi.ModeEvents
	ModeTail                  = taskapi.ModeTail
	ModeTasks                 = taskapi.ModeTasks
)
