package module

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"

	"github.com/clawconnect/clawconnect/agentsession"
)

// ProtocolVersion is the version of the runtime-module protocol this
// package speaks.
const ProtocolVersion = 1

// EnvVar names the environment variable holding the module list. The
// package never reads it; the program's main does and passes its value to
// [Load].
const EnvVar = "CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES"

// JSON-RPC error codes used by the protocol.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601 // also: operation unsupported
	codeInvalidParams  = -32602
	codeCallFailed     = -32000 // the runtime's callback returned an error
)

// Method names.
const (
	methodDescribe = "describe"
	methodCancel   = "cancel"
)

// message is any JSON-RPC 2.0 message of the protocol: a request (Method
// and ID), a notification (Method, no ID) or a response (ID and Result or
// Error).
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// describeParams are the params of describe.
type describeParams struct {
	ProtocolVersion int `json:"protocolVersion"`
}

// describeResult is a module's answer to describe.
type describeResult struct {
	ProtocolVersion int               `json:"protocolVersion"`
	Runtimes        []describeRuntime `json:"runtimes"`
}

type describeRuntime struct {
	ID         string   `json:"id"`
	Provider   string   `json:"provider,omitempty"`
	Operations []string `json:"operations"`
}

// callParams are the params of inspect, continue and detach.
type callParams struct {
	Runtime   string           `json:"runtime"`
	Ref       agentsession.Ref `json:"ref"`
	TimeoutMs int64            `json:"timeoutMs,omitempty"`
	Prompt    string           `json:"prompt,omitempty"`
	Reason    string           `json:"reason,omitempty"`
}

// cancelParams are the params of the cancel notification.
type cancelParams struct {
	ID json.RawMessage `json:"id"`
}

// lineReader reads newline-terminated lines of bounded size.
type lineReader struct {
	r   *bufio.Reader
	max int
	buf []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, min(max+1, 64<<10)), max: max}
}

// next returns the next line without its newline. A line longer than max
// is consumed whole, and its first max bytes are returned with tooLong set.
// A final line without a newline is returned before io.EOF. The returned
// slice is valid until the next call.
func (lr *lineReader) next() (line []byte, tooLong bool, err error) {
	lr.buf = lr.buf[:0]
	total := 0
	for {
		chunk, err := lr.r.ReadSlice('\n')
		total += len(chunk)
		if room := lr.max - len(lr.buf); room > 0 {
			lr.buf = append(lr.buf, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && (!errors.Is(err, io.EOF) || total == 0) {
			return nil, false, err
		}
		content := total
		if err == nil {
			content-- // the newline
		}
		return lr.buf[:min(content, len(lr.buf))], content > lr.max, nil
	}
}
