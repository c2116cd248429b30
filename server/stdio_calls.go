package server

// Direct tool calls on stdio, past go-sdk's dispatcher. For every request
// go-sdk's jsonrpc2 connection queues it, hands it to a handler goroutine
// of its own, decodes the params' _meta and then the params (each through
// a decoder that allocates 32 KiB), runs the receiving middleware, encodes
// the result and then the response around it: for a run_task +
// check_task round trip, more than half of what the mcp process
// allocated.
//
// stdioCalls answers, from the guard's decoded message, a tools/call that
// the direct calls serve (direct.go) once the session is initialized and
// the tools are registered: its params are a name, plain arguments and at
// most a _meta of scalar values that go-sdk would not read as a request of
// the sessionless protocol. It runs the receiving middleware go-sdk would
// run around the call (see around), on a goroutine of its own as go-sdk
// does (one kept from an earlier call, see warmPool), and writes the
// response encoded once, byte for byte what go-sdk would have written
// (TestStdioCallsAgree). Every other message, and a call whose id go-sdk
// still has in flight, goes to go-sdk as before.
//
// What go-sdk does for a call is kept: notifications/cancelled for its id
// cancels its context (and still reaches go-sdk, which ignores an id it
// does not know); calls run concurrently; a call whose id is already in
// use is dropped; once the input has ended (after the guard's grace) the
// calls still running are cancelled and nothing more is answered, nor
// once ServeStdio's context is done.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callIdle is how long a goroutine that ran a call waits for the next one
// (warmPool): a client's calls come seconds apart while a model works.
const callIdle = 30 * time.Second

// stdioCalls serves the direct calls of one stdio connection. take runs on
// the guard's goroutine; everything else is safe for concurrent use.
type stdioCalls struct {
	c      *conn
	ms     *mcp.Server
	gate   *toolGate
	out    *lineWriter
	base   context.Context // ServeStdio's context without its cancellation
	stopAt func() bool     // stops the context.AfterFunc of ServeStdio's context

	session *mcp.ServerSession // the connection's; set by take once found

	mu      sync.Mutex
	running map[jsonrpc.ID]context.CancelFunc // calls answered here, in flight
	viaSDK  map[jsonrpc.ID]struct{}           // calls handed to go-sdk, not answered yet
	ended   bool                              // no more answers: see end
	calls   *warmPool                         // runs the calls taken
	buffers sync.Pool                         // of *bytes.Buffer, the answers are encoded into
	counted *atomic.Int64                     // counts the calls taken, when set (tests)
}

func newStdioCalls(ctx context.Context, c *conn, ms *mcp.Server, gate *toolGate, out *lineWriter) *stdioCalls {
	f := &stdioCalls{
		c: c, ms: ms, gate: gate, out: out, base: context.WithoutCancel(ctx),
		running: map[jsonrpc.ID]context.CancelFunc{}, viaSDK: map[jsonrpc.ID]struct{}{}, calls: newWarmPool(callIdle),
		buffers: sync.Pool{New: func() any { return new(bytes.Buffer) }},
	}
	// go-sdk writes no answer once its connection is closing, and lets the
	// calls in flight finish; shutdown cancels those left here.
	f.stopAt = context.AfterFunc(ctx, func() { f.end(false) })
	return f
}

// take answers msg here and reports whether it did; a message it does not
// take goes on to go-sdk.
func (f *stdioCalls) take(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return false
	}
	if !req.IsCall() {
		if req.Method == "notifications/cancelled" {
			f.cancelled(req.Params)
		}
		return false
	}
	f.mu.Lock()
	_, inUse := f.running[req.ID]
	f.mu.Unlock()
	if inUse {
		// go-sdk drops a call whose id is in flight, answering nothing;
		// the guard need not wait for its answer at the end of input.
		f.out.settle()
		return true
	}
	call, run := f.prepare(req)
	f.mu.Lock()
	defer f.mu.Unlock()
	_, sdkHas := f.viaSDK[req.ID]
	if run == nil || sdkHas || f.ended {
		f.viaSDK[req.ID] = struct{}{}
		return false
	}
	ctx, cancel := context.WithCancel(f.base)
	f.running[req.ID] = cancel
	if f.counted != nil {
		f.counted.Add(1)
	}
	// Under f.mu, with ended false: shutdown's Wait never runs beside
	// this Go.
	f.calls.Go(func() { f.serve(ctx, req.ID, call, run) })
	return true
}

