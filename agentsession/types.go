package agentsession

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"
)

// Op is one of the three operations a runtime can be asked to perform on one
// session. There is deliberately no operation that starts or lists sessions.
type Op string

// The operations.
const (
	OpInspect  Op = "inspect"  // read one session's current state (always supported)
	OpContinue Op = "continue" // deliver a follow-up turn to one session
	OpDetach   Op = "detach"   // stop one session in its runtime
)

// Request is one operation addressed to a session by [Registry.Dispatch].
// Prompt is used by continue only, Reason by detach only.
type Request struct {
	Op     Op
	Prompt string
	Reason string
}

// Ref is the neutral view of an attached session handed to a runtime's
// callbacks. It never carries ClawConnect's own record ids. JSON field names
// are the wire names of the runtime-module protocol.
type Ref struct {
	Runtime           string            `json:"runtime"`
	Provider          string            `json:"provider,omitempty"`
	SessionID         string            `json:"sessionId"`
	ProviderSessionID string            `json:"providerSessionId,omitempty"`
	Host              string            `json:"host,omitempty"`
	RemoteURL         string            `json:"remoteUrl,omitempty"`
	Metadata          map[string]string `json:"metadata,omitempty"`
	// LastKnownState is the record's last live status; empty when none is
	// known (or the record is superseded or detached).
	LastKnownState State `json:"lastKnownState,omitempty"`
}

// ErrorCode is a branchable code on an [Error]. It describes why a read or an
// operation failed, never the session's state.
type ErrorCode string

// The fixed codes. The per-operation codes are built by [FailedCode] and
// [TimeoutCode].
const (
	CodeUnknownRuntime       ErrorCode = "unknown_runtime"       // no runtime registered under the record's id
	CodeUnsupportedOperation ErrorCode = "unsupported_operation" // the runtime registered no callback for the op
	CodeSessionNotFound      ErrorCode = "session_not_found"     // the runtime has no state for this session
	CodeRuntimeError         ErrorCode = "runtime_error"         // the runtime reported an error without a code
)

// FailedCode returns "<op>_failed": the callback returned an error.
func FailedCode(op Op) ErrorCode { return ErrorCode(string(op) + "_failed") }

// TimeoutCode returns "<op>_timeout": the callback did not answer in time.
func TimeoutCode(op Op) ErrorCode { return ErrorCode(string(op) + "_timeout") }

// Error is a failed read or operation as stored on a [Status] or an
// [Attachment]. It is data, not a Go error: a failed read is not a failed
// session.
type Error struct {
	Code    ErrorCode `json:"code"`
	Message string    `json:"message"`
}

// TerminationReason says how a session's turn or life ended.
type TerminationReason string

// The termination reasons.
const (
	ReasonCompleted TerminationReason = "completed"
	ReasonCancelled TerminationReason = "cancelled"
	ReasonFailed    TerminationReason = "failed"
	ReasonDied      TerminationReason = "died"
	ReasonUnknown   TerminationReason = "unknown"
)

func parseTerminationReason(s string) (TerminationReason, bool) {
	switch r := TerminationReason(s); r {
	case ReasonCompleted, ReasonCancelled, ReasonFailed, ReasonDied, ReasonUnknown:
		return r, true
	}
	return "", false
}

// Termination describes the end of a session; it exists only on terminal
// states. At is epoch milliseconds (0 when unknown).
type Termination struct {
	Reason   TerminationReason `json:"reason"`
	At       int64             `json:"at,omitempty"`
	ExitCode *int              `json:"exitCode,omitempty"`
	Message  string            `json:"message,omitempty"`
}

