package executor_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/executor/contract"
)

// A host registers the adapters it has at boot, starts a run on one by id
// and reads the run's normalized events until the done event. The in-memory
// adapter stands in for Claude Code, Codex or OpenClaw: their events have
// the same kinds and fields.
func Example() {
	ctx := context.Background()
	reg := executor.NewRegistry()
	runtime := contract.NewInMemoryAdapter()
	if err := reg.Register(runtime); err != nil {
		panic(err)
	}

	a, _ := reg.Get(runtime.ID())
	run, err := a.Start(ctx, executor.Task{}, executor.StartOptions{SessionKey: "review-42", Message: "Review the diff"})
	if err != nil {
		panic(err)
	}
	events, err := a.Events(ctx, run)
	if err != nil {
		panic(err)
	}
	defer events.Close()

	// What the runtime would produce by itself.
	_ = runtime.Inject("review-42", contract.Delta("Looks good"))
	_ = runtime.Inject("review-42", contract.Final("Looks good"))

	evs, err := executor.CollectUntilDone(ctx, events, 0)
	if err != nil {
		panic(err)
	}
	for _, ev := range evs {
		payload, _ := json.Marshal(ev.Payload)
		fmt.Println(ev.Seq, ev.Kind(), string(payload))
	}
	// Output:
	// 1 text-delta {"text":"Looks good","channel":"assistant"}
	// 2 done {"reason":"success","summary":"Looks good"}
}
