package codex_test

import (
	"fmt"
	"os"
	"strings"
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
