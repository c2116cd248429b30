package task

import (
	"context"
	"errors"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
)

// ErrStoreUnavailable is what callers (MCP clients among them) learn when
// the store failed: that it is unavailable and to retry. The failure itself
// (which names the database, its user, host and port) goes to the log only.
var ErrStoreUnavailable = errors.New("the task store is unavailable; retry in a few seconds")

// StoreUnavailableError is a store failure as the manager's callers see it:
// its message says only which operation failed and to retry. It matches
// ErrStoreUnavailable and the cause with errors.Is, without showing the
// cause.
type StoreUnavailableError struct {
	// Op is the operation that failed ("check task").
	Op    string
	cause error
}

// Error names the operation and says to retry.
func (e *StoreUnavailableError) Error() string { return e.Op + ": " + ErrStoreUnavailable.Error() }

// Unwrap returns ErrStoreUnavailable and the hidden cause.
func (e *StoreUnavailableError) Unwrap() []error { return []error{ErrStoreUnavailable, e.cause} }

// hideStoreErr replaces *err, if it is not one of the errors callers are
// meant to read (not found, invalid input, session busy, closed, or any
// error once the caller's ctx ended), by a StoreUnavailableError, and logs
// the original.
func (m *Manager) hideStoreErr(ctx context.Context, op string, err *error) {
	e := *err
	if e == nil || ctx.Err() != nil || errors.Is(e, taskapi.ErrNotFound) || errors.Is(e, ErrInvalidInput) ||
		errors.Is(e, ErrPayloadNotStored) || errors.Is(e, ErrClosed) || errors.Is(e, store.ErrSessionBusy) {
		return
	}
	var hidden *StoreUnavailableError
	if errors.As(e, &hidden) {
		return
	}
	m.o.Logger.Error("task store failed", "op", op, "err", e)
	*err = &StoreUnavailableError{Op: op, cause: e}
}
