package executor

import "sync/atomic"

// RunHandle identifies one run. AdapterID and SessionKey are fixed at start;
// the run id binds late, usually from the first native frame, and may be
// rebound by runtimes that host successive runs on one session. Every method
// is safe for concurrent use: the event goroutine binds while Abort and the
// session codec read.
type RunHandle struct {
	AdapterID  RuntimeID
	SessionKey string
	runID      atomic.Pointer[string]
}

// NewRunHandle returns a handle with no run id bound.
func NewRunHandle(adapterID RuntimeID, sessionKey string) *RunHandle {
	return &RunHandle{AdapterID: adapterID, SessionKey: sessionKey}
}

// RunID returns the bound run id and whether one is bound.
func (h *RunHandle) RunID() (string, bool) {
	p := h.runID.Load()
	if p == nil {
		return "", false
	}
	return *p, true
}

// RunIDOr returns the bound run id, or fallback when none is bound.
func (h *RunHandle) RunIDOr(fallback string) string {
	if id, ok := h.RunID(); ok {
		return id
	}
	return fallback
}

// BindRunID sets the run id, replacing any bound one.
func (h *RunHandle) BindRunID(id string) { h.runID.Store(&id) }

// BindRunIDOnce sets the run id only when none is bound yet, and reports
// whether it did.
func (h *RunHandle) BindRunIDOnce(id string) bool { return h.runID.CompareAndSwap(nil, &id) }
