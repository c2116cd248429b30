package agentsession

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"
)

// DefaultCallTimeout bounds every callback when neither the caller nor the
// host configured a different bound.
const DefaultCallTimeout = 60 * time.Second

// CallTimeoutEnv is the environment variable an operator sets to change the
// default call timeout, in milliseconds. The package never reads it; a
// host's main does and passes the value to [ParseCallTimeout] (clawconnect
// reads it through its settings registry and sets
// [BookOptions].CallTimeout).
const CallTimeoutEnv = "AGENT_SESSION_CALL_TIMEOUT_MS"

// ErrInvalidCallTimeout is returned (wrapped) by [ParseCallTimeout].
var ErrInvalidCallTimeout = errors.New("invalid call timeout")

// ParseCallTimeout reads the value of [CallTimeoutEnv]: a positive integer
// number of milliseconds. An empty value yields [DefaultCallTimeout] and no
// error. Any other value (not a number, zero or negative) also yields
// [DefaultCallTimeout], together with an error the caller should log: an
// operator cannot disable the bound that keeps a hung runtime from wedging a
// task.
func ParseCallTimeout(value string) (time.Duration, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return DefaultCallTimeout, nil
	}
	ms, err := strconv.ParseInt(value, 10, 64)
	if err != nil || ms <= 0 || ms > int64(time.Duration(1<<62)/time.Millisecond) {
		return DefaultCallTimeout, fmt.Errorf("parse %s=%q: %w (want a positive number of milliseconds; using %s)",
			CallTimeoutEnv, value, ErrInvalidCallTimeout, DefaultCallTimeout)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// CallOptions tunes one [Registry.Dispatch].
type CallOptions struct {
	// Timeout bounds the callback. Zero means [DefaultCallTimeout]; a
	// negative value means no bound of its own (ctx's deadline still applies).
	Timeout time.Duration
	// Now is the reconciliation time stamped on the status. Zero means the
	// time Dispatch was called.
	Now time.Time
}

// errCallTimeout is the cause of a call context whose own deadline passed.
var errCallTimeout = errors.New("agent-session call timed out")

// notFoundMessage is the message of a session_not_found error.
const notFoundMessage = "The runtime has no state for this session."

// Dispatch sends exactly one operation to the one session ref names and
// returns its normalized status. It never returns an error and never panics
// on a callback's behalf: every failure is a status with state unavailable,
// an [Error] with a branchable code, and a detail naming the last known state.
//
//   - No runtime registered under ref.Runtime: code unknown_runtime.
//   - The runtime has no callback for the op (or the callback returned
//     [ErrUnsupportedOperation]): code unsupported_operation.
//   - The callback returned an error or panicked: code <op>_failed.
//   - The callback did not answer within the deadline: code <op>_timeout.
//   - A nil observation: code session_not_found.
//   - A reply [CheckObservation] refuses (or a callback error wrapping
//     [ErrInvalidReply]): code <op>_failed, and nothing of the reply kept.
//
// The callback runs under a context merging ctx with the deadline
// (opts.Timeout). A callback that ignores its context is abandoned when the
// deadline passes: Dispatch returns, and the callback's goroutine ends
// whenever the callback returns. The registered provider, when set, replaces
// ref.Provider before the call. Dispatch is safe for concurrent use; a nil
// registry knows no runtime.
func (r *Registry) Dispatch(ctx context.Context, ref Ref, req Request, opts CallOptions) Status {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	op := req.Op
	rt, ok := r.Get(ref.Runtime)
	if !ok {
		return unavailableStatus(ref, now, CodeUnknownRuntime,
			fmt.Sprintf("No runtime registered for \"%s\".", ref.Runtime),
			fmt.Sprintf("This ClawConnect build cannot %s \"%s\" sessions — the session itself may be fine.", op, ref.Runtime))
	}
	if rt.Provider != "" {
		ref.Provider = rt.Provider
	}
	if !rt.Supports(op) {
		return unsupportedStatus(ref, now, op)
	}
	ref.Metadata = maps.Clone(ref.Metadata)

	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultCallTimeout
	}
	budget := timeout
	var callCtx context.Context
	var cancel context.CancelFunc
	if timeout > 0 {
		callCtx, cancel = context.WithTimeoutCause(ctx, timeout, errCallTimeout)
	} else {
		callCtx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	if dl, ok := ctx.Deadline(); ok && (budget < 0 || time.Until(dl) < budget) {
		budget = max(time.Until(dl), 0)
	}

	type result struct {
		obs *Observation
		err error
	}
	done := make(chan result, 1) // buffered: an abandoned callback still finishes
	go func() {
		var res result
		defer func() {
			if p := recover(); p != nil {
				res = result{err: fmt.Errorf("callback panicked: %v", p)}
			}
			done <- res
		}()
		res.obs, res.err = call(callCtx, rt, ref, req)
	}()
	var res result
	select {
	case res = <-done:
	case <-callCtx.Done():
		res = result{err: context.Cause(callCtx)}
	}
	if res.err != nil {
		cause := context.Cause(callCtx)
		dl, hasDeadline := callCtx.Deadline()
		switch {
		// The deadline counts even when its timer has not fired yet: a callback
		// (or a module honouring timeoutMs) may notice it first on a busy machine.
		case errors.Is(cause, errCallTimeout) || errors.Is(cause, context.DeadlineExceeded) ||
			(hasDeadline && !time.Now().Before(dl)):
			return unavailableStatus(ref, now, TimeoutCode(op),
				fmt.Sprintf("No answer within %dms.", budget.Milliseconds()),
				fmt.Sprintf("Runtime \"%s\" did not answer the %s in time and was abandoned — the session itself may be fine.", ref.Runtime, op))
		case errors.Is(res.err, ErrUnsupportedOperation):
			return unsupportedStatus(ref, now, op)
		case errors.Is(res.err, ErrInvalidReply):
			return refusedStatus(ref, now, op, res.err)
		}
		return unavailableStatus(ref, now, FailedCode(op), res.err.Error(),
			fmt.Sprintf("Runtime \"%s\" could not %s this session.", ref.Runtime, op))
	}
	if res.obs == nil {
		res.obs = &Observation{State: string(StateUnavailable),
			Error: &ObservationError{Code: string(CodeSessionNotFound), Message: notFoundMessage}}
	}
	// A reply is untrusted input whichever way it arrived: one that would
	// write an unsafe value or grow the record past its bounds is refused
	// whole, so the record keeps what it had and carries the reason.
	if err := CheckObservation(ref, res.obs); err != nil {
		return refusedStatus(ref, now, op, fmt.Errorf("runtime %s: %w", ref.Runtime, err))
	}
	return Normalize(ref, res.obs, now)
}

// refusedStatus is the status of a reply that [CheckObservation] refused:
// the runtime answered, but nothing it said is taken.
func refusedStatus(ref Ref, now time.Time, op Op, err error) Status {
	return unavailableStatus(ref, now, FailedCode(op), err.Error(),
		fmt.Sprintf("Runtime \"%s\" answered the %s with a reply that was refused; nothing in it was recorded. Fix the runtime so that it answers within the protocol's bounds.", ref.Runtime, op))
}

func call(ctx context.Context, rt Runtime, ref Ref, req Request) (*Observation, error) {
	switch req.Op {
	case OpContinue:
		return rt.Continue(ctx, ref, req.Prompt)
	case OpDetach:
		return rt.Detach(ctx, ref, req.Reason)
	}
	return rt.Inspect(ctx, ref)
}

func unsupportedStatus(ref Ref, now time.Time, op Op) Status {
	return unavailableStatus(ref, now, CodeUnsupportedOperation,
		fmt.Sprintf("Runtime \"%s\" does not support %s.", ref.Runtime, op),
		fmt.Sprintf("Runtime \"%s\" registered no %s callback, so this session cannot be asked to %s.", ref.Runtime, op, op))
}

// unavailableStatus is the status of a read that did not reach the session.
// It carries ref's identity and metadata, and the last known state in its
// detail.
func unavailableStatus(ref Ref, now time.Time, code ErrorCode, message, detail string) Status {
	if ref.LastKnownState != "" {
		detail += " Last reported state: " + string(ref.LastKnownState) + "."
	}
	return Status{
		Runtime:           ref.Runtime,
		Provider:          ref.Provider,
		SessionID:         ref.SessionID,
		ProviderSessionID: ref.ProviderSessionID,
		Host:              ref.Host,
		RemoteURL:         ref.RemoteURL,
		State:             StateUnavailable,
		Error:             &Error{Code: code, Message: message},
		Detail:            detail,
		Metadata:          maps.Clone(ref.Metadata),
		ReconciledAt:      now.UnixMilli(),
	}
}
