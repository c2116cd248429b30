package agentsession

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func block(body string) string  { return DirectiveOpen + body + DirectiveClose }
func marker(body string) string { return MarkerOpen + body + MarkerClose }

func TestParseHandoff(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      *Directive
		wantText  string
		wantFound bool
		wantErr   bool
	}{
		{name: "no handoff leaves the text untouched", in: "  plain context \n", wantText: "  plain context \n"},
		{name: "marker is an attach and keeps surrounding newlines",
			in:        "Before.\n\n" + marker(`{"runtime":"rt","sessionId":"s-1","state":"running"}`) + "\n\nAfter.",
			want:      &Directive{Op: DirectiveAttach, FromMarker: true, Runtime: "rt", Handle: "s-1", Status: "running"},
			wantText:  "Before.\n\n\n\nAfter.",
			wantFound: true},
		{name: "marker with every field and aliases",
			in: marker(` {"runtime":" rt ","handle":"h1","provider":"p","claudeSessionId":"c1","host":"box",` +
				`"remoteControlUrl":"https://r","state":"superseded","metadata":{"worktreePath":"/w","n":2,"o":{}}} `),
			want: &Directive{Op: DirectiveAttach, FromMarker: true, Runtime: "rt", Handle: "h1", Provider: "p",
				ProviderSessionID: "c1", Host: "box", RemoteURL: "https://r", Worktree: "/w",
				Metadata: map[string]string{"worktreePath": "/w", "n": "2"}},
			wantFound: true},
		{name: "marker sessionId wins over handle", in: marker(`{"runtime":"rt","sessionId":"a","handle":"b"}`),
			want: &Directive{Op: DirectiveAttach, FromMarker: true, Runtime: "rt", Handle: "a"}, wantFound: true},
		{name: "marker without runtime is stripped and applies nothing",
			in: "x " + marker(`{"sessionId":"s"}`) + " y", wantText: "x  y", wantFound: true, wantErr: true},
		{name: "marker with unsafe session id", in: marker(`{"runtime":"rt","sessionId":"../etc"}`), wantFound: true, wantErr: true},
		{name: "marker with unsafe provider session id", in: marker(`{"runtime":"rt","sessionId":"s","providerSessionId":"a b"}`), wantFound: true, wantErr: true},
		{name: "marker with bad JSON", in: marker(`{"runtime":}`), wantFound: true, wantErr: true},
		{name: "marker that is not an object is not a marker", in: marker(`["x"]`), wantText: marker(`["x"]`)},
		{name: "first marker only", in: marker(`{"runtime":"a","sessionId":"1"}`) + marker(`{"runtime":"b","sessionId":"2"}`),
			want:     &Directive{Op: DirectiveAttach, FromMarker: true, Runtime: "a", Handle: "1"},
			wantText: marker(`{"runtime":"b","sessionId":"2"}`), wantFound: true},
		{name: "marker body is the shortest match",
			in:   MarkerOpen + `{"runtime":"a","sessionId":"1"}` + MarkerClose + " tail } " + MarkerClose,
			want: &Directive{Op: DirectiveAttach, FromMarker: true, Runtime: "a", Handle: "1"}, wantText: "tail } " + MarkerClose, wantFound: true},
		{name: "marker skips a close tag not preceded by a brace",
			in:   MarkerOpen + `{"runtime":"a","sessionId":"1","detail":"` + MarkerClose + `"}` + MarkerClose,
			want: &Directive{Op: DirectiveAttach, FromMarker: true, Runtime: "a", Handle: "1"}, wantFound: true},
		{name: "an opening tag without a brace is skipped",
			in:   MarkerOpen + "no json" + MarkerOpen + `{"runtime":"a","sessionId":"1"}` + MarkerClose,
			want: &Directive{Op: DirectiveAttach, FromMarker: true, Runtime: "a", Handle: "1"}, wantText: MarkerOpen + "no json", wantFound: true},
		{name: "unterminated marker is left alone", in: MarkerOpen + `{"runtime":"a"}`, wantText: MarkerOpen + `{"runtime":"a"}`},
		{name: "attach directive",
			in: block(`{"op":"attach","handle":"h","host":"box","runtime":"rt","provider":"p","providerSessionId":"ps",` +
				`"worktree":"w","remoteUrl":"u","metadata":{"k":true},"status":"needs_input"}`),
			want: &Directive{Op: DirectiveAttach, Runtime: "rt", Handle: "h", Host: "box", Provider: "p", ProviderSessionID: "ps",
				Worktree: "w", RemoteURL: "u", Metadata: map[string]string{"k": "true"}, Status: "needs_input"},
			wantFound: true},
		{name: "attach accepts sessionId, handle wins",
			in:   block(`{"op":"attach","sessionId":"s","handle":"h","host":"box","runtime":"rt"}`),
			want: &Directive{Op: DirectiveAttach, Runtime: "rt", Handle: "h", Host: "box"}, wantFound: true},
		{name: "attach without runtime", in: block(`{"op":"attach","handle":"h","host":"box"}`), wantFound: true, wantErr: true},
		{name: "attach without host", in: block(`{"op":"attach","handle":"h","runtime":"rt"}`), wantFound: true, wantErr: true},
		{name: "attach with unsafe handle", in: block(`{"op":"attach","handle":"a/b","host":"x","runtime":"rt"}`), wantFound: true, wantErr: true},
		{name: "attach with unsafe provider session", in: block(`{"op":"attach","handle":"a","host":"x","runtime":"rt","providerSessionId":"/"}`), wantFound: true, wantErr: true},
		{name: "replace needs a reason", in: block(`{"op":"replace","handle":"h","host":"x","runtime":"rt"}`), wantFound: true, wantErr: true},
		{name: "replace",
			in:   block(`{"op":"replace","handle":"h","host":"x","runtime":"rt","reason":" moved "}`),
			want: &Directive{Op: DirectiveReplace, Runtime: "rt", Handle: "h", Host: "x", Reason: "moved"}, wantFound: true},
		{name: "continue", in: block(`{"op":"continue","status":"running","prompt":"  go on  "}`),
			want: &Directive{Op: DirectiveContinue, Status: "running", Prompt: "go on"}, wantFound: true},
		{name: "continue with blank prompt and bogus status", in: block(`{"op":"continue","status":"unknown","prompt":"  "}`),
			want: &Directive{Op: DirectiveContinue}, wantFound: true},
		{name: "detach with literal true", in: block(`{"op":"detach","reason":"done","stopRuntime":true}`),
			want: &Directive{Op: DirectiveDetach, Reason: "done", StopRuntime: true}, wantFound: true},
		{name: "detach with stringly true stays local", in: block(`{"op":"detach","reason":"done","stopRuntime":"yes"}`),
			want: &Directive{Op: DirectiveDetach, Reason: "done"}, wantFound: true},
		{name: "detach needs a reason", in: block(`{"op":"detach"}`), wantFound: true, wantErr: true},
		{name: "inspect", in: block(`{"op":"inspect","status":"stale"}`),
			want: &Directive{Op: DirectiveInspect, Status: "stale"}, wantFound: true},
		{name: "unknown op", in: "a " + block(`{"op":"spawn"}`) + " b", wantText: "a  b", wantFound: true, wantErr: true},
		{name: "bad JSON directive", in: block(`{op:attach}`), wantFound: true, wantErr: true},
		{name: "non-object directive", in: block(`null`), wantFound: true, wantErr: true},
		{name: "the old fleet delimiter is not parsed",
			in: "[[clawconnect:fleet]]{}[[/clawconnect:fleet]]", wantText: "[[clawconnect:fleet]]{}[[/clawconnect:fleet]]"},
		{name: "first block only",
			in:       block(`{"op":"inspect"}`) + "\n" + block(`{"op":"detach","reason":"r"}`),
			want:     &Directive{Op: DirectiveInspect},
			wantText: block(`{"op":"detach","reason":"r"}`), wantFound: true},
		{name: "directive wins and both are stripped",
			in:       "A " + marker(`{"runtime":"m","sessionId":"1"}`) + " B " + block(`{"op":"inspect"}`) + " C",
			want:     &Directive{Op: DirectiveInspect},
			wantText: "A  B  C", wantFound: true},
		{name: "a malformed directive falls back to the marker, both stripped",
			in:        block(`{"op":"nope"}`) + "\n" + marker(`{"runtime":"m","sessionId":"1"}`),
			want:      &Directive{Op: DirectiveAttach, FromMarker: true, Runtime: "m", Handle: "1"},
			wantFound: true, wantErr: true},
		{name: "unicode whitespace is trimmed like ECMAScript",
			in:       "\ufeff\u00a0" + marker(`{"runtime":"m","sessionId":"1"}`) + "\u3000text\u2003",
			want:     &Directive{Op: DirectiveAttach, FromMarker: true, Runtime: "m", Handle: "1"},
			wantText: "text", wantFound: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseHandoff(tc.in)
			if diff := cmp.Diff(tc.want, got.Directive, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("directive mismatch (-want +got):\n%s", diff)
			}
			if got.Text != tc.wantText {
				t.Errorf("Text = %q, want %q", got.Text, tc.wantText)
			}
			if got.Found != tc.wantFound {
				t.Errorf("Found = %v, want %v", got.Found, tc.wantFound)
			}
			if (got.Err != nil) != tc.wantErr || (got.Err != nil && !errors.Is(got.Err, ErrMalformedHandoff)) {
				t.Errorf("Err = %v, wantErr %v", got.Err, tc.wantErr)
			}
		})
	}
}

