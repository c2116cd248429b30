package agentsession

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// InspectFunc reads one session's current state. A nil observation with a
// nil error means "this runtime has no such session" and normalizes to
// unavailable with code session_not_found. It must honour ctx; one that does
// not is abandoned when its deadline passes.
type InspectFunc func(ctx context.Context, ref Ref) (*Observation, error)

// ContinueFunc delivers a follow-up turn to one session. It dispatches the
// turn and does not wait for it to finish.
type ContinueFunc func(ctx context.Context, ref Ref, prompt string) (*Observation, error)

// DetachFunc stops one session in its runtime. It is only reached through an
// explicit, opt-in detach (stopRuntime: true).
type DetachFunc func(ctx context.Context, ref Ref, reason string) (*Observation, error)

// Runtime is what a host registers: an id, a provider and up to three
// callbacks, each addressing one already-known session. Inspect is required;
// a nil Continue or Detach means the operation is unsupported.
type Runtime struct {
	// ID is the runtime's opaque id, [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
	ID string
	// Provider names which agent or model runs inside the runtime's sessions.
	// When set it is authoritative: a dispatched ref always carries it,
	// whatever the marker said. Empty means the runtime binds no provider.
	Provider string
	Inspect  InspectFunc
	Continue ContinueFunc
	Detach   DetachFunc
}

// Capabilities says which operations a runtime supports. It is derived from
// which callbacks were supplied, never declared.
type Capabilities struct {
	Inspect  bool `json:"inspect"`
	Continue bool `json:"continue"`
	Detach   bool `json:"detach"`
}

// Capabilities returns the operations rt supports.
func (rt Runtime) Capabilities() Capabilities {
	return Capabilities{Inspect: rt.Inspect != nil, Continue: rt.Continue != nil, Detach: rt.Detach != nil}
}

// Supports reports whether rt has a callback for op.
func (rt Runtime) Supports(op Op) bool {
	switch op {
	case OpInspect:
		return rt.Inspect != nil
	case OpContinue:
		return rt.Continue != nil
	case OpDetach:
		return rt.Detach != nil
	}
	return false
}

// Registration errors returned by [Registry.Register].
var (
	ErrInvalidRuntimeID = errors.New("invalid runtime id")
	ErrMissingInspect   = errors.New("runtime has no inspect callback")
)

// ErrUnsupportedOperation may be returned (wrapped or not) by a callback to
// say that the runtime does not support the operation after all; dispatch
// then reports code unsupported_operation instead of <op>_failed.
var ErrUnsupportedOperation = errors.New("unsupported operation")

// ValidRuntimeID reports whether id is a valid runtime id:
// [A-Za-z0-9][A-Za-z0-9._-]{0,63}.
func ValidRuntimeID(id string) bool { return validSegment(id, 64) }

// Registry is a host's table of runtimes. It is an instance, never a global,
// so two hosts in one process cannot share a table by accident. The zero
// value is not usable; call [NewRegistry]. A nil *Registry is a valid empty
// registry for every read method and for Dispatch. A Registry is safe for
// concurrent use.
//
// There is no way to list or start sessions through a Registry: only ids of
// runtimes can be listed.
type Registry struct {
	mu       sync.RWMutex
	runtimes map[string]Runtime
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{runtimes: map[string]Runtime{}} }

// Register adds rt, replacing any runtime already registered under the same
// id. It fails with [ErrInvalidRuntimeID] or [ErrMissingInspect] (wrapped)
// and then changes nothing.
func (r *Registry) Register(rt Runtime) error {
	if !ValidRuntimeID(rt.ID) {
		return fmt.Errorf("register runtime %q: %w", rt.ID, ErrInvalidRuntimeID)
	}
	if rt.Inspect == nil {
		return fmt.Errorf("register runtime %q: %w", rt.ID, ErrMissingInspect)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runtimes[rt.ID] = rt
	return nil
}

// Get returns the runtime registered under id.
func (r *Registry) Get(id string) (Runtime, bool) {
	if r == nil {
		return Runtime{}, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	rt, ok := r.runtimes[id]
	return rt, ok
}

// Has reports whether a runtime is registered under id. It is a wiring check.
func (r *Registry) Has(id string) bool {
	_, ok := r.Get(id)
	return ok
}

// IDs returns the registered runtime ids, sorted. It is the only listing the
// registry offers: runtimes, never sessions.
func (r *Registry) IDs() []string {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	ids := make([]string, 0, len(r.runtimes))
	for id := range r.runtimes {
		ids = append(ids, id)
	}
	r.mu.RUnlock()
	slices.Sort(ids)
	return ids
}

// Len returns the number of registered runtimes.
func (r *Registry) Len() int {
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.runtimes)
}
