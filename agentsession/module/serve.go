package module

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
)

// maxRequestBytes bounds one request line read by Serve.
const maxRequestBytes = 4 << 20

// Serve serves reg's runtimes over the runtime-module protocol, reading
// requests from in and writing responses to out, one JSON object per line.
// It is what a Go module's main calls with os.Stdin and os.Stdout.
//
// Each inspect, continue or detach runs on its own goroutine under a
// context carrying the request's timeoutMs deadline, cancelled by a cancel
// notification for its id or when Serve returns. Callbacks are called
// directly (the host normalizes the replies); a callback's error becomes a
// JSON-RPC error whose message the host records, a missing callback or
// [agentsession.ErrUnsupportedOperation] becomes -32601, and a panic in a
// callback is recovered and reported as an error.
//
// Serve returns nil when in reaches end of file, after the in-flight calls
// have answered (each is bounded by its timeoutMs). It returns ctx's error
// when ctx is done, after cancelling and waiting for every in-flight call;
// a Read blocked on in may then remain until in is closed. A write failure
// on out is returned as Serve's error.
func Serve(ctx context.Context, reg *agentsession.Registry, in io.Reader, out io.Writer) error {
	s := &server{reg: reg, out: out, inflight: map[string]context.CancelFunc{}}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		s.wg.Wait()
	}()

	type readResult struct {
		line    []byte
		tooLong bool
		err     error
	}
	lines := make(chan readResult)
	next := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		lr := newLineReader(in, maxRequestBytes)
		for {
			line, tooLong, err := lr.next()
			select {
			case lines <- readResult{line, tooLong, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
			select {
			case <-next:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-lines:
			if r.err != nil {
				<-readerDone
				if !errors.Is(r.err, io.EOF) {
					return fmt.Errorf("read request: %w", r.err)
				}
				s.wg.Wait() // let in-flight calls answer
				return s.writeErr()
			}
			if r.tooLong {
				s.respondError(nil, codeInvalidRequest, fmt.Sprintf("request exceeds %d bytes", maxRequestBytes))
			} else if len(r.line) > 0 {
				s.handle(ctx, r.line)
			}
			if err := s.writeErr(); err != nil {
				return err
			}
			select {
			case next <- struct{}{}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

type server struct {
	reg *agentsession.Registry
	wg  sync.WaitGroup

	outMu  sync.Mutex
	out    io.Writer
	outErr error

	mu       sync.Mutex
	inflight map[string]context.CancelFunc
}

func (s *server) writeErr() error {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.outErr
}

func (s *server) write(m message) {
	m.JSONRPC = "2.0"
	b, err := json.Marshal(m)
	if err != nil {
		b, _ = json.Marshal(message{JSONRPC: "2.0", ID: m.ID, Error: &rpcError{Code: codeCallFailed, Message: "encode result: " + err.Error()}})
	}
	b = append(b, '\n')
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.outErr != nil {
		return
	}
	if _, err := s.out.Write(b); err != nil {
		s.outErr = fmt.Errorf("write response: %w", err)
	}
}

func (s *server) respondError(id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	s.write(message{ID: id, Error: &rpcError{Code: code, Message: msg}})
}

func (s *server) handle(ctx context.Context, line []byte) {
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		s.respondError(nil, codeParseError, "parse error: "+err.Error())
		return
	}
	isNotification := len(m.ID) == 0 || string(m.ID) == "null"
	switch m.Method {
	case methodCancel:
		var p cancelParams
		if json.Unmarshal(m.Params, &p) == nil && len(p.ID) > 0 {
			s.mu.Lock()
			if c := s.inflight[idKey(p.ID)]; c != nil {
				c()
			}
			s.mu.Unlock()
		}
		return
	case methodDescribe:
		if !isNotification {
			s.write(message{ID: m.ID, Result: mustJSON(s.describe())})
		}
		return
	case string(agentsession.OpInspect), string(agentsession.OpContinue), string(agentsession.OpDetach):
		if isNotification {
			return
		}
		var p callParams
		if err := json.Unmarshal(m.Params, &p); err != nil {
			s.respondError(m.ID, codeInvalidParams, "invalid params: "+err.Error())
			return
		}
		rt, ok := s.reg.Get(p.Runtime)
		if !ok {
			s.respondError(m.ID, codeInvalidParams, fmt.Sprintf("unknown runtime %q", p.Runtime))
			return
		}
		op := agentsession.Op(m.Method)
		if !rt.Supports(op) {
			s.respondError(m.ID, codeMethodNotFound, fmt.Sprintf("runtime %q does not support %s", p.Runtime, op))
			return
		}
		callCtx, cancel := context.WithCancel(ctx)
		if p.TimeoutMs > 0 {
			callCtx, cancel = context.WithTimeout(ctx, time.Duration(p.TimeoutMs)*time.Millisecond)
		}
		key := idKey(m.ID)
		s.mu.Lock()
		s.inflight[key] = cancel
		s.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.inflight, key)
				s.mu.Unlock()
				cancel()
			}()
			s.call(callCtx, m.ID, rt, op, p)
		})
	default:
		if !isNotification {
			s.respondError(m.ID, codeMethodNotFound, fmt.Sprintf("method %q not found", m.Method))
		}
	}
}

func (s *server) call(ctx context.Context, id json.RawMessage, rt agentsession.Runtime, op agentsession.Op, p callParams) {
	var (
		obs *agentsession.Observation
		err error
	)
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("callback panicked: %v", r)
			}
		}()
		ref := p.Ref
		ref.Runtime = p.Runtime
		switch op {
		case agentsession.OpContinue:
			obs, err = rt.Continue(ctx, ref, p.Prompt)
		case agentsession.OpDetach:
			obs, err = rt.Detach(ctx, ref, p.Reason)
		default:
			obs, err = rt.Inspect(ctx, ref)
		}
	}()
	switch {
	case errors.Is(err, agentsession.ErrUnsupportedOperation):
		s.respondError(id, codeMethodNotFound, err.Error())
	case err != nil:
		s.respondError(id, codeCallFailed, err.Error())
	case obs == nil:
		s.write(message{ID: id, Result: json.RawMessage("null")})
	default:
		b, err := json.Marshal(obs)
		if err != nil {
			s.respondError(id, codeCallFailed, "encode observation: "+err.Error())
			return
		}
		s.write(message{ID: id, Result: b})
	}
}

func (s *server) describe() describeResult {
	res := describeResult{ProtocolVersion: ProtocolVersion, Runtimes: []describeRuntime{}}
	for _, id := range s.reg.IDs() {
		rt, ok := s.reg.Get(id)
		if !ok {
			continue
		}
		d := describeRuntime{ID: id, Provider: rt.Provider}
		for _, op := range []agentsession.Op{agentsession.OpInspect, agentsession.OpContinue, agentsession.OpDetach} {
			if rt.Supports(op) {
				d.Operations = append(d.Operations, string(op))
			}
		}
		res.Runtimes = append(res.Runtimes, d)
	}
	return res
}

// idKey canonicalizes a JSON-RPC id for map keys (numbers and strings).
func idKey(id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// operationsOf returns the ops a describe entry lists, known ones only.
func operationsOf(names []string) (ops map[agentsession.Op]bool, unknown []string) {
	ops = map[agentsession.Op]bool{}
	for _, n := range names {
		switch op := agentsession.Op(n); op {
		case agentsession.OpInspect, agentsession.OpContinue, agentsession.OpDetach:
			ops[op] = true
		default:
			if !slices.Contains(unknown, n) {
				unknown = append(unknown, n)
			}
		}
	}
	return ops, unknown
}
