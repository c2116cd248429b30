package codex_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

var tokenCount = rec("event_msg", map[string]any{"type": "token_count", "info": map[string]any{
	"total_token_usage": map[string]any{"input_tokens": 40581, "output_tokens": 37, "total_tokens": 40618},
	"rate_limits":       strings.Repeat("x", 200)}})

// resumed is one step of a resumed completion check: it scans from the
// end of the last pending answer (the anchor at first), as the monitor
// does, and moves that point only on a pending answer.
type resumed struct {
	a    codex.Anchor
	from int64
}

func (r *resumed) check(turn string) (native.Completion, error) {
	c, err := codex.ScanCompletionFrom(r.a, turn, r.from)
	if err == nil && c.State == native.Pending {
		r.from = c.EndOffset
	}
	return c, err
}

// sameAnswer fails unless the resumed and the whole scan agree: the same
// result, or the same failure.
func sameAnswer(t *testing.T, step string, got native.Completion, gotErr error, want native.Completion, wantErr error) {
	t.Helper()
	if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
		t.Fatalf("%s: resumed error %v, whole %v", step, gotErr, wantErr)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%s: resumed differs from the whole scan (-whole +resumed):\n%s", step, diff)
	}
}

// TestScanCompletionFromAnswersAsAWholeScan appends a turn's records in
// steps — a partial last line, other turns' endings, a blank line, the
// ending and a second ending — and checks after each that the scan resumed
// from the last pending answer answers as a scan from the anchor.
func TestScanCompletionFromAnswersAsAWholeScan(t *testing.T) {
	t.Parallel()
	ending := complete(turnB, "done")
	steps := []string{
		started(turnB) + user(turnB, "do it"),
		tokenCount,
		complete(turnA, "not mine")[:20],
		complete(turnA, "not mine")[20:] + tokenCount,
		"\n",
		ending[:len(ending)/2],
		ending[len(ending)/2:],
		tokenCount,
		complete(turnB, "again"),
	}
	wants := []native.Code{native.CodeNotComplete, native.CodeNotComplete, native.CodePartialRecord, native.CodeNotComplete,
		native.CodeNotComplete, native.CodePartialRecord, native.CodeCompletionFound, native.CodeCompletionFound, native.CodeDuplicateCompletion}
	path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA), complete(turnA, "old"))
	r := resumed{a: capture(t, path)}
	r.from = r.a.Offset
	for i, s := range steps {
		appendTo(t, path, s)
		got, gotErr := r.check(turnB)
		want, wantErr := codex.ScanCompletion(r.a, turnB)
		sameAnswer(t, "step "+string(rune('0'+i)), got, gotErr, want, wantErr)
		code := got.Code
		var se *native.ScanError
		if errors.As(gotErr, &se) {
			code = se.Code
		}
		if code != wants[i] {
			t.Fatalf("step %d: %s, want %s", i, code, wants[i])
		}
	}
}

// TestScanCompletionFromChangedFile: a rollout cut below the resume point
// lost bytes already read and is truncated even where it still reaches the
// anchor; one cut below the anchor, or replaced, fails as a whole scan does.
func TestScanCompletionFromChangedFile(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (string, resumed) {
		path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"))
		r := resumed{a: capture(t, path)}
		r.from = r.a.Offset
		appendTo(t, path, started(turnB), user(turnB, "do it"), tokenCount)
		if c, err := r.check(turnB); err != nil || c.State != native.Pending || r.from <= r.a.Offset {
			t.Fatalf("%+v, %v; want pending past the anchor", c, err)
		}
		return path, r
	}
	t.Run("cut below the resume point", func(t *testing.T) {
		t.Parallel()
		path, r := setup(t)
		if err := os.Truncate(path, r.from-1); err != nil {
			t.Fatal(err)
		}
		_, err := r.check(turnB)
		wantCode(t, err, native.CodeTruncated)
		want, wantErr := codex.ScanCompletion(r.a, turnB)
		if wantErr != nil || want.State != native.Pending {
			t.Fatalf("whole scan %+v, %v; want pending (the cut file still reaches the anchor)", want, wantErr)
		}
	})
	t.Run("cut below the anchor", func(t *testing.T) {
		t.Parallel()
		path, r := setup(t)
		if err := os.Truncate(path, r.a.Offset-1); err != nil {
			t.Fatal(err)
		}
		got, gotErr := r.check(turnB)
		want, wantErr := codex.ScanCompletion(r.a, turnB)
		sameAnswer(t, "cut", got, gotErr, want, wantErr)
		wantCode(t, gotErr, native.CodeTruncated)
	})
	t.Run("replaced", func(t *testing.T) {
		t.Parallel()
		path, r := setup(t)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, complete(turnB, "forged")...)
		if err := os.WriteFile(path+".new", data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
		got, gotErr := r.check(turnB)
		want, wantErr := codex.ScanCompletion(r.a, turnB)
		sameAnswer(t, "replaced", got, gotErr, want, wantErr)
		wantCode(t, gotErr, native.CodeIdentityMismatch)
	})
	t.Run("resume before the anchor", func(t *testing.T) {
		t.Parallel()
		_, r := setup(t)
		_, err := codex.ScanCompletionFrom(r.a, turnB, r.a.Offset-1)
		wantCode(t, err, native.CodeInvalidAnchor)
	})
}

