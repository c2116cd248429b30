package agentsession

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var testNow = time.UnixMilli(1_700_000_000_000)

func intPtr(n int) *int { return &n }

func TestNormalize(t *testing.T) {
	ref := Ref{
		Runtime: "rt", Provider: "prov", SessionID: "s1", ProviderSessionID: "p1",
		Host: "h1", RemoteURL: "https://ref", Metadata: map[string]string{"a": "ref", "keep": "1"},
	}
	base := func(mut func(*Status)) Status {
		s := Status{
			Runtime: "rt", Provider: "prov", SessionID: "s1", ProviderSessionID: "p1", Host: "h1",
			RemoteURL: "https://ref", Metadata: map[string]string{"a": "ref", "keep": "1"},
			State: StateUnknown, ReconciledAt: testNow.UnixMilli(),
		}
		if mut != nil {
			mut(&s)
		}
		return s
	}
	tests := []struct {
		name string
		obs  string // JSON; "" means a nil observation
		want Status
	}{
		{"nil observation reads unknown", "", base(nil)},
		{"unknown state reads unknown", `{"state":"done"}`, base(nil)},
		{"wrong-typed state reads unknown", `{"state":5}`, base(nil)},
		{"identity from the ref, never the reply",
			`{"runtime":"evil","sessionId":"other","provider":"x","state":"running"}`,
			base(func(s *Status) { s.State = StateRunning })},
		{"optional identity falls back to the ref only when absent",
			`{"state":"running","providerSessionId":"p2","host":"h2","remoteUrl":"https://obs"}`,
			base(func(s *Status) {
				s.State, s.ProviderSessionID, s.Host, s.RemoteURL = StateRunning, "p2", "h2", "https://obs"
			})},
		{"final answer dropped while running",
			`{"state":"running","latestResponse":"partial","finalResponse":"answer"}`,
			base(func(s *Status) { s.State, s.LatestResponse = StateRunning, "partial" })},
		{"final answer dropped while blocked",
			`{"state":"needs_input","latestResponse":"which one?","finalResponse":"answer"}`,
			base(func(s *Status) { s.State, s.LatestResponse = StateNeedsInput, "which one?" })},
		{"final answer kept when completed, termination derived",
			`{"state":"completed","finalResponse":"answer","lastEventAt":1700000000500}`,
			base(func(s *Status) {
				s.State, s.FinalResponse, s.LastEventAt = StateCompleted, "answer", 1700000000500
				s.Termination = &Termination{Reason: ReasonCompleted, At: 1700000000500}
			})},
		{"idle falls back to the latest response",
			`{"state":"idle","latestResponse":"done it"}`,
			base(func(s *Status) {
				s.State, s.LatestResponse, s.FinalResponse = StateIdle, "done it", "done it"
				s.Termination = &Termination{Reason: ReasonCompleted}
			})},
		{"dead derives died", `{"state":"dead"}`,
			base(func(s *Status) { s.State, s.Termination = StateDead, &Termination{Reason: ReasonDied} })},
		{"failed derives failed, unknown reason replaced",
			`{"state":"failed","termination":{"reason":"exploded","at":"2023-11-14T22:13:20Z","exitCode":3,"message":"boom"}}`,
			base(func(s *Status) {
				s.State = StateFailed
				s.Termination = &Termination{Reason: ReasonFailed, At: 1700000000000, ExitCode: intPtr(3), Message: "boom"}
			})},
		{"given reason kept", `{"state":"dead","termination":{"reason":"cancelled"}}`,
			base(func(s *Status) { s.State, s.Termination = StateDead, &Termination{Reason: ReasonCancelled} })},
		{"termination dropped when not terminal",
			`{"state":"running","termination":{"reason":"completed","at":5}}`,
			base(func(s *Status) { s.State = StateRunning })},
		{"ISO and epoch timestamps",
			`{"state":"running","startedAt":"2023-11-14T22:13:20.250+00:00","lastEventAt":1700000001000.9}`,
			base(func(s *Status) { s.State, s.StartedAt, s.LastEventAt = StateRunning, 1700000000250, 1700000001000 })},
		{"zone-less ISO reads as UTC, date-only too",
			`{"startedAt":"2023-11-14T22:13:20","lastEventAt":"2023-11-15"}`,
			base(func(s *Status) { s.StartedAt, s.LastEventAt = 1700000000000, 1700006400000 })},
		{"unparsable timestamps dropped",
			`{"startedAt":"yesterday","lastEventAt":true}`, base(nil)},
		{"out-of-range epoch dropped", `{"startedAt":1e300}`, base(nil)},
		{"metadata coerced to strings and merged over the ref",
			`{"metadata":{"a":"obs","n":2,"f":1.5,"b":true,"nil":null,"obj":{},"arr":[1]}}`,
			base(func(s *Status) {
				s.Metadata = map[string]string{"a": "obs", "keep": "1", "n": "2", "f": "1.5", "b": "true"}
			})},
		{"string error gets runtime_error", `{"error":"socket closed"}`,
			base(func(s *Status) { s.Error = &Error{Code: CodeRuntimeError, Message: "socket closed"} })},
		{"object error without message uses the code", `{"error":{"code":"gone"}}`,
			base(func(s *Status) { s.Error = &Error{Code: "gone", Message: "gone"} })},
		{"object error without code", `{"error":{"message":"m"}}`,
			base(func(s *Status) { s.Error = &Error{Code: CodeRuntimeError, Message: "m"} })},
		{"empty error dropped", `{"error":{"code":5}}`, base(nil)},
		{"alive only when boolean", `{"alive":"yes"}`, base(nil)},
		{"alive false kept", `{"alive":false}`, base(func(s *Status) { s.Alive = Bool(false) })},
		{"detail kept", `{"detail":"d"}`, base(func(s *Status) { s.Detail = "d" })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var obs *Observation
			if tc.obs != "" {
				obs = new(Observation)
				if err := json.Unmarshal([]byte(tc.obs), obs); err != nil {
					t.Fatalf("unmarshal: %v", err)
				}
			}
			got := Normalize(ref, obs, testNow)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Normalize mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalizeNoMetadataStaysNil(t *testing.T) {
	got := Normalize(Ref{Runtime: "r", SessionID: "s"}, &Observation{Metadata: map[string]any{"x": []any{}}}, testNow)
	if got.Metadata != nil {
		t.Errorf("Metadata = %v, want nil", got.Metadata)
	}
}

func TestObservationJSONRejectsNonObjects(t *testing.T) {
	for _, in := range []string{`null`, `[]`, `"x"`, `5`, `{`} {
		var o Observation
		if err := json.Unmarshal([]byte(in), &o); err == nil {
			t.Errorf("Unmarshal(%s) succeeded, want an error", in)
		}
	}
}

func TestObservationJSONRoundTrip(t *testing.T) {
	in := Observation{
		State: "completed", Alive: Bool(false), StartedAt: Millis(1000), LastEventAt: ISOStamp("2023-11-14T22:13:20Z"),
		LatestResponse: "l", FinalResponse: "f", Detail: "d",
		Error:       &ObservationError{Code: "c", Message: "m"},
		Termination: &ObservationTermination{Reason: "died", At: Millis(5), ExitCode: intPtr(1), Message: "x"},
		Metadata:    map[string]any{"k": "v"},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Observation
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out, cmp.AllowUnexported(Stamp{})); diff != "" {
		t.Errorf("round trip mismatch (-want +got):\n%s", diff)
	}
	if b, _ := json.Marshal(Observation{}); string(b) != `{}` {
		t.Errorf("empty observation marshals to %s, want {}", b)
	}
	if b, _ := (Stamp{}).MarshalJSON(); string(b) != "null" {
		t.Errorf("zero stamp marshals to %s", b)
	}
}

func TestStampOf(t *testing.T) {
	if !StampOf(time.Time{}).IsZero() {
		t.Error("StampOf(zero) is not zero")
	}
	if ms, ok := StampOf(testNow).millis(); !ok || ms != testNow.UnixMilli() {
		t.Errorf("StampOf(now).millis() = %d, %v", ms, ok)
	}
	var s Stamp
	for _, in := range []string{``, `NaN`, `{}`, `"` + string(make([]byte, 100)) + `"`} {
		_ = s.UnmarshalJSON([]byte(in))
		if _, ok := s.millis(); ok {
			t.Errorf("stamp %q reads as a date", in)
		}
	}
}
