package agentsession

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParseHandoff checks the grammar never panics and keeps its promises on
// arbitrary context text. Seeds live in testdata/fuzz/FuzzParseHandoff.
func FuzzParseHandoff(f *testing.F) {
	f.Add(`<agent-session>{"runtime":"rt","sessionId":"s1","state":"running"}</agent-session>`)
	f.Add("[[clawconnect:agent-session]]{\"op\":\"detach\",\"reason\":\"r\",\"stopRuntime\":true}[[/clawconnect:agent-session]]")
	f.Fuzz(func(t *testing.T, in string) {
		h := ParseHandoff(in)
		if !h.Found {
			if h.Text != in || h.Directive != nil || h.Err != nil {
				t.Fatalf("nothing found but %+v", h)
			}
			return
		}
		if len(h.Text) >= len(in) {
			t.Fatalf("found a form but stripped nothing: %q -> %q", in, h.Text)
		}
		if utf8.ValidString(in) {
			if r, _ := utf8.DecodeRuneInString(h.Text); h.Text != "" && isJSSpace(r) {
				t.Fatalf("text not trimmed: %q", h.Text)
			}
		}
		d := h.Directive
		if d == nil {
			if h.Err == nil {
				t.Fatal("a found form with no directive has no error")
			}
			return
		}
		switch d.Op {
		case DirectiveAttach, DirectiveReplace:
			if !ValidRuntimeID(d.Runtime) || !ValidHandle(d.Handle) {
				t.Fatalf("invalid identity accepted: %+v", d)
			}
			if !d.FromMarker && d.Host == "" {
				t.Fatalf("directive attach without host: %+v", d)
			}
			if d.Op == DirectiveReplace && d.Reason == "" {
				t.Fatalf("replace without reason: %+v", d)
			}
		case DirectiveDetach:
			if d.Reason == "" {
				t.Fatalf("detach without reason: %+v", d)
			}
		case DirectiveContinue, DirectiveInspect:
		default:
			t.Fatalf("unknown op accepted: %+v", d)
		}
		if d.Status != "" {
			if _, ok := d.Status.State(); !ok {
				t.Fatalf("non-live status accepted: %q", d.Status)
			}
		}
	})
}

// FuzzNormalize checks the observation contract holds for any reply a
// runtime (or a runtime module) can send. Seeds live in
// testdata/fuzz/FuzzNormalize.
func FuzzNormalize(f *testing.F) {
	f.Add([]byte(`{"state":"completed","finalResponse":"a","lastEventAt":"2026-01-02T03:04:05Z","termination":{"reason":"x"}}`))
	f.Add([]byte(`{"state":"running","finalResponse":"a","metadata":{"n":1.5,"b":false},"error":"e"}`))
	ref := Ref{Runtime: "rt", Provider: "p", SessionID: "s", Metadata: map[string]string{"k": "v"}}
	f.Fuzz(func(t *testing.T, data []byte) {
		var obs Observation
		if err := json.Unmarshal(data, &obs); err != nil {
			return
		}
		st := Normalize(ref, &obs, testNow)
		if _, ok := ParseState(string(st.State)); !ok {
			t.Fatalf("state %q outside the vocabulary", st.State)
		}
		if st.Runtime != "rt" || st.Provider != "p" || st.SessionID != "s" {
			t.Fatalf("identity taken from the reply: %+v", st)
		}
		if st.FinalResponse != "" && !st.State.IsCompletedTurn() {
			t.Fatalf("final answer in state %q", st.State)
		}
		if (st.Termination != nil) != st.State.IsTerminal() {
			t.Fatalf("termination %+v in state %q", st.Termination, st.State)
		}
		if st.Metadata["k"] == "" && !strings.Contains(string(data), `"k"`) {
			t.Fatalf("ref metadata lost: %v", st.Metadata)
		}
		if st.Error != nil && (st.Error.Code == "" || st.Error.Message == "") {
			t.Fatalf("half an error: %+v", st.Error)
		}
		if _, err := json.Marshal(st); err != nil {
			t.Fatalf("status does not serialize: %v", err)
		}
	})
}
