package executor

import (
	"fmt"
	"slices"
	"sync"
)

// Registry is the open set of available adapters, keyed by id. It has no
// opinion about which adapters exist; the host registers them at boot. It is
// an instance (never a package global) and safe for concurrent use.
type Registry struct {
	mu    sync.RWMutex
	byID  map[RuntimeID]RuntimeAdapter
	order []RuntimeID
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byID: map[RuntimeID]RuntimeAdapter{}}
}

// Register adds a, replacing any adapter with the same id (which keeps its
// original position in IDs). It fails only for an adapter with an empty id.
func (r *Registry) Register(a RuntimeAdapter) error {
	id := a.ID()
	if id == "" {
		return fmt.Errorf("register adapter: empty runtime id")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byID[id]; !ok {
		r.order = append(r.order, id)
	}
	r.byID[id] = a
	return nil
}

// Unregister removes the adapter with id and reports whether there was one.
func (r *Registry) Unregister(id RuntimeID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byID[id]; !ok {
		return false
	}
	delete(r.byID, id)
	r.order = slices.DeleteFunc(r.order, func(x RuntimeID) bool { return x == id })
	return true
}

// Get returns the adapter with id.
func (r *Registry) Get(id RuntimeID) (RuntimeAdapter, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.byID[id]
	return a, ok
}

// Has reports whether an adapter with id is registered.
func (r *Registry) Has(id RuntimeID) bool {
	_, ok := r.Get(id)
	return ok
}

// IDs returns the registered ids in registration order.
func (r *Registry) IDs() []RuntimeID {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Clone(r.order)
}

// List returns the registered adapters in registration order.
func (r *Registry) List() []RuntimeAdapter {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]RuntimeAdapter, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, r.byID[id])
	}
	return out
}