// Status is the normalized form of whatever a runtime replied, produced by
// [Normalize] and [Registry.Dispatch]. Identity fields come from the request,
// never from the reply. Timestamps are epoch milliseconds; 0 means absent.
type Status struct {
	Runtime           string            `json:"runtime"`
	Provider          string            `json:"provider,omitempty"`
	SessionID         string            `json:"sessionId"`
	ProviderSessionID string            `json:"providerSessionId,omitempty"`
	Host              string            `json:"host,omitempty"`
	RemoteURL         string            `json:"remoteUrl,omitempty"`
	State             State             `json:"state"`
	Alive             *bool             `json:"alive,omitempty"` // nil = unknown (not false)
	StartedAt         int64             `json:"startedAt,omitempty"`
	LastEventAt       int64             `json:"lastEventAt,omitempty"`
	LatestResponse    string            `json:"latestResponse,omitempty"` // what the session says now; never the answer
	FinalResponse     string            `json:"finalResponse,omitempty"`  // only in a completed-turn state
	Detail            string            `json:"detail,omitempty"`
	Error             *Error            `json:"error,omitempty"`       // a failed read; the state is then unavailable or as reported
	Termination       *Termination      `json:"termination,omitempty"` // only in a terminal state
	Metadata          map[string]string `json:"metadata,omitempty"`
	ReconciledAt      int64             `json:"reconciledAt"`
}

// Stamp is a loosely typed timestamp as a runtime reports it: epoch
// milliseconds or an ISO-8601 string. The zero Stamp is absent. In JSON it is
// a number or a string; any other JSON value decodes to the zero Stamp.
type Stamp struct {
	ms   float64
	text string
	kind uint8 // 0 absent, 1 number, 2 text
}

// Millis returns a Stamp of ms epoch milliseconds.
func Millis(ms int64) Stamp { return Stamp{ms: float64(ms), kind: 1} }

// StampOf returns a Stamp for t (absent when t is the zero time).
func StampOf(t time.Time) Stamp {
	if t.IsZero() {
		return Stamp{}
	}
	return Millis(t.UnixMilli())
}

// ISOStamp returns a Stamp holding s, to be parsed as an ISO-8601 date or
// date-time by [Normalize].
func ISOStamp(s string) Stamp { return Stamp{text: s, kind: 2} }

// IsZero reports whether the stamp is absent.
func (s Stamp) IsZero() bool { return s.kind == 0 }

// MarshalJSON encodes the stamp as a number, a string, or null when absent.
func (s Stamp) MarshalJSON() ([]byte, error) {
	switch s.kind {
	case 1:
		return strconv.AppendFloat(nil, s.ms, 'f', -1, 64), nil
	case 2:
		return json.Marshal(s.text)
	}
	return []byte("null"), nil
}

// UnmarshalJSON decodes a number or a string; any other value yields the
// zero Stamp without an error, so one odd field never rejects a reply.
func (s *Stamp) UnmarshalJSON(b []byte) error {
	*s = Stamp{}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil
	}
	switch b[0] {
	case '"':
		var str string
		if json.Unmarshal(b, &str) == nil {
			*s = ISOStamp(str)
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		f, err := strconv.ParseFloat(string(b), 64)
		if err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			*s = Stamp{ms: f, kind: 1}
		}
	}
	return nil
}

// maxEpochMillis is the largest magnitude an ECMAScript date may have.
const maxEpochMillis = 8.64e15

// millis returns the stamp as epoch milliseconds, or false when it is absent
// or cannot be read as a date.
func (s Stamp) millis() (int64, bool) {
	switch s.kind {
	case 1:
		if math.IsNaN(s.ms) || math.Abs(s.ms) > maxEpochMillis {
			return 0, false
		}
		return int64(math.Trunc(s.ms)), true
	case 2:
		return parseISOMillis(s.text)
	}
	return 0, false
}

// isoLayouts are the ISO-8601 shapes accepted in a text stamp. A date-time
// without a zone is read as UTC (a server has no meaningful local zone).
var isoLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04",
	"2006-01-02",
	"2006-01",
	"2006",
}

func parseISOMillis(s string) (int64, bool) {
	if len(s) > 64 {
		return 0, false
	}
	for _, layout := range isoLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			ms := t.UnixMilli()
			if math.Abs(float64(ms)) > maxEpochMillis {
				return 0, false
			}
			return ms, true
		}
	}
	return 0, false
}

