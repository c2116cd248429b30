package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrClosed is returned by calls on a Client after Close, and by
	// Run.Wait when the Client was closed before the run ended.
	ErrClosed = errors.New("gateway client closed")
	// ErrDisconnected matches the error of every call that was pending when
	// the connection dropped. The call may or may not have reached the
	// gateway; retry it only if the method is idempotent.
	ErrDisconnected = errors.New("gateway disconnected")
	// ErrNotConnected is returned when a call's context ends while the
	// Client is still (re)connecting.
	ErrNotConnected = errors.New("gateway not connected")
	// ErrUnauthorized matches a ConnectError for a wrong or missing token or
	// password.
	ErrUnauthorized = errors.New("gateway rejected credentials")
	// ErrNotPaired matches a ConnectError when the gateway wants a device
	// identity or an approved pairing.
	ErrNotPaired = errors.New("gateway requires device pairing")
	// ErrProtocolMismatch matches a ConnectError when the gateway does not
	// speak protocol 4.
	ErrProtocolMismatch = errors.New("gateway protocol mismatch")
	// ErrUnavailable matches errors the gateway marked retryable (starting
	// up, queue full).
	ErrUnavailable = errors.New("gateway unavailable")
	// ErrRunClosed is returned by Run.Wait after Run.Close stopped following
	// a run that had not ended. The run itself is not aborted.
	ErrRunClosed = errors.New("run no longer followed")
)

// RPCError is a response with ok:false. Code is the gateway's error code
// (INVALID_REQUEST, UNAVAILABLE, FORBIDDEN or a plugin-defined code).
type RPCError struct {
	Method     string
	Code       string
	Message    string
	Details    json.RawMessage // raw details object, if any
	Retryable  bool
	RetryAfter time.Duration
	// Payload is the payload that some methods (agent) send alongside an
	// error.
	Payload json.RawMessage
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Method, e.Code, e.Message)
}

// Is lets errors.Is(err, ErrUnavailable) match retryable errors.
func (e *RPCError) Is(target error) bool {
	return target == ErrUnavailable && (e.Retryable || e.Code == "UNAVAILABLE")
}

func newRPCError(method string, w *wireError, payload json.RawMessage) *RPCError {
	return &RPCError{
		Method: method, Code: w.Code, Message: w.Message, Details: w.Details,
		Retryable: w.Retryable, RetryAfter: time.Duration(w.RetryAfterMs) * time.Millisecond,
		Payload: payload,
	}
}

// ConnectError is the gateway refusing the connect handshake. Hint says in
// one sentence what to change.
type ConnectError struct {
	Code       string // gateway error code, or "CLOSED" for a close without answer
	DetailCode string // details.code, e.g. AUTH_TOKEN_MISMATCH, PAIRING_REQUIRED
	Message    string
	NextStep   string // details.recommendedNextStep, if given
	CloseCode  int    // WebSocket close status when the socket closed instead, else 0
	RetryAfter time.Duration
	Hint       string
	kind       error
}

func (e *ConnectError) Error() string {
	s := "gateway refused connect"
	if e.Code != "" {
		s += ": " + e.Code
	}
	if e.DetailCode != "" {
		s += " (" + e.DetailCode + ")"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// Is matches the sentinel that classifies the refusal.
func (e *ConnectError) Is(target error) bool { return e.kind != nil && target == e.kind }

// classifyConnect turns a refused connect into a ConnectError.
func classifyConnect(w *wireError) *ConnectError {
	var d struct {
		Code     string `json:"code"`
		NextStep string `json:"recommendedNextStep"`
		Reason   string `json:"reason"`
	}
	if len(w.Details) > 0 {
		_ = json.Unmarshal(w.Details, &d)
	}
	e := &ConnectError{Code: w.Code, DetailCode: d.Code, Message: w.Message, NextStep: d.NextStep,
		RetryAfter: time.Duration(w.RetryAfterMs) * time.Millisecond}
	switch {
	case w.Code == "UNAVAILABLE" || w.Retryable:
		e.kind = ErrUnavailable
		e.Hint = "the gateway is starting or busy; retry shortly"
	case w.Code == "NOT_PAIRED" || d.Code == "PAIRING_REQUIRED" || d.Code == "DEVICE_IDENTITY_REQUIRED":
		e.kind = ErrNotPaired
		e.Hint = "pass a gateway token or password, or use a device identity and approve it with `openclaw devices approve <requestId>`"
	case d.Code == "AUTH_TOKEN_MISMATCH" || d.Code == "AUTH_PASSWORD_MISMATCH" ||
		containsFold(w.Message, "unauthorized") || containsFold(w.Message, "token mismatch") || containsFold(w.Message, "password"):
		e.kind = ErrUnauthorized
		e.Hint = "check the gateway token or password (OPENCLAW_GATEWAY_TOKEN / OPENCLAW_PASSWORD) against the gateway's gateway.auth config"
	case containsFold(w.Message, "protocol"):
		e.kind = ErrProtocolMismatch
		e.Hint = "this client speaks gateway protocol 4; upgrade the OpenClaw gateway (2026.9.x or newer)"
	}
	return e
}

// closeConnectError explains a socket closed during the handshake.
func closeConnectError(code int, reason string) *ConnectError {
	e := &ConnectError{Code: "CLOSED", CloseCode: code, Message: reason}
	switch code {
	case 1002:
		e.kind = ErrProtocolMismatch
		e.Hint = "this client speaks gateway protocol 4; upgrade the OpenClaw gateway (2026.9.x or newer)"
	case 1008:
		e.kind = ErrUnauthorized
		e.Hint = "the gateway closed the socket for a policy violation; check the token/password and client settings"
	case 1012, 1013:
		e.kind = ErrUnavailable
		e.Hint = "the gateway is restarting or starting; retry shortly"
		e.RetryAfter = 500 * time.Millisecond
	}
	return e
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), sub)
}
