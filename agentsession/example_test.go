package agentsession_test

import (
	"context"
	"fmt"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
)

// A host registers its runtime on its own registry instance and dispatches
// one operation to one known session. Unsupported operations and unknown
// runtimes come back as structured unavailability, never as an error.
func Example_registry() {
	reg := agentsession.NewRegistry()
	err := reg.Register(agentsession.Runtime{
		ID:       "example-runtime",
		Provider: "example-provider",
		Inspect: func(ctx context.Context, ref agentsession.Ref) (*agentsession.Observation, error) {
			if ref.SessionID != "s-1" {
				return nil, nil // no such session
			}
			return &agentsession.Observation{State: "done-ish", Alive: agentsession.Bool(true)}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	ref := agentsession.Ref{Runtime: "example-runtime", SessionID: "s-1"}
	opts := agentsession.CallOptions{Timeout: 5 * time.Second}

	st := reg.Dispatch(context.Background(), ref, agentsession.Request{Op: agentsession.OpInspect}, opts)
	fmt.Println(st.State, st.Provider, *st.Alive)

	st = reg.Dispatch(context.Background(), ref, agentsession.Request{Op: agentsession.OpContinue, Prompt: "go on"}, opts)
	fmt.Println(st.State, st.Error.Code)

	ref.Runtime = "not-registered"
	st = reg.Dispatch(context.Background(), ref, agentsession.Request{Op: agentsession.OpInspect}, opts)
	fmt.Println(st.State, st.Error.Code)
	fmt.Println(reg.IDs(), reg.Has("example-runtime"))
	// Output:
	// unknown example-provider true
	// unavailable unsupported_operation
	// unavailable unknown_runtime
	// [example-runtime] true
}

// The handoff rides in run_task's context; the agent sees the context with
// it stripped.
func ExampleParseHandoff() {
	ctx := "Fix the flaky test.\n\n" +
		`<agent-session>{"runtime":"example-runtime","sessionId":"s-1","state":"running"}</agent-session>`
	h := agentsession.ParseHandoff(ctx)
	fmt.Printf("%q\n", h.Text)
	fmt.Println(h.Directive.Op, h.Directive.Runtime, h.Directive.Handle, h.Directive.Status)

	h = agentsession.ParseHandoff("Stop tracking it.\n" +
		`[[clawconnect:agent-session]]{"op":"detach","reason":"done","stopRuntime":"yes"}[[/clawconnect:agent-session]]`)
	fmt.Printf("%q %s stopRuntime=%v\n", h.Text, h.Directive.Op, h.Directive.StopRuntime)

	h = agentsession.ParseHandoff(`Go. [[clawconnect:agent-session]]{"op":"spawn"}[[/clawconnect:agent-session]]`)
	fmt.Printf("%q directive=%v malformed=%v\n", h.Text, h.Directive != nil, h.Err != nil)
	// Output:
	// "Fix the flaky test."
	// attach example-runtime s-1 running
	// "Stop tracking it." detach stopRuntime=false
	// "Go." directive=false malformed=true
}

// The book keeps one current attachment per OpenClaw session key and
// chains replaced records into a lineage.
func ExampleBook() {
	ctx := context.Background()
	book, err := agentsession.NewBook(ctx, agentsession.NewMemoryStore(), agentsession.BookOptions{})
	if err != nil {
		panic(err)
	}
	defer book.Close()
	attach := func(turn, marker string) *agentsession.Attachment {
		a, err := book.Apply(ctx, "agent:main:thread-1", turn, agentsession.ParseHandoff(marker).Directive)
		if err != nil {
			panic(err)
		}
		return a
	}
	first := attach("job-1", `<agent-session>{"runtime":"rt","sessionId":"a"}</agent-session>`)
	again := attach("job-2", `<agent-session>{"runtime":"rt","sessionId":"a"}</agent-session>`)
	next := attach("job-3", `<agent-session>{"runtime":"rt","sessionId":"b"}</agent-session>`)
	lineage, _ := book.Lineage(ctx, "agent:main:thread-1")
	fmt.Println(first.ID == again.ID, again.DelegatedTurnID, next.ReplacesAttachmentID == first.ID)
	for _, a := range lineage {
		fmt.Println(a.Handle, a.Status)
	}
	// Output:
	// true job-2 true
	// a superseded
	// b starting
}