// prepare returns the call of req and its run when req is one to answer
// here (see the file comment), else nil and nil.
func (f *stdioCalls) prepare(req *jsonrpc.Request) (*mcp.CallToolRequest, directRun) {
	if req.Method != "tools/call" {
		return nil, nil
	}
	select {
	case <-f.gate.ready:
	default:
		return nil, nil // go-sdk's gate holds it until the tools are registered
	}
	if f.session == nil {
		for ss := range f.ms.Sessions() { // one: this connection's
			f.session = ss
		}
	}
	if f.session == nil || f.session.InitializeParams() == nil {
		return nil, nil // go-sdk refuses it before initialize
	}
	params, ok := plainCallParams(req.Params)
	if !ok {
		return nil, nil
	}
	call := f.c.direct.lookup(params.Name)
	if call == nil {
		return nil, nil
	}
	run, ok := call(params.Arguments)
	if !ok {
		return nil, nil
	}
	return &mcp.CallToolRequest{Session: f.session, Params: params}, run
}

// plainCallParams decodes the params of a tools/call when they are a name,
// arguments and at most a _meta whose values are all scalars, none of them
// under the protocol's own prefix (which would make the call one of the
// sessionless protocol, or name the caller's capabilities): what go-sdk
// decodes to the same value. ok is false for anything else.
func plainCallParams(raw json.RawMessage) (p *mcp.CallToolParamsRaw, ok bool) {
	var members map[string]json.RawMessage
	if firstByte(raw) != '{' || json.Unmarshal(raw, &members) != nil {
		return nil, false
	}
	p = &mcp.CallToolParamsRaw{}
	for key, v := range members {
		switch key {
		case "name":
			if firstByte(v) != '"' || json.Unmarshal(v, &p.Name) != nil {
				return nil, false
			}
		case "arguments":
			p.Arguments = v
		case "_meta":
			if firstByte(v) != '{' || json.Unmarshal(v, &p.Meta) != nil {
				return nil, false
			}
			for k, mv := range p.Meta {
				switch mv.(type) {
				case string, float64, bool, nil:
				default:
					return nil, false
				}
				if strings.HasPrefix(k, "io.modelcontextprotocol/") {
					return nil, false
				}
			}
		default:
			return nil, false
		}
	}
	return p, true
}

// around is the receiving middleware that go-sdk runs around a tools/call
// of the stdio connection, outermost first, less the tool gate (the tools
// are registered) and the direct calls' own (h is what it would run). Keep
// it in step with bareMCPServer and ServeStdio.
func (f *stdioCalls) around(h mcp.MethodHandler) mcp.MethodHandler {
	return f.c.s.metrics.middleware(f.c.appMiddleware(f.c.tasksMiddleware(h)))
}

// serve runs one call and writes its answer.
func (f *stdioCalls) serve(ctx context.Context, id jsonrpc.ID, call *mcp.CallToolRequest, run directRun) {
	res, err := f.around(func(ctx context.Context, _ string, req mcp.Request) (mcp.Result, error) {
		r := req.(*mcp.CallToolRequest)
		res, err := run(ctx, r)
		if err != nil {
			return nil, err
		}
		return asGoSDK(r, res), nil
	})(ctx, "tools/call", call)
	f.mu.Lock()
	cancel := f.running[id]
	delete(f.running, id) // before the answer: the client may reuse the id once it has it
	ended := f.ended
	f.mu.Unlock()
	cancel()
	if ended {
		return
	}
	buf := f.buffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 { // one large answer does not stay resident
			buf.Reset()
			f.buffers.Put(buf)
		}
	}()
	if err := appendResponse(buf, id, res, err); err != nil {
		// go-sdk logs a result it cannot encode and answers nothing.
		f.c.s.logger.Error("jsonrpc2 internal error", "error", fmt.Errorf("tools/call returned a malformed result: %w", err))
		f.out.settle()
		return
	}
	if err := f.out.answer(buf.Bytes()); err != nil {
		// Stdout is broken: as go-sdk, cancel every call in flight.
		f.end(true)
	}
}

