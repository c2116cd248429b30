package task

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/clawconnect/clawconnect/internal/store"
)

// FuzzValidateSessionKey: an accepted key is valid UTF-8, at most 512
// bytes, trimmed, and free of control characters.
func FuzzValidateSessionKey(f *testing.F) {
	for _, s := range []string{"agent:main:main:thread:mcp-1-abcd", "", " x", "a\nb", "\xff", "agent:\u202e", strings.Repeat("k", 600)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if ValidateSessionKey(k) != nil {
			return
		}
		if !utf8.ValidString(k) || len(k) > MaxSessionKeyBytes || strings.TrimSpace(k) != k || k == "" {
			t.Fatalf("accepted %q", k)
		}
		for _, r := range k {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("accepted control character in %q", k)
			}
		}
	})
}

// FuzzProject: the projection is bounded, ordered, capped, and never
// repeats a seq.
func FuzzProject(f *testing.F) {
	f.Add("tool|tool-result|lifecycle|tool", "a|b|c|d", int64(0), false)
	f.Add("tool|tool-result", strings.Repeat("é", 300)+"|x", int64(1), true)
	f.Fuzz(func(t *testing.T, types, texts string, cursor int64, errs bool) {
		ts, xs := strings.Split(types, "|"), strings.Split(texts, "|")
		var es []store.LogEntry
		for i, typ := range ts {
			e := store.LogEntry{Seq: int64(i + 1), TS: int64(i), Type: typ, IsError: errs && i%2 == 1}
			if i < len(xs) {
				e.Text = xs[i]
			}
			es = append(es, e)
		}
		rows := project(es, cursor)
		limit := InitialWindowMax
		if cursor > 0 {
			limit = DeltaWindowMax
		}
		if len(rows) > limit {
			t.Fatalf("%d rows > %d", len(rows), limit)
		}
		last := int64(-1 << 62)
		for _, r := range rows {
			if r.Seq <= last || r.Seq <= cursor {
				t.Fatalf("seq %d after %d (cursor %d)", r.Seq, last, cursor)
			}
			last = r.Seq
			if utf8.ValidString(r.Text) && utf8.RuneCountInString(r.Text) > ProjectionTextMax {
				t.Fatalf("text of %d characters", utf8.RuneCountInString(r.Text))
			}
		}
	})
}

// FuzzCapLogText: capped text keeps its prefix and stays near the limit.
func FuzzCapLogText(f *testing.F) {
	f.Add("hello", 3)
	f.Add(strings.Repeat("日本", 50), 10)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		if limit < 1 || limit > 1<<16 || !utf8.ValidString(s) {
			return
		}
		out := capLogText(s, limit)
		if utf8.RuneCountInString(s) <= limit {
			if out != s {
				t.Fatalf("short text changed: %q -> %q", s, out)
			}
			return
		}
		prefix, _, ok := strings.Cut(out, "…[")
		if !ok || !strings.HasPrefix(s, prefix) || utf8.RuneCountInString(prefix) != limit-1 || !strings.HasSuffix(out, " more chars]") {
			t.Fatalf("cap(%q, %d) = %q", s, limit, out)
		}
	})
}