// ObservationError is an error as a runtime reports it. In JSON it may be a
// string (a message) or an object with optional code and message strings.
type ObservationError struct {
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// UnmarshalJSON accepts a string or an object; anything else decodes to an
// empty error, which normalization drops.
func (e *ObservationError) UnmarshalJSON(b []byte) error {
	*e = ObservationError{}
	var s string
	if json.Unmarshal(b, &s) == nil {
		e.Message = s
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) == nil {
		e.Code = looseString(m["code"])
		e.Message = looseString(m["message"])
	}
	return nil
}

// ObservationTermination is a termination as a runtime reports it. An
// unrecognized Reason is replaced by one derived from the state.
type ObservationTermination struct {
	Reason   string `json:"reason,omitempty"`
	At       Stamp  `json:"at,omitzero"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Message  string `json:"message,omitempty"`
}

// UnmarshalJSON decodes the known fields of an object leniently: a field of
// the wrong type is dropped; a value that is not an object decodes to the
// zero termination.
func (t *ObservationTermination) UnmarshalJSON(b []byte) error {
	*t = ObservationTermination{}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	t.Reason = looseString(m["reason"])
	_ = t.At.UnmarshalJSON(m["at"])
	if raw, ok := m["exitCode"]; ok {
		var f float64
		if json.Unmarshal(raw, &f) == nil && f == math.Trunc(f) && math.Abs(f) <= math.MaxInt32 {
			n := int(f)
			t.ExitCode = &n
		}
	}
	t.Message = looseString(m["message"])
	return nil
}

// Observation is the loose reply of a runtime about one session. Every field
// is optional; identity is never taken from it. [Normalize] turns it into a
// [Status]. Its JSON form is the wire form of the runtime-module protocol,
// and decoding it is lenient: a field of the wrong type is dropped rather
// than failing the whole reply.
type Observation struct {
	State          string `json:"state,omitempty"`
	Alive          *bool  `json:"alive,omitempty"`
	StartedAt      Stamp  `json:"startedAt,omitzero"`
	LastEventAt    Stamp  `json:"lastEventAt,omitzero"`
	LatestResponse string `json:"latestResponse,omitempty"`
	// FinalResponse is honoured only in a completed-turn state; it is safe to
	// always supply.
	FinalResponse     string                  `json:"finalResponse,omitempty"`
	Detail            string                  `json:"detail,omitempty"`
	Error             *ObservationError       `json:"error,omitempty"`
	Termination       *ObservationTermination `json:"termination,omitempty"`
	ProviderSessionID string                  `json:"providerSessionId,omitempty"`
	RemoteURL         string                  `json:"remoteUrl,omitempty"`
	Host              string                  `json:"host,omitempty"`
	// Metadata values that are strings are kept; finite numbers and booleans
	// become strings; anything else is dropped.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// errNotObject is returned when an observation's JSON is not an object.
var errNotObject = errors.New("observation is not a JSON object")

// UnmarshalJSON decodes an observation leniently. It fails only when the
// value is not a JSON object.
func (o *Observation) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return errNotObject
	}
	*o = Observation{
		State:             looseString(m["state"]),
		LatestResponse:    looseString(m["latestResponse"]),
		FinalResponse:     looseString(m["finalResponse"]),
		Detail:            looseString(m["detail"]),
		ProviderSessionID: looseString(m["providerSessionId"]),
		RemoteURL:         looseString(m["remoteUrl"]),
		Host:              looseString(m["host"]),
	}
	if raw, ok := m["alive"]; ok {
		var v bool
		if json.Unmarshal(raw, &v) == nil {
			o.Alive = &v
		}
	}
	_ = o.StartedAt.UnmarshalJSON(m["startedAt"])
	_ = o.LastEventAt.UnmarshalJSON(m["lastEventAt"])
	if raw, ok := m["error"]; ok && !isNull(raw) {
		o.Error = new(ObservationError)
		_ = o.Error.UnmarshalJSON(raw)
	}
	if raw, ok := m["termination"]; ok && !isNull(raw) {
		var t ObservationTermination
		_ = t.UnmarshalJSON(raw)
		if t != (ObservationTermination{}) {
			o.Termination = &t
		}
	}
	if raw, ok := m["metadata"]; ok {
		var md map[string]any
		if json.Unmarshal(raw, &md) == nil {
			o.Metadata = md
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// looseString returns raw as a string when it is a JSON string, else "".
func looseString(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// Bool returns a pointer to b, for [Observation.Alive].
func Bool(b bool) *bool { return &b }
