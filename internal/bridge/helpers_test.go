package bridge_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/taskapi"
)

// connect opens an in-memory client session to ms, closed at cleanup.
func connect(t testing.TB, ms *mcp.Server, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := ms.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.Close()
		_ = ss.Wait()
	})
	return cs
}

// call calls a tool and fails the test on a protocol error.
func call(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

// text joins the text content of r.
func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// structured returns r's structured content as a JSON object.
func structured(t testing.TB, r *mcp.CallToolResult) map[string]any {
	t.Helper()
	if r.StructuredContent == nil {
		return nil
	}
	data, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// testRegistry is a three-agent configuration whose gateways are never
// dialled (the fake task service stands in for them).
func testRegistry(t testing.TB) *taskapi.Registry {
	t.Helper()
	r, err := config.ParseRegistry([]byte(`{"default": "alpha", "agents": [
	  {"id": "alpha", "url": "ws://127.0.0.1:1", "password": "p"},
	  {"id": "beta", "url": "ws://127.0.0.1:2", "password": "p"},
	  {"id": "gamma", "url": "ws://127.0.0.1:3", "password": "p"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
