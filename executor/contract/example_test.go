package contract_test

import (
	"testing"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/executor/contract"
)

// An adapter's package proves it keeps the executor contract with one test
// that hands the suite a Harness. This one drives the in-memory adapter; a
// harness over a real runtime builds the adapter over its fake or real
// transport, turns the script passed to Start into a prompt for the fake
// model, and leaves Emit nil.
func ExampleRunAdapterContract() {
	testAdapterContract := func(t *testing.T) {
		var cur *contract.InMemoryAdapter
		var key string
		runs := 0
		contract.RunAdapterContract(t, contract.Harness{
			Label: "in-memory",
			New: func(t *testing.T) executor.RuntimeAdapter {
				cur = contract.NewInMemoryAdapter()
				return cur
			},
			Start: func(t *testing.T, a executor.RuntimeAdapter, _ []contract.Frame) (*executor.RunHandle, error) {
				runs++
				key = "contract-" + string(rune('a'+runs))
				return a.Start(t.Context(), executor.Task{}, executor.StartOptions{SessionKey: key, Message: "hi"})
			},
			Emit: func(t *testing.T, f contract.Frame) {
				if err := cur.Inject(key, f); err != nil {
					t.Fatal(err)
				}
			},
			RecordedCalls: func(*testing.T) []contract.RecordedCall { return cur.Calls() },
		})
	}
	_ = testAdapterContract // in a real package: func TestAdapterContract(t *testing.T) { ... }
}
