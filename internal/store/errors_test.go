package store_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/taskapi"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestErrNotFoundIsThePublicMisses: a store miss, wrapped on its way out,
// reads as the miss of either public API, and nothing else does.
func TestErrNotFoundIsThePublicMisses(t *testing.T) {
	t.Parallel()
	miss := fmt.Errorf("get turn: %w", store.ErrNotFound)
	for _, target := range []error{store.ErrNotFound, taskapi.ErrNotFound, termapi.ErrNotFound} {
		if !errors.Is(miss, target) {
			t.Errorf("errors.Is(%v, %v) = false, want true", miss, target)
		}
	}
	if errors.Is(store.ErrConflict, taskapi.ErrNotFound) || errors.Is(store.ErrConflict, termapi.ErrNotFound) {
		t.Error("ErrConflict reads as a miss")
	}
	if errors.Is(taskapi.ErrNotFound, store.ErrNotFound) {
		t.Error("a public miss reads as a store miss: a caller would take any lookup miss for a missing record")
	}
}
