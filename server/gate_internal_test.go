package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/internal/config"
)

type echoIn struct {
	Text string `json:"text"`
}

// TestToolGateOverMCP drives a gated server with a real client: initialize
// is answered while the registration is still blocked, and tools/list waits
// for it instead of answering with no tools.
func TestToolGateOverMCP(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ms := mcp.NewServer(&mcp.Implementation{Name: "gate"}, &mcp.ServerOptions{
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		})
		gate := newToolGate()
		release := make(chan struct{})
		registered := make(chan struct{})
		go func() { // what ServeStdio does, held until release
			<-gate.due
			<-release
			mcp.AddTool(ms, &mcp.Tool{Name: "echo", Description: "Echo."}, func(context.Context, *mcp.CallToolRequest, echoIn) (*mcp.CallToolResult, any, error) {
				return textResult("ok"), nil, nil
			})
			close(gate.ready)
			close(registered)
		}()
		ms.AddReceivingMiddleware(gate.middleware)
		st, ct := mcp.NewInMemoryTransports()
		ss, err := ms.Connect(ctx, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "client"}, nil).Connect(ctx, ct, nil)
		if err != nil {
			t.Fatalf("initialize while the tools are not registered: %v", err)
		}
		if caps := cs.InitializeResult().Capabilities; caps.Tools == nil || caps.Tools.ListChanged {
			t.Errorf("initialize capabilities.tools = %+v, want tools without listChanged", caps.Tools)
		}
		<-gate.due // handling initialize made the registration due

		type listed struct {
			names []string
			err   error
		}
		done := make(chan listed, 1)
		go func() {
			res, err := cs.ListTools(ctx, nil)
			var l listed
			l.err = err
			if res != nil {
				for _, tool := range res.Tools {
					l.names = append(l.names, tool.Name)
				}
			}
			done <- l
		}()
		synctest.Wait()
		select {
		case l := <-done:
			t.Fatalf("tools/list answered before the tools were registered: %+v", l)
		default:
		}
		close(release)
		l := <-done
		if l.err != nil {
			t.Fatal(l.err)
		}
		if diff := cmp.Diff([]string{"echo"}, l.names); diff != "" {
			t.Errorf("tools/list (-want +got):\n%s", diff)
		}
		if err := cs.Close(); err != nil {
			t.Error(err)
		}
		_ = ss.Wait()
		<-registered
	})
}

// TestToolGateMiddleware covers the orders a client other than the SDK's
// could use.
func TestToolGateMiddleware(t *testing.T) {
	t.Parallel()
	t.Run("a tools request first makes the registration due and waits for it", func(t *testing.T) {
		gate := newToolGate()
		registered := false
		go func() {
			<-gate.due
			registered = true
			close(gate.ready)
		}()
		var sawRegistered bool
		next := func(context.Context, string, mcp.Request) (mcp.Result, error) {
			sawRegistered = registered // ordered after the write by close(ready)
			return nil, nil
		}
		if _, err := gate.middleware(next)(t.Context(), "tools/call", nil); err != nil {
			t.Fatal(err)
		}
		if !sawRegistered {
			t.Error("tools/call reached the server before the tools were registered")
		}
	})
	t.Run("a waiting tools request ends with its context", func(t *testing.T) {
		gate := newToolGate()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		called := false
		next := func(context.Context, string, mcp.Request) (mcp.Result, error) { called = true; return nil, nil }
		if _, err := gate.middleware(next)(ctx, "tools/list", nil); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if called {
			t.Error("the cancelled request reached the server")
		}
	})
	t.Run("other methods pass, then make the registration due", func(t *testing.T) {
		gate := newToolGate()
		dueDuring := true
		next := func(context.Context, string, mcp.Request) (mcp.Result, error) {
			select {
			case <-gate.due:
			default:
				dueDuring = false
			}
			return nil, nil
		}
		if _, err := gate.middleware(next)(t.Context(), "initialize", nil); err != nil {
			t.Fatal(err)
		}
		if dueDuring {
			t.Error("the registration was due while initialize was being handled")
		}
		select {
		case <-gate.due:
		default:
			t.Error("the registration is not due after initialize")
		}
		if _, err := gate.middleware(next)(t.Context(), "ping", nil); err != nil { // marking due twice is fine
			t.Fatal(err)
		}
	})
}

// startingTasks is a Tasks that records calls of Start; the test never
// calls a tool, so the embedded Tasks stays nil.
type startingTasks struct {
	Tasks
	started chan struct{}
}

func (s *startingTasks) Start() { s.started <- struct{}{} }

// TestServeStdioStartsTasksAfterTools checks the order ServeStdio promises
// a Starter: nothing before the first message, then Start once, after the
// tools are registered (so before tools/list can be answered).
func TestServeStdioStartsTasksAfterTools(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg, err := config.ParseRegistry([]byte(`{"agents":[{"id":"main","url":"ws://127.0.0.1:1","password":"p"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		st := &startingTasks{started: make(chan struct{}, 2)}
		srv, err := New(Options{Tasks: st, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- srv.ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
		synctest.Wait()
		if len(st.started) != 0 {
			t.Fatal("Start was called before any message")
		}
		go func() {
			_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`+"\n"+
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`+"\n")
		}()
		out := bufio.NewReader(outR)
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			var msg struct {
				ID     int `json:"id"`
				Result struct {
					Tools []json.RawMessage `json:"tools"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(line), &msg); err != nil {
				t.Fatalf("%v: %s", err, line)
			}
			if msg.ID == 2 {
				if len(msg.Result.Tools) != 9 {
					t.Errorf("tools/list has %d tools, want 9", len(msg.Result.Tools))
				}
				break
			}
		}
		if len(st.started) != 1 {
			t.Errorf("Start called %d times by the time tools/list was answered, want 1", len(st.started))
		}
		_ = inW.Close()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if len(st.started) != 1 {
			t.Errorf("Start called %d times in all, want 1", len(st.started))
		}
	})
}
