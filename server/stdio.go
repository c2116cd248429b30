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

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxStdioLineBytes bounds one JSON-RPC message on stdio.
const MaxStdioLineBytes = 16 << 20

// JSON-RPC error codes answered by the stdio guard.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// stdioGuard sits between stdin and the SDK's stdio transport. The SDK
// ends the whole session on a line it cannot decode; the guard instead
// answers such a line itself with a JSON-RPC error (parse error or invalid
// request, id echoed when usable) and passes only well-formed messages on,
// so one bad line from a client never kills the server.
//
// At the end of input it waits (up to stdinCloseGrace) until every request
// it passed on has been answered: the SDK cancels what is in flight when
// its input ends, so `echo '<initialize>' | clawconnect mcp` could otherwise
// lose the answer it asked for.
type stdioGuard struct {
	in      *bufio.Reader
	out     *lineWriter
	pending []byte // a valid line (with its newline) not yet read by the SDK
}

// stdinCloseGrace bounds how long the end of input waits for the answers
// to requests already read; a long check_task wait is cut at that point.
const stdinCloseGrace = 2 * time.Second

func newStdioGuard(r io.Reader, out *lineWriter) *stdioGuard {
	return &stdioGuard{in: bufio.NewReaderSize(r, 64<<10), out: out}
}

// Read implements io.Reader.
func (g *stdioGuard) Read(p []byte) (int, error) {
	for len(g.pending) == 0 {
		line, err := g.readLine()
		if len(line) > 0 {
			if reply, request := checkMessage(line); reply != nil {
				if werr := g.out.reply(reply); werr != nil {
					return 0, werr
				}
			} else {
				if request {
					g.out.expect()
				}
				g.pending = append(line, '\n')
			}
		}
		if err != nil && len(g.pending) == 0 {
			if errors.Is(err, io.EOF) {
				select {
				case <-g.out.answered():
				case <-time.After(stdinCloseGrace):
				}
			}
			return 0, err
		}
		if err != nil {
			break
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

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

// checkMessage returns a nil reply for a well-formed JSON-RPC 2.0 message,
// with request set when it is a request (a method and an id) that will be
// answered, or the error reply to send instead.
func checkMessage(line []byte) (reply []byte, request bool) {
	if !json.Valid(line) {
		return errorReply(nil, codeParseError, "Parse error"), false
	}
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(line, &msg); err != nil {
		return errorReply(nil, codeInvalidRequest, "Invalid Request: expected a JSON-RPC 2.0 object (batches are not supported)"), false
	}
	id, idOK := msg["id"]
	if idOK && !validID(id) {
		return errorReply(nil, codeInvalidRequest, "Invalid Request: id must be a string, a number or null"), false
	}
	var replyID json.RawMessage
	if idOK {
		replyID = id
	}
	var version string
	if json.Unmarshal(msg["jsonrpc"], &version) != nil || version != "2.0" {
		return errorReply(replyID, codeInvalidRequest, `Invalid Request: "jsonrpc" must be "2.0"`), false
	}
	if m, ok := msg["method"]; ok {
		var method string
		if json.Unmarshal(m, &method) != nil || method == "" {
			return errorReply(replyID, codeInvalidRequest, `Invalid Request: "method" must be a non-empty string`), false
		}
		if p, ok := msg["params"]; ok {
			if t := firstByte(p); t != '{' && t != '[' && string(p) != "null" {
				return errorReply(replyID, codeInvalidRequest, `Invalid Request: "params" must be an object`), false
			}
		}
		return nil, idOK
	}
	_, hasResult := msg["result"]
	_, hasError := msg["error"]
	if !idOK || hasResult == hasError {
		return errorReply(replyID, codeInvalidRequest, `Invalid Request: neither a request (method) nor a response (id with result or error)`), false
	}
	if hasError && firstByte(msg["error"]) != '{' {
		return errorReply(replyID, codeInvalidRequest, `Invalid Request: "error" must be an object`), false
	}
	return nil, false
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

// Write implements io.Writer for the SDK: complete lines are written at
// once; a partial line waits for its newline. Responses among them count
// as answers.
func (l *lineWriter) Write(p []byte) (int, error) { return l.write(p, true) }

// reply writes the guard's own answer line, which answers no request the
// SDK was given.
func (l *lineWriter) reply(line []byte) error {
	_, err := l.write(line, false)
	return err
}

func (l *lineWriter) write(p []byte, answers bool) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if i := bytes.LastIndexByte(l.buf, '\n'); i >= 0 {
		lines := l.buf[:i+1]
		if _, err := l.w.Write(lines); err != nil {
			return 0, err
		}
		if answers && l.unanswered > 0 {
			for line := range bytes.Lines(lines) {
				if isResponse(line) {
					l.unanswered--
				}
			}
			if l.unanswered <= 0 && l.drained != nil {
				close(l.drained)
				l.drained = nil
			}
		}
		l.buf = append(l.buf[:0], l.buf[i+1:]...)
	}
	return len(p), nil
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

// isResponse reports whether an outgoing line is a response (the SDK's own
// requests and notifications carry a method).
func isResponse(line []byte) bool {
	var msg struct {
		Method *json.RawMessage `json:"method"`
		ID     *json.RawMessage `json:"id"`
	}
	return json.Unmarshal(line, &msg) == nil && msg.Method == nil && msg.ID != nil
}

// Close implements io.Closer; it does not close the underlying writer.
func (l *lineWriter) Close() error { return nil }

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
