package server

// Direct tool calls. go-sdk's typed tool wrapper (mcp.AddTool) decodes a
// call's arguments into a map, validates and re-encodes them, decodes them
// again into the input struct, then encodes the output, decodes it, validates
// it and encodes it once more: five JSON passes, three of them through a
// decoder that allocates 32 KiB each, for a check_task whose arguments are a
// job id and a wait. That was a fifth of the CPU an mcp process spent per
// run_task + check_task round trip.
//
// The tools stay registered with mcp.AddTool (tools/list and every refusal
// are go-sdk's), and a middleware placed innermost answers the calls whose
// arguments are plain: an object of the schema's own properties, each a
// string (one of its enum, if any), an integer that float64 holds exactly, a
// number or a boolean, every required one present. Such a call is decoded
// once into the input struct, the handler runs, and its output is encoded
// once. Everything else (a missing or null argument, an unknown or
// differently cased name, a wrong type, an enum miss, invalid UTF-8, an
// integer of 16 digits or more) goes on to go-sdk's wrapper, which answers
// it exactly as before. directCallsAgree (direct_test.go) and
// FuzzDirectArgs hold the two paths to the same input and result. On
// stdio, such a call does not reach go-sdk's dispatcher at all
// (stdio_calls.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolHandler is a tool's handler: registered with go-sdk, and called
// directly for plain arguments.
type toolHandler interface {
	add(s *mcp.Server, t *mcp.Tool)
	// direct returns the direct call of t, or nil when t's input schema
	// is not one plainArgs can check.
	direct(t *mcp.Tool) directCall
}

// directCall decodes the arguments of a tools/call when they are plain and
// returns the call to run; ok is false (and nothing ran) when they are not.
type directCall func(args json.RawMessage) (run directRun, ok bool)

// directRun runs a call whose arguments were decoded: the handler, and
// what go-sdk's typed wrapper does with its return values (asGoSDK does
// what callTool adds).
type directRun func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error)

// typed is a typed tool handler whose output go-sdk encodes as the
// structured content.
type typed[In any] func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, any, error)

func (h typed[In]) add(s *mcp.Server, t *mcp.Tool) {
	mcp.AddTool(s, t, mcp.ToolHandlerFor[In, any](h))
}

func (h typed[In]) direct(t *mcp.Tool) directCall {
	args := plainArgsOf(t.InputSchema)
	if args == nil {
		return nil
	}
	objectOut := false
	if s, ok := t.OutputSchema.(*jsonschema.Schema); ok && s != nil {
		objectOut = s.Type == "object"
	}
	return func(raw json.RawMessage) (directRun, bool) {
		var in In
		if !args.plain(raw) || json.Unmarshal(raw, &in) != nil {
			return nil, false
		}
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, out, err := h(ctx, req, in)
			// From here on, what go-sdk's wrapper and callTool do with a
			// handler's return values.
			if err != nil {
				if wire, ok := err.(*jsonrpc.Error); ok {
					return nil, wire
				}
				var r mcp.CallToolResult
				r.SetError(err)
				return &r, nil
			}
			if res == nil {
				res = &mcp.CallToolResult{}
			}
			if out != nil {
				data, err := json.Marshal(out)
				if err != nil {
					return nil, fmt.Errorf("marshaling output: %w", err)
				}
				if objectOut && string(data) == "null" {
					data = []byte("{}")
				}
				res.StructuredContent = structuredJSON(data)
				if res.Content == nil {
					res.Content = []mcp.Content{&mcp.TextContent{Text: string(data)}}
				} else if data[0] != '{' {
					res.Content = append(res.Content, &mcp.TextContent{Text: string(data)})
				}
			}
			return res, nil
		}, true
	}
}

// structuredJSON is a tool's structured output as the bytes made of it
// for its text: the stdio answer writes them as they are
// (appendToolResult), where the result's marshaling would encode the
// output again. Anything else that marshals it gets the same bytes.
type structuredJSON []byte

func (s structuredJSON) MarshalJSON() ([]byte, error) { return s, nil }

// plainArgs is what a tool's input schema allows when it is simple enough
// to check by hand: an object with no other members than its properties.
type plainArgs struct {
	props    map[string]plainProp
	required []string
}

type plainProp struct {
	typ  string   // string, integer, number or boolean
	enum []string // for a string, the values allowed; nil allows all
}

// plainArgsOf returns the check of schema, or nil when schema asks for
// more than plainArgs checks (a default, a pattern, a bound, a nested
// object, a type list, members beyond its properties, …).
func plainArgsOf(schema any) *plainArgs {
	s, ok := schema.(*jsonschema.Schema)
	if !ok || s == nil || s.Type != "object" || !closed(s.AdditionalProperties) {
		return nil
	}
	rest := *s
	rest.Type, rest.Description, rest.Properties, rest.Required, rest.AdditionalProperties = "", "", nil, nil, nil
	if !emptySchema(&rest) {
		return nil
	}
	a := &plainArgs{props: make(map[string]plainProp, len(s.Properties)), required: s.Required}
	for name, p := range s.Properties {
		if p == nil {
			return nil
		}
		pp := plainProp{typ: p.Type}
		rest := *p
		rest.Type, rest.Description, rest.Enum = "", "", nil
		if !emptySchema(&rest) {
			return nil
		}
		switch p.Type {
		case "string":
			for _, v := range p.Enum {
				str, ok := v.(string)
				if !ok {
					return nil
				}
				pp.enum = append(pp.enum, str)
			}
		case "integer", "number", "boolean":
			if p.Enum != nil {
				return nil
			}
		default:
			return nil
		}
		a.props[name] = pp
	}
	for _, name := range s.Required {
		if _, ok := a.props[name]; !ok {
			return nil
		}
	}
	return a
}

