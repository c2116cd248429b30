package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxStdioLineBytes bounds one JSON-RPC message on stdio.
const MaxStdioLineBytes = 16 << 20

// JSON-RPC error codes answered by the stdio guard.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// stdioGuard reads the messages of stdin for the stdio connection. The
// SDK's own stdio transport ends the whole session on a line it cannot
// decode; the guard instead answers such a line itself with a JSON-RPC
// error (parse error or invalid request, id echoed when usable) and passes
// only well-formed messages on, so one bad line from a client never kills
// the server.
//
// At the end of input it waits (up to stdinCloseGrace) until every request
// it passed on has been answered: the SDK cancels what is in flight when
// its input ends, so `echo '<initialize>' | clawconnect mcp` could otherwise
// lose the answer it asked for.
type stdioGuard struct {
	in  *bufio.Reader
	out *lineWriter
}

// stdinCloseGrace bounds how long the end of input waits for the answers
// to requests already read; a long check_task wait is cut at that point.
const stdinCloseGrace = 2 * time.Second

func newStdioGuard(r io.Reader, out *lineWriter) *stdioGuard {
	return &stdioGuard{in: bufio.NewReaderSize(r, 64<<10), out: out}
}

// next returns the next well-formed message of the input, answering the
// malformed lines before it.
func (g *stdioGuard) next() (jsonrpc.Message, error) {
	for {
		line, err := g.readLine()
		if len(line) > 0 {
			reply, msg := checkMessage(line)
			if reply != nil {
				if werr := g.out.reply(reply); werr != nil {
					return nil, werr
				}
			} else if msg != nil {
				if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
					g.out.expect()
				}
				return msg, nil
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				select {
				case <-g.out.answered():
				case <-time.After(stdinCloseGrace):
				}
			}
			return nil, err
		}
	}
}

// stdioTransport is the MCP connection over stdin and stdout, in place of
// the SDK's IOTransport: the guard has decoded every line into its members
// to check it, so the connection builds the message from them. The SDK's
// transport decoded each line three more times (a batch attempt, the
// envelope, the method), each through a decoder that allocates a 32 KiB
// buffer, most of what a run_task + check_task round trip allocated; and
// since a write knows whether it is a response, the count of unanswered
// requests needs no decode of each answer either.
type stdioTransport struct {
	guard *stdioGuard
	out   *lineWriter
	// listens serves the task listens go-sdk cannot (nil: none).
	listens *stdioListens
	// calls answers the direct tool calls past go-sdk (nil: none).
	calls *stdioCalls
}

// Connect implements mcp.Transport; a transport serves one connection.
func (t *stdioTransport) Connect(context.Context) (mcp.Connection, error) {
	c := &stdioConn{out: t.out, incoming: make(chan messageOrErr), closed: make(chan struct{}), listens: t.listens, calls: t.calls}
	// Reads run on a goroutine of their own so that Close unblocks a Read
	// (stdin cannot be interrupted); it ends at the end of input, on a read
	// error, or once the connection is closed. The messages answered
	// outside go-sdk are taken here.
	go func() {
		for {
			msg, err := t.guard.next()
			if err == nil && t.take(msg) {
				continue
			}
			if err != nil && t.calls != nil {
				t.calls.end(true) // as go-sdk cancels its calls when its input ends
			}
			select {
			case c.incoming <- messageOrErr{msg, err}:
			case <-c.closed:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return c, nil
}

// take serves msg outside go-sdk if it is a task listen or a direct tool
// call, and reports whether it did.
func (t *stdioTransport) take(msg jsonrpc.Message) bool {
	if t.listens != nil && t.listens.take(msg) {
		return true
	}
	return t.calls != nil && t.calls.take(msg)
}

type messageOrErr struct {
	msg jsonrpc.Message
	err error
}

// stdioConn is the connection of stdioTransport; the SDK reads from one
// goroutine and writes from many.
type stdioConn struct {
	out       *lineWriter
	incoming  chan messageOrErr
	closed    chan struct{}
	closeOnce sync.Once
	listens   *stdioListens
	calls     *stdioCalls
}

func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case m := <-c.incoming:
		return m.msg, m.err
	case <-c.closed:
		return nil, io.EOF
	}
}

func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	resp, answer := msg.(*jsonrpc.Response)
	if answer && c.calls != nil {
		c.calls.answeredBySDK(resp.ID)
	}
	return c.out.line(data, answer)
}

