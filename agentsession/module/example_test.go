package module_test

import (
	"context"
	"os"
	"strings"

	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/agentsession/module"
)

// A runtime module in Go is a main that registers its runtime and serves the
// registry on its standard input and output; ClawConnect starts it from
// CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES. Here the host's two requests
// come from a string instead of a pipe.
func ExampleServe() {
	reg := agentsession.NewRegistry()
	err := reg.Register(agentsession.Runtime{
		ID:       "my-runtime",
		Provider: "my-provider",
		Inspect: func(ctx context.Context, ref agentsession.Ref) (*agentsession.Observation, error) {
			if ref.SessionID != "worker-1" {
				return nil, nil // no such session
			}
			return &agentsession.Observation{State: "completed", FinalResponse: "all tests pass"}, nil
		},
	})
	if err != nil {
		panic(err)
	}

	host := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"describe","params":{"protocolVersion":1}}
{"jsonrpc":"2.0","id":2,"method":"inspect","params":{"runtime":"my-runtime","ref":{"runtime":"my-runtime","sessionId":"worker-1"}}}
`)
	if err := module.Serve(context.Background(), reg, host, os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// {"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"runtimes":[{"id":"my-runtime","provider":"my-provider","operations":["inspect"]}]}}
	// {"jsonrpc":"2.0","id":2,"result":{"state":"completed","finalResponse":"all tests pass"}}
}
