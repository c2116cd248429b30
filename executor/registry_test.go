package executor

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// stubAdapter is just enough of a RuntimeAdapter for registry tests.
type stubAdapter struct {
	RuntimeAdapter // nil: calling anything else panics, which is the point
	id             RuntimeID
	caps           Capabilities
}

func (s stubAdapter) ID() RuntimeID                 { return s.id }
func (s stubAdapter) Capabilities() Capabilities    { return s.caps }
func (s stubAdapter) Health(context.Context) Health { return Health{OK: true} }

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	for _, id := range []RuntimeID{"codex", "openclaw", "my-runtime"} {
		if err := r.Register(stubAdapter{id: id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Register(stubAdapter{id: "codex", caps: Capabilities{Streaming: true}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(stubAdapter{}); err == nil {
		t.Error("Register with an empty id = nil error, want one")
	}
	if diff := cmp.Diff([]RuntimeID{"codex", "openclaw", "my-runtime"}, r.IDs()); diff != "" {
		t.Errorf("IDs (-want +got):\n%s", diff)
	}
	a, ok := r.Get("codex")
	if !ok || !a.Capabilities().Streaming {
		t.Errorf("Get(codex) = %v, %v; want the replacing adapter", a, ok)
	}
	if !r.Unregister("openclaw") || r.Unregister("openclaw") {
		t.Error("Unregister should succeed once")
	}
	if r.Has("openclaw") || !r.Has("my-runtime") {
		t.Error("Has disagrees with the registered set")
	}
	var ids []RuntimeID
	for _, a := range r.List() {
		ids = append(ids, a.ID())
	}
	if diff := cmp.Diff([]RuntimeID{"codex", "my-runtime"}, ids); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}
