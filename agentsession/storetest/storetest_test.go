package storetest_test

import (
	"testing"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/agentsession/storetest"
)

func TestMemoryStore(t *testing.T) {
	storetest.Run(t, func(*testing.T) agentsession.Store { return agentsession.NewMemoryStore() }, storetest.Options{})
}

// TestReopenHook runs the restart checks with a "reopen" that keeps the
// same memory store, which is what a durable store must look like.
func TestReopenHook(t *testing.T) {
	storetest.Run(t, func(*testing.T) agentsession.Store { return agentsession.NewMemoryStore() }, storetest.Options{
		Reopen: func(_ *testing.T, s agentsession.Store) agentsession.Store { return s },
	})
}
