package codex_test

import (
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/codex"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// BenchmarkScanCompletion scans 10^4 records after the anchor, with the
// completion last, on rollouts whose history before the anchor differs by
// 100×: the cost stays flat because a scan reads from the anchor only.
func BenchmarkScanCompletion(b *testing.B) {
	filler := rec("event_msg", map[string]any{"type": "token_count", "info": map[string]any{
		"total_token_usage": map[string]any{"input_tokens": 40581, "output_tokens": 37, "total_tokens": 40618},
		"rate_limits":       strings.Repeat("x", 200)}})
	for _, before := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("history=%d/after=10000", before), func(b *testing.B) {
			dir := b.TempDir()
			path := rollout(b, dir, meta(thread, "codex-tui", "cli"))
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			for range before {
				f.WriteString(filler)
			}
			f.Close()
			a, err := codex.CaptureAnchor(rootOf(b, path), t0)
			if err != nil {
				b.Fatal(err)
			}
			f, _ = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(started(turnB))
			for range 10_000 - 2 {
				f.WriteString(filler)
			}
			f.WriteString(complete(turnB, "done"))
			f.Close()
			st, _ := os.Stat(path)
			b.SetBytes(st.Size() - a.Offset)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				c, err := codex.ScanCompletion(a, turnB)
				if err != nil || c.State != native.Completed {
					b.Fatalf("%+v, %v", c, err)
				}
			}
		})
	}
}

// BenchmarkCompletionChecks follows one turn of n records as the monitor
// does: each record is appended, then the completion is checked. Checked
// from the anchor every time, the turn costs the square of its length;
// resumed from the last pending check, each check reads what was appended
// since. read-B/turn is the bytes all the turn's checks read.
func BenchmarkCompletionChecks(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		for _, mode := range []string{"from-anchor", "resumed"} {
			b.Run(fmt.Sprintf("records=%d/%s", n, mode), func(b *testing.B) {
				path := rollout(b, b.TempDir(), meta(thread, "codex-tui", "cli"), started(turnA), complete(turnA, "old"))
				a, err := codex.CaptureAnchor(rootOf(b, path), t0)
				if err != nil {
					b.Fatal(err)
				}
				var read atomic.Int64
				defer codex.CountReads(&read)()
				b.ReportAllocs()
				for b.Loop() {
					if err := os.Truncate(path, a.Offset); err != nil {
						b.Fatal(err)
					}
					f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						b.Fatal(err)
					}
					from := a.Offset
					for i := range n {
						line := tokenCount
						switch i {
						case 0:
							line = started(turnB)
						case n - 1:
							line = complete(turnB, "done")
						}
						f.WriteString(line)
						if mode == "from-anchor" {
							from = a.Offset
						}
						c, err := codex.ScanCompletionFrom(a, turnB, from)
						if err != nil || (c.State == native.Completed) != (i == n-1) {
							b.Fatalf("record %d: %+v, %v", i, c, err)
						}
						from = c.EndOffset
					}
					f.Close()
				}
				b.ReportMetric(float64(read.Load())/float64(b.N), "read-B/turn")
			})
		}
	}
}
