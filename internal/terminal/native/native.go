// Package native is the vocabulary the agents' session-file readers
// (packages codex and claude) report in: acceptance and completion of a
// native turn, the result codes of a scan, and the error that carries a
// failure code. A scan either proves something (accepted, completed,
// aborted), finds nothing yet (pending, with a code saying why), or fails
// with a *ScanError, which callers turn into a persisted diagnostic and never
// into a guess.
package native

import (
	"errors"
	"fmt"
	"time"
)

// MaxText is the most characters of reply text a completion keeps.
const MaxText = 4000

// Code is the result code of a scan.
type Code string

// Result codes. Pending codes say why nothing was found yet; failure codes
// travel in a *ScanError.
const (
	// CodeAccepted: the exact request was found as a native user turn.
	CodeAccepted Code = "agent_accepted"
	// CodeCompletionFound: the exact native turn completed.
	CodeCompletionFound Code = "completion_found"
	// CodeTurnAborted: the exact native turn was interrupted or aborted.
	CodeTurnAborted Code = "turn_aborted"
	// CodeAPIError: the agent's model call failed and ended the turn.
	CodeAPIError Code = "api_error"

	// CodeNotAccepted (pending): the request is not in the file yet.
	CodeNotAccepted Code = "request_not_seen"
	// CodeNotComplete (pending): the turn has no completion record yet.
	CodeNotComplete Code = "exact_turn_not_complete"
	// CodePartialRecord (pending): the file ends in a partial line.
	CodePartialRecord Code = "partial_rollout_record"
	// CodeChangedDuringScan (pending): the file grew while it was read.
	CodeChangedDuringScan Code = "rollout_changed_during_scan"
	// CodeNotMaterialized (pending): the session file does not exist yet.
	CodeNotMaterialized Code = "session_file_not_materialized"

	// CodeInvalidAnchor: the anchor is malformed.
	CodeInvalidAnchor Code = "invalid_anchor"
	// CodeIdentityMismatch: the file at the anchor's path is not the
	// anchored file (other device/inode, other thread or session).
	CodeIdentityMismatch Code = "rollout_identity_mismatch"
	// CodeUnreadable: the file cannot be opened or read, or is not a
	// regular file owned by this user and writable by it alone.
	CodeUnreadable Code = "rollout_unreadable"
	// CodeTruncated: the file is shorter than the anchor's offset.
	CodeTruncated Code = "rollout_truncated"
	// CodeScanLimit: more bytes after the anchor than a scan reads.
	CodeScanLimit Code = "scan_limit_exceeded"
	// CodeInvalidJSONL: a complete line after the anchor is not a JSON
	// object of the expected shape.
	CodeInvalidJSONL Code = "invalid_rollout_jsonl"
	// CodeDuplicateAcceptance: the request matched more than once.
	CodeDuplicateAcceptance Code = "multiple_exact_request_acceptances"
	// CodeInvalidAcceptance: the request matched without the records that
	// must come with it (e.g. no same-turn task_started).
	CodeInvalidAcceptance Code = "invalid_acceptance_evidence"
	// CodeDuplicateCompletion: the turn completed more than once.
	CodeDuplicateCompletion Code = "duplicate_exact_completion"
	// CodeInvalidCompletion: a completion record lacks its text or time.
	CodeInvalidCompletion Code = "invalid_exact_completion"
	// CodeInvalidTranscript: the transcript's records after the prompt do
	// not form the chain a turn must (unlinked or duplicate uuids).
	CodeInvalidTranscript Code = "invalid_transcript_chain"
)

// ErrScan is matched by every *ScanError (errors.Is(err, ErrScan)).
var ErrScan = errors.New("native scan failed")

// ScanError is a scan that failed for a reason that waiting will not fix.
type ScanError struct {
	// Code is the failure code.
	Code Code
	// Path is the session file scanned.
	Path string
	// Detail says what was wrong, for a human.
	Detail string
}

// Error implements error.
func (e *ScanError) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", e.Code, e.Detail)
	}
	return fmt.Sprintf("%s: %s: %s", e.Code, e.Path, e.Detail)
}

// Is makes errors.Is(err, ErrScan) true.
func (e *ScanError) Is(target error) bool { return target == ErrScan }

// Failf returns a *ScanError.
func Failf(code Code, path, format string, args ...any) *ScanError {
	return &ScanError{Code: code, Path: path, Detail: fmt.Sprintf(format, args...)}
}

// Acceptance is the result of an acceptance scan.
type Acceptance struct {
	// Accepted reports that the request was found; otherwise Code says why
	// the scan is still pending.
	Accepted bool `json:"accepted"`
	// Code is CodeAccepted or a pending code.
	Code Code `json:"code"`
	// TurnID is the native id of the accepted turn: Codex's turn_id, or
	// Claude Code's prompt record uuid.
	TurnID string `json:"turn_id,omitempty"`
	// ThreadID is the native thread (Codex) or session (Claude Code) id.
	ThreadID string `json:"thread_id,omitempty"`
	// AcceptedAt is the timestamp of the accepting record.
	AcceptedAt time.Time `json:"accepted_at,omitzero"`
	// EndOffset is how far the file was read (a complete-line boundary).
	EndOffset int64 `json:"end_offset"`
}

// CompletionState is where a native turn stands.
type CompletionState string

// The completion states.
const (
	// Pending: the turn has not ended (or its end is not persisted yet).
	Pending CompletionState = "pending"
	// Completed: the turn ended with a reply.
	Completed CompletionState = "completed"
	// Aborted: the turn was interrupted or aborted (Codex turn_aborted).
	Aborted CompletionState = "aborted"
	// Failed: the turn ended in an error the agent recorded (Claude Code
	// API error).
	Failed CompletionState = "failed"
)

// Completion is the result of a completion scan.
type Completion struct {
	// State is where the turn stands.
	State CompletionState `json:"state"`
	// Code is CodeCompletionFound, CodeTurnAborted, CodeAPIError or a
	// pending code.
	Code Code `json:"code"`
	// TurnID is the native turn scanned for.
	TurnID string `json:"turn_id,omitempty"`
	// Text is the reply (Completed) or the error message (Failed),
	// redacted and at most MaxText characters.
	Text string `json:"text,omitempty"`
	// Truncated reports that Text was cut to MaxText characters.
	Truncated bool `json:"truncated,omitempty"`
	// Reason is the abort reason ("interrupted", …) when Aborted.
	Reason string `json:"reason,omitempty"`
	// CompletedAt is the timestamp of the ending record.
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// EndOffset is how far the file was read (a complete-line boundary).
	EndOffset int64 `json:"end_offset"`
}

// Clip returns s cut to at most MaxText characters (runes) and whether it
// was cut.
func Clip(s string) (string, bool) {
	n := 0
	for i := range s {
		if n == MaxText {
			return s[:i], true
		}
		n++
	}
	return s, false
}