// cancelled cancels the call that a notifications/cancelled names, if it
// runs here.
func (f *stdioCalls) cancelled(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	f.mu.Lock()
	cancel := f.running[id]
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// answeredBySDK forgets a call go-sdk answers; Write calls it before the
// answer is written, as go-sdk frees the id before writing.
func (f *stdioCalls) answeredBySDK(id jsonrpc.ID) {
	f.mu.Lock()
	delete(f.viaSDK, id)
	f.mu.Unlock()
}

// end stops answering: at the end of input (after the guard's grace) and
// when stdout fails, the calls in flight are cancelled too (cancelRunning),
// as go-sdk cancels its own; when ServeStdio's context ends they run on.
func (f *stdioCalls) end(cancelRunning bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = true
	if cancelRunning {
		for _, cancel := range f.running {
			cancel()
		}
	}
}

// shutdown cancels the calls still running and waits for them to end.
// ServeStdio calls it once go-sdk's session is over.
func (f *stdioCalls) shutdown() {
	f.stopAt()
	f.end(true)
	f.calls.Wait()
	f.calls.Close()
}

// appendResponse appends the JSON-RPC response to id with res or rerr as
// go-sdk's jsonrpc2 connection writes it (the result without HTML
// escaping, the envelope around it), encoding the result once, and a
// newline.
func appendResponse(buf *bytes.Buffer, id jsonrpc.ID, res mcp.Result, rerr error) error {
	if rerr != nil {
		// As go-sdk's connection answers a handler's error.
		if notFound := (&jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}); errors.Is(rerr, notFound) {
			rerr = fmt.Errorf("%w: %q", notFound, "tools/call")
		}
		data, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: rerr})
		if err != nil {
			return err
		}
		buf.Write(data)
		buf.WriteByte('\n')
		return nil
	}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	buf.WriteString(`{"jsonrpc":"2.0","id":`)
	if err := enc.Encode(id.Raw()); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	buf.WriteString(`,"result":`)
	if r, ok := res.(*mcp.CallToolResult); ok {
		if done, err := appendToolResult(buf, r); done || err != nil {
			if err == nil {
				buf.WriteString("}\n")
			}
			return err
		}
	}
	// A tool result marshals itself with json.Marshal, so its bytes are
	// compact and valid already: the encoder would only scan them again.
	if m, ok := res.(json.Marshaler); ok {
		data, err := m.MarshalJSON()
		if err != nil {
			return err
		}
		buf.Write(data)
	} else {
		if err := enc.Encode(res); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1)
	}
	buf.WriteString("}\n")
	return nil
}

// appendToolResult appends r as its marshaling writes it when r's content
// is plain text: each text escaped once and the structured output's bytes
// as the call made them, where the marshaling encodes the output again and
// checks and compacts each content's bytes once more. The members after
// the content (isError, resultType, …) are the marshaling's own, of r with
// no content. It reports false and writes nothing for any other result.
func appendToolResult(buf *bytes.Buffer, r *mcp.CallToolResult) (bool, error) {
	if r.Content == nil {
		return false, nil
	}
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); !ok || t.Meta != nil || t.Annotations != nil {
			return false, nil
		}
	}
	bare := *r
	bare.Content, bare.StructuredContent = nil, nil
	rest, err := bare.MarshalJSON()
	if err != nil {
		return false, err
	}
	const head = `{"content":null`
	if !bytes.HasPrefix(rest, []byte(head)) {
		return false, nil // a _meta comes first
	}
	var sc []byte
	switch v := r.StructuredContent.(type) {
	case nil:
	case structuredJSON:
		sc = v
	default:
		if sc, err = json.Marshal(v); err != nil {
			return false, err
		}
	}
	start := buf.Len()
	buf.WriteString(`{"content":[`)
	for i, c := range r.Content {
		text, err := json.Marshal(c.(*mcp.TextContent).Text)
		if err != nil {
			buf.Truncate(start)
			return false, err
		}
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(`{"type":"text","text":`)
		buf.Write(text)
		buf.WriteByte('}')
	}
	buf.WriteByte(']')
	if sc != nil {
		buf.WriteString(`,"structuredContent":`)
		buf.Write(sc)
	}
	buf.Write(rest[len(head):])
	return true, nil
}
