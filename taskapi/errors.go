package taskapi

import "errors"

// ErrNotFound is matched by the error a task service returns when the job,
// task or session does not exist (or belongs to a scope the caller cannot
// see). The tools turn it into their not-found results; wrap it in a
// NotFoundError to choose the message the model reads.
var ErrNotFound = errors.New("not found")

// NotFoundError is a lookup miss with the message the model reads. It
// matches ErrNotFound.
type NotFoundError struct{ Message string }

// Error returns the model-facing message.
func (e *NotFoundError) Error() string { return e.Message }

// Is matches ErrNotFound.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// The not-found messages. Tasks live in the store and survive restarts, so
// they do not blame a restart: the id is wrong, or the task was swept after
// the retention period.
const (
	MsgJobNotFound       = "Job not found: no task with this jobId is stored. Check the jobId that run_task returned, or call list_tasks."
	MsgSessionJobMissing = "No task found for that session. Check the sessionKey, or call list_tasks."
	MsgTaskNotFound      = "Task not found: no task with this taskId is stored. Check the taskId that run_task returned, or call list_tasks."
	MsgSessionNotFound   = "Session not found."
	MsgCancelNotFound    = "Task not found — nothing to cancel. Check the taskId, or call list_tasks."
	MsgCancelNeedsTarget = "Pass taskId (or sessionKey) to say which task to stop."
	// MsgForeignSession answers a sessionKey of a session another
	// credential started: not found, never forbidden.
	MsgForeignSession = "Session not found. Omit sessionKey to start a fresh thread."
)
