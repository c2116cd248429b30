package openclaw

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/executor"
	"github.com/clawconnect/clawconnect/executor/contract"
	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
)

// recordingClient records every call the adapter makes: the side effects
// the contract checks, as the gateway received them.
type recordingClient struct {
	*gateway.Client
	mu    sync.Mutex
	calls []contract.RecordedCall
}

func (r *recordingClient) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	r.mu.Lock()
	r.calls = append(r.calls, contract.RecordedCall{Method: method, Params: params})
	r.mu.Unlock()
	return r.Client.Call(ctx, method, params)
}

func (r *recordingClient) recorded() []contract.RecordedCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]contract.RecordedCall(nil), r.calls...)
}

// promptFor turns a contract script into a prompt for the fake model
// server's trigger words.
func promptFor(script []contract.Frame) string {
	for _, f := range script {
		switch f.Kind {
		case contract.FrameToolCall:
			return "TOOLCALL: echo tool-probe"
		case contract.FrameAborted:
			return "HANG"
		case contract.FrameDelta, contract.FrameFinal, contract.FrameError:
		}
	}
	return "say hello"
}

// TestContractWithRealGateway runs the contract suite against a real
// openclaw@2026.9.6 gateway whose agents talk to the fake model server: a
// turn with text, a tool call, an abort. Gated by CLAWCONNECT_E2E=1.
func TestContractWithRealGateway(t *testing.T) {
	g := realgateway.Shared(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := gateway.Dial(ctx, gateway.Options{URL: g.URL(), Token: g.Token()})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	var rc *recordingClient
	n := 0
	nonce := fmt.Sprintf("%x", time.Now().UnixNano())
	contract.RunAdapterContract(t, contract.Harness{
		Label:   "openclaw real gateway",
		Timeout: 3 * time.Minute,
		// The gateway accepts only agent file names; USER.md does not
		// change how the fake-model agent answers.
		ContextKey: "USER.md",
		New: func(t *testing.T) executor.RuntimeAdapter {
			rc = &recordingClient{Client: c}
			return New(rc, Options{})
		},
		Start: func(t *testing.T, a executor.RuntimeAdapter, script []contract.Frame) (*executor.RunHandle, error) {
			n++
			return a.Start(t.Context(), executor.Task{}, executor.StartOptions{
				SessionKey: fmt.Sprintf("agent:main:contract-%s-%d", nonce, n), Message: promptFor(script),
			})
		},
		RecordedCalls: func(*testing.T) []contract.RecordedCall { return rc.recorded() },
	})
}