// closed reports whether s is the schema that allows nothing ({"not": {}},
// what go-sdk's inference gives a struct's additionalProperties).
func closed(s *jsonschema.Schema) bool {
	if s == nil || s.Not == nil || !emptySchema(s.Not) {
		return false
	}
	rest := *s
	rest.Not = nil
	return emptySchema(&rest)
}

// emptySchema reports whether s constrains nothing.
func emptySchema(s *jsonschema.Schema) bool {
	data, err := json.Marshal(s)
	return err == nil && (string(data) == "true" || string(data) == "{}")
}

// plain reports whether raw is an object that the schema accepts and
// that go-sdk's wrapper would hand to the handler as decoding it once
// does (see the file comment).
func (a *plainArgs) plain(raw json.RawMessage) bool {
	if len(raw) == 0 || !utf8.Valid(raw) {
		return false
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil || members == nil {
		return false
	}
	for name, v := range members {
		p, ok := a.props[name]
		if !ok || !p.accepts(v) {
			return false
		}
	}
	for _, name := range a.required {
		if _, ok := members[name]; !ok {
			return false
		}
	}
	return true
}

// maxPlainDigits bounds a plain integer: go-sdk's wrapper passes an
// integer through a float64, which holds every integer of up to 15 digits.
const maxPlainDigits = 15

func (p plainProp) accepts(v json.RawMessage) bool {
	if len(v) == 0 {
		return false
	}
	switch p.typ {
	case "string":
		if v[0] != '"' {
			return false
		}
		if p.enum == nil {
			return true
		}
		var s string
		return json.Unmarshal(v, &s) == nil && slices.Contains(p.enum, s)
	case "integer":
		digits := bytes.TrimPrefix(v, []byte("-"))
		if len(digits) == 0 || len(digits) > maxPlainDigits || (digits[0] == '0' && len(v) > 1) {
			return false // "-0", "007" and long ones go the long way
		}
		for _, c := range digits {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	case "number":
		return v[0] == '-' || (v[0] >= '0' && v[0] <= '9')
	case "boolean":
		return string(v) == "true" || string(v) == "false"
	}
	return false
}

// directCalls serves the direct calls of a connection's tools: the
// innermost receiving middleware of its MCP server, so every other
// middleware sees a direct call as it sees one go-sdk answers.
type directCalls struct {
	calls atomic.Pointer[map[string]directCall] // set by register
}

func (d *directCalls) set(defs []toolDef) {
	calls := make(map[string]directCall, len(defs))
	for _, def := range defs {
		if call := def.handler.direct(def.tool); call != nil {
			calls[def.tool.Name] = call
		}
	}
	d.calls.Store(&calls)
}

// lookup returns the direct call of the tool named name, or nil.
func (d *directCalls) lookup(name string) directCall {
	calls := d.calls.Load()
	if calls == nil {
		return nil
	}
	return (*calls)[name]
}

func (d *directCalls) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		r, ok := req.(*mcp.CallToolRequest)
		if !ok || r.Params == nil {
			return next(ctx, method, req)
		}
		call := d.lookup(r.Params.Name)
		if call == nil {
			return next(ctx, method, req)
		}
		run, ok := call(r.Params.Arguments)
		if !ok {
			return next(ctx, method, req)
		}
		res, err := run(ctx, r)
		if err != nil {
			return nil, err
		}
		return asGoSDK(r, res), nil
	}
}

// asGoSDK returns res as go-sdk's callTool would send it to the caller of
// req: marked "complete" (resultType) for a session of protocol 2026-07-28
// or later (or one that never initialized: go-sdk takes the latest), and
// with content [] rather than null. The mark is unexported, so a marked
// result starts from a copy of one decoded with it.
func asGoSDK(req *mcp.CallToolRequest, res *mcp.CallToolResult) *mcp.CallToolResult {
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	if req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil && p.ProtocolVersion < tasksProtocol {
			return res
		}
	}
	marked := *completeToolResult()
	marked.Meta, marked.Content, marked.StructuredContent, marked.IsError = res.Meta, res.Content, res.StructuredContent, res.IsError
	marked.InputRequests, marked.RequestState = res.InputRequests, res.RequestState
	if err := res.GetError(); err != nil {
		marked.SetError(err) // keeps the content, sets IsError as res had it
	}
	return &marked
}

// completeToolResult is an empty tool result marked "complete"; never
// modified (asGoSDK copies it).
var completeToolResult = sync.OnceValue(func() *mcp.CallToolResult {
	var r mcp.CallToolResult
	if err := json.Unmarshal([]byte(`{"content":[],"resultType":"complete"}`), &r); err != nil {
		panic(fmt.Sprintf("server: decode a complete tool result: %v", err)) // go-sdk changed its wire form
	}
	return &r
})