// FuzzScanCompletionFrom feeds a tail in two parts: the scan resumed after
// the first part's pending answer answers as a scan of the whole.
func FuzzScanCompletionFrom(f *testing.F) {
	f.Add(started(turnB)+tokenCount+complete(turnB, "done"), 40)
	f.Add(complete(turnB, "a")+complete(turnB, "b"), 5)
	f.Add(complete(turnB, "a")+"not json\n", 400)
	f.Add("\n\n"+complete(turnA, "x")+" {}\n", 3)
	f.Fuzz(func(t *testing.T, tail string, cut int) {
		path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"))
		r := resumed{a: capture(t, path)}
		r.from = r.a.Offset
		cut = min(max(cut, 0), len(tail))
		appendTo(t, path, tail[:cut])
		if _, err := r.check(turnB); err != nil {
			return // a failure is final: the monitor keeps the earlier point
		}
		appendTo(t, path, tail[cut:])
		got, gotErr := r.check(turnB)
		want, wantErr := codex.ScanCompletion(r.a, turnB)
		sameAnswer(t, "whole", got, gotErr, want, wantErr)
	})
}

// agentCheck is the monitor's view: Agent.Completion with the resume
// point the last pending check returned.
type agentCheck struct {
	raw    json.RawMessage
	turn   string
	resume json.RawMessage
}

func (c *agentCheck) check(t testing.TB) *agents.Completion {
	t.Helper()
	got, next, err := codex.Agent{}.Completion(t.Context(), agents.Pane{}, c.raw, agents.Acceptance{NativeTurnID: c.turn, Resume: c.resume})
	if err != nil {
		t.Fatal(err)
	}
	if got == nil {
		if next == nil {
			t.Fatal("a pending check returned no resume point")
		}
		c.resume = next
	}
	return got
}

// TestCompletionReadsWhatWasAppended checks a turn of 10^4 records after
// each one is appended, as the monitor does on every file event: the
// resumed checks read about the bytes written after the anchor once in
// all, where scans from the anchor read them once per check.
func TestCompletionReadsWhatWasAppended(t *testing.T) {
	path := rollout(t, t.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA), complete(turnA, "old"))
	a := capture(t, path)
	raw, _ := json.Marshal(a)
	var n atomic.Int64
	defer codex.CountReads(&n)()
	c := agentCheck{raw: raw, turn: turnB}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const records = 10_000
	for i := range records {
		line := tokenCount
		switch i {
		case 0:
			line = started(turnB)
		case records - 1:
			line = complete(turnB, "done")
		}
		// Half a line first: a record being written is read again
		// once whole, never skipped.
		f.WriteString(line[:len(line)/2])
		if got := c.check(t); got != nil {
			t.Fatalf("record %d: %+v before the ending record is whole", i, got)
		}
		f.WriteString(line[len(line)/2:])
		got := c.check(t)
		if (got != nil) != (i == records-1) {
			t.Fatalf("record %d: %+v", i, got)
		}
	}
	st, _ := os.Stat(path)
	after := st.Size() - a.Offset
	// Each half line is read at most twice (once partial, once whole).
	if read := n.Load(); read > 2*after {
		t.Fatalf("%d checks read %d bytes for %d appended", 2*records, read, after)
	}
	t.Logf("%d checks read %d bytes for %d appended", 2*records, n.Load(), after)

	// A resume point of another turn, or of another anchor, is not
	// trusted: the check reads from the anchor again.
	for _, bad := range []json.RawMessage{resumeFor(t, c.resume, "native_turn_id", turnA), resumeFor(t, c.resume, "from_offset_bytes", 0)} {
		n.Store(0)
		again := agentCheck{raw: raw, turn: turnB, resume: bad}
		if got := again.check(t); got == nil || got.Text != "done" || n.Load() != after {
			t.Fatalf("with %s: %+v after reading %d bytes, want the reply after %d", bad, got, n.Load(), after)
		}
	}
}

// resumeFor is resume with one field set to v.
func resumeFor(t *testing.T, resume json.RawMessage, field string, v any) json.RawMessage {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(resume, &m); err != nil {
		t.Fatal(err)
	}
	m[field] = v
	out, _ := json.Marshal(m)
	return out
}