// Close stops reading; stdin and stdout stay open (the process owns them).
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		if c.listens != nil {
			c.listens.close()
		}
	})
	return nil
}

func (c *stdioConn) SessionID() string { return "" }

// readLine returns the next line without its newline. A line longer than
// MaxStdioLineBytes is discarded up to its newline and answered as an
// invalid request.
func (g *stdioGuard) readLine() ([]byte, error) {
	var line []byte
	for {
		chunk, err := g.in.ReadSlice('\n')
		if len(line)+len(chunk) > MaxStdioLineBytes {
			// The waiting client needs its id back; it usually comes before
			// the large params, so look for it in the line's start.
			head := append(line[:min(len(line), idScanBytes):min(len(line), idScanBytes)], chunk[:min(len(chunk), idScanBytes)]...)
			id := recoverID(head[:min(len(head), idScanBytes)])
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = g.in.ReadSlice('\n')
			}
			if werr := g.out.reply(errorReply(id, codeInvalidRequest, "Invalid Request: message exceeds 16 MiB")); werr != nil {
				return nil, werr
			}
			if err != nil {
				return nil, err
			}
			line = line[:0]
			continue
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimSpace(line), err
	}
}

// idScanBytes is how much of an oversized line's start recoverID reads.
const idScanBytes = 64 << 10

// recoverID returns the "id" of a JSON-RPC object from the start of its
// text, when the id comes before the text is cut off, or nil. It reads the
// top-level members in order and stops at the first one it cannot finish.
func recoverID(head []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(head))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if key, _ := tok.(string); key == "id" {
			var raw json.RawMessage
			if dec.Decode(&raw) != nil || !validID(raw) {
				return nil
			}
			return raw
		}
		if skipValue(dec) != nil {
			return nil
		}
	}
	return nil
}

// skipValue consumes one JSON value from dec.
func skipValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

// checkMessage returns the message of a well-formed JSON-RPC 2.0 line and
// a nil reply, or the error reply to send instead (and no message). A
// response without an id answers nothing and yields neither.
func checkMessage(line []byte) (reply []byte, msg jsonrpc.Message) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		// Unmarshal checks the line whole before it decodes: only a line
		// it refused is scanned again, to tell bad JSON from a non-object.
		if !json.Valid(line) {
			return errorReply(nil, codeParseError, "Parse error"), nil
		}
		return errorReply(nil, codeInvalidRequest, "Invalid Request: expected a JSON-RPC 2.0 object (batches are not supported)"), nil
	}
	raw, idOK := fields["id"]
	if idOK && !validID(raw) {
		return errorReply(nil, codeInvalidRequest, "Invalid Request: id must be a string, a number or null"), nil
	}
	var replyID json.RawMessage
	var id jsonrpc.ID
	if idOK {
		replyID = raw
		var v any // a string, a float64 (validID) or nil, as the SDK decodes ids
		_ = json.Unmarshal(raw, &v)
		id, _ = jsonrpc.MakeID(v)
	}
	var version string
	if json.Unmarshal(fields["jsonrpc"], &version) != nil || version != "2.0" {
		return errorReply(replyID, codeInvalidRequest, `Invalid Request: "jsonrpc" must be "2.0"`), nil
	}
	if m, ok := fields["method"]; ok {
		var method string
		if json.Unmarshal(m, &method) != nil || method == "" {
			return errorReply(replyID, codeInvalidRequest, `Invalid Request: "method" must be a non-empty string`), nil
		}
		p, ok := fields["params"]
		if ok {
			if t := firstByte(p); t != '{' && t != '[' && string(p) != "null" {
				return errorReply(replyID, codeInvalidRequest, `Invalid Request: "params" must be an object`), nil
			}
		}
		return nil, &jsonrpc.Request{ID: id, Method: method, Params: p}
	}
	result, hasResult := fields["result"]
	rawErr, hasError := fields["error"]
	if !idOK || hasResult == hasError {
		return errorReply(replyID, codeInvalidRequest, `Invalid Request: neither a request (method) nor a response (id with result or error)`), nil
	}
	resp := &jsonrpc.Response{ID: id, Result: result}
	if hasError {
		var e jsonrpc.Error
		if firstByte(rawErr) != '{' || json.Unmarshal(rawErr, &e) != nil {
			return errorReply(replyID, codeInvalidRequest, `Invalid Request: "error" must be an object with a numeric "code" and a "message"`), nil
		}
		resp.Result, resp.Error = nil, &e
	}
	if !id.IsValid() {
		return nil, nil
	}
	return nil, resp
}