// TestParseHandoffLinearOnHostileInput runs the shapes that make a naive
// backtracking search quadratic over a 1 MiB context. It asserts the
// results; that it finishes at all is the point (a quadratic scan of 1 MiB
// of these shapes takes minutes). BenchmarkParseHandoff gives the figures.
func TestParseHandoffLinearOnHostileInput(t *testing.T) {
	const size = 1 << 20
	for _, tc := range []struct {
		name, unit string
	}{
		{"open tags with braces and no close", MarkerOpen + "{ "},
		{"open tags then many closes without brace", MarkerOpen + "{x" + MarkerClose},
		{"directive opens without close", DirectiveOpen},
		{"closing tags only", MarkerClose + "   "},
		{"whitespace runs before closes", strings.Repeat(" ", 30) + MarkerClose},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := strings.Repeat(tc.unit, size/len(tc.unit))
			got := ParseHandoff(in)
			if got.Directive != nil {
				t.Errorf("found a directive in %q…", in[:40])
			}
		})
	}
	in := strings.Repeat(MarkerOpen+"{", size/16) + `"runtime":"r","sessionId":"s"}` + MarkerClose
	if got := ParseHandoff(in); !got.Found || got.Err == nil {
		t.Errorf("long nested marker: Found=%v Err=%v", got.Found, got.Err)
	}
}
