package agentsession

import (
	"math"
	"strconv"
	"time"
)

// Normalize turns a runtime's loose reply about the session ref names into a
// [Status], enforcing the observation contract once for every runtime:
//
//   - identity (runtime, provider, sessionId) comes from ref, never from obs;
//   - a state outside the closed vocabulary reads [StateUnknown];
//   - a final answer exists only in a completed-turn state (falling back to
//     the latest response there);
//   - a termination exists only in a terminal state, with a reason derived
//     from the state when the runtime gave none that is recognized;
//   - timestamps become epoch milliseconds; unreadable ones are dropped;
//   - metadata is strings only: ref's metadata overlaid by the reply's.
//
// Normalize does not bound or validate what it copies: [Registry.Dispatch]
// refuses a reply that [CheckObservation] refuses before it normalizes it.
// A nil obs normalizes like an empty reply. Normalize is pure and safe for
// concurrent use.
func Normalize(ref Ref, obs *Observation, now time.Time) Status {
	if obs == nil {
		obs = &Observation{}
	}
	st := Status{
		Runtime:           ref.Runtime,
		Provider:          ref.Provider,
		SessionID:         ref.SessionID,
		ProviderSessionID: firstNonEmpty(obs.ProviderSessionID, ref.ProviderSessionID),
		Host:              firstNonEmpty(obs.Host, ref.Host),
		RemoteURL:         firstNonEmpty(obs.RemoteURL, ref.RemoteURL),
		State:             StateUnknown,
		LatestResponse:    obs.LatestResponse,
		Detail:            obs.Detail,
		ReconciledAt:      now.UnixMilli(),
	}
	if s, ok := ParseState(obs.State); ok {
		st.State = s
	}
	if obs.Alive != nil {
		st.Alive = Bool(*obs.Alive)
	}
	if ms, ok := obs.StartedAt.millis(); ok {
		st.StartedAt = ms
	}
	if ms, ok := obs.LastEventAt.millis(); ok {
		st.LastEventAt = ms
	}
	if st.State.IsCompletedTurn() {
		st.FinalResponse = firstNonEmpty(obs.FinalResponse, st.LatestResponse)
	}
	st.Metadata = mergeMetadata(ref.Metadata, coerceMetadata(obs.Metadata))
	if e := obs.Error; e != nil && (e.Code != "" || e.Message != "") {
		code := ErrorCode(e.Code)
		if code == "" {
			code = CodeRuntimeError
		}
		msg := e.Message
		if msg == "" {
			msg = e.Code
		}
		st.Error = &Error{Code: code, Message: msg}
	}
	if st.State.IsTerminal() {
		t := &Termination{Reason: derivedReason(st.State), At: st.LastEventAt}
		if ot := obs.Termination; ot != nil {
			if r, ok := parseTerminationReason(ot.Reason); ok {
				t.Reason = r
			}
			if ms, ok := ot.At.millis(); ok {
				t.At = ms
			}
			if ot.ExitCode != nil {
				n := *ot.ExitCode
				t.ExitCode = &n
			}
			t.Message = ot.Message
		}
		st.Termination = t
	}
	return st
}

func derivedReason(s State) TerminationReason {
	switch s {
	case StateDead:
		return ReasonDied
	case StateFailed:
		return ReasonFailed
	}
	return ReasonCompleted
}

// coerceMetadata keeps string values, turns finite numbers and booleans into
// strings, and drops everything else. An empty result is nil.
func coerceMetadata(in map[string]any) map[string]string {
	var out map[string]string
	for k, v := range in {
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case bool:
			s = strconv.FormatBool(v)
		case float64:
			if math.IsInf(v, 0) || math.IsNaN(v) {
				continue
			}
			s = jsNumber(v)
		case int:
			s = strconv.Itoa(v)
		case int64:
			s = strconv.FormatInt(v, 10)
		default:
			continue
		}
		if out == nil {
			out = make(map[string]string, len(in))
		}
		out[k] = s
	}
	return out
}

// jsNumber formats f the way ECMAScript's String(number) does for the common
// cases: integers without exponent below 1e21, otherwise the shortest form.
func jsNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