func firstByte(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// validID reports whether raw is a string, a number or null.
func validID(raw json.RawMessage) bool {
	switch firstByte(raw) {
	case '"', 'n':
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var f float64 // what the SDK decodes a numeric id into
		return json.Unmarshal(raw, &f) == nil
	}
	return false
}

// errorReply is a JSON-RPC error response line.
func errorReply(id json.RawMessage, code int, message string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	data, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, message}})
	return append(data, '\n')
}

// lineWriter serializes whole lines onto w, so the guard's error replies
// never interleave with the SDK's messages, and counts the requests still
// waiting for an answer. It is safe for concurrent use.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte

	unanswered int           // requests passed to the SDK minus responses written
	drained    chan struct{} // closed when unanswered reaches 0 (answered)
}

// reply writes the guard's own answer line (with its newline), which
// answers no request the SDK was given.
func (l *lineWriter) reply(line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.w.Write(line)
	return err
}

// line writes data and a newline in one write; answer counts it as the
// answer to one request.
func (l *lineWriter) line(data []byte, answer bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(append(l.buf[:0], data...), '\n')
	_, err := l.w.Write(l.buf)
	if cap(l.buf) > 64<<10 {
		l.buf = nil // one large answer does not stay resident
	}
	if err != nil {
		return err
	}
	if answer {
		l.settleLocked()
	}
	return nil
}

// answer writes line, which ends in its newline, as the answer to one
// request.
func (l *lineWriter) answer(line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(line); err != nil {
		return err
	}
	l.settleLocked()
	return nil
}

// settle counts a request as answered although nothing was written (a
// listen the client cancelled has no response).
func (l *lineWriter) settle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settleLocked()
}

func (l *lineWriter) settleLocked() {
	if l.unanswered > 0 {
		l.unanswered--
		if l.unanswered == 0 && l.drained != nil {
			close(l.drained)
			l.drained = nil
		}
	}
}

// expect counts one more request to be answered.
func (l *lineWriter) expect() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unanswered++
}

// answered returns a channel closed once every expected request has been
// answered.
func (l *lineWriter) answered() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unanswered <= 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if l.drained == nil {
		l.drained = make(chan struct{})
	}
	return l.drained
}

// toolGate holds tools/list and tools/call of a stdio server until its
// tools are registered, and says when to register them: once its first
// message has been handled. Every other method passes straight through.
// ServeStdio waits for due, registers the tools and closes ready.
type toolGate struct {
	due     chan struct{} // closed once the first message was handled
	dueOnce sync.Once
	ready   chan struct{} // closed by the owner once the tools are registered
}

func newToolGate() *toolGate {
	return &toolGate{due: make(chan struct{}), ready: make(chan struct{})}
}

func (g *toolGate) markDue() { g.dueOnce.Do(func() { close(g.due) }) }

// middleware holds tools/* requests until the tools are registered (or the
// request's context ends), and marks the registration due after the first
// message of any other method has been handled (a tools/* request first
// marks it due at once).
func (g *toolGate) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !strings.HasPrefix(method, "tools/") {
			res, err := next(ctx, method, req)
			g.markDue()
			return res, err
		}
		g.markDue()
		select {
		case <-g.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return next(ctx, method, req)
	}
}
