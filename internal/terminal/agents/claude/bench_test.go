package claude_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/terminal/agents/claude"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// BenchmarkScanCompletion scans a turn of 10^4 records (a chain of tool
// calls and results) after the anchor, on transcripts whose history before
// the anchor differs by 100×: the cost stays flat.
func BenchmarkScanCompletion(b *testing.B) {
	for _, before := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("history=%d/after=10000", before), func(b *testing.B) {
			var hist strings.Builder
			hist.WriteString(old)
			for i := range before {
				hist.WriteString(line(map[string]any{"type": "attachment", "uuid": fmt.Sprintf("h%d", i), "parentUuid": "d0", "attachment": map[string]any{"type": "date", "text": strings.Repeat("x", 200)}}))
			}
			a, path := transcript(b, hist.String())
			var turn strings.Builder
			turn.WriteString(prompt("p1", "d0", "do it"))
			parent := "p1"
			for i := range 5_000 {
				id := fmt.Sprintf("t%d", i)
				turn.WriteString(assistant("a"+id, parent, "m"+id, "tool_use", toolUse(id, "Bash", map[string]any{"command": "ls"})))
				turn.WriteString(toolResult("r"+id, "a"+id, id))
				parent = "r" + id
			}
			turn.WriteString(assistant("af", parent, "mf", "end_turn", text("done")))
			turn.WriteString(duration("df", "af"))
			appendTo(b, path, turn.String())
			st, _ := os.Stat(path)
			b.SetBytes(st.Size() - a.Offset)
			b.ReportAllocs()
			for b.Loop() {
				c, err := claude.ScanCompletion(a, "p1")
				if err != nil || c.State != native.Completed || c.Text != "done" {
					b.Fatalf("%+v, %v", c, err)
				}
			}
		})
	}
}

// BenchmarkActiveTaskAnchor joins a task whose prompt opens a transcript
// window full of records: MaxActiveTaskScan bytes of 64 KiB attachment
// records (as Claude Code writes them) before the prompt, over a history
// of the same size before the window.
func BenchmarkActiveTaskAnchor(b *testing.B) {
	rec := func(i int) string {
		return line(map[string]any{"type": "attachment", "uuid": fmt.Sprintf("h%d", i), "parentUuid": "d0",
			"attachment": map[string]any{"type": "file", "text": strings.Repeat("x", 64<<10)}})
	}
	var hist strings.Builder
	hist.WriteString(old)
	for i := 0; hist.Len() < 2*claude.MaxActiveTaskScan-(256<<10); i++ {
		hist.WriteString(rec(i))
	}
	_, path := transcript(b, hist.String(), prompt("p1", "d0", "a long task"), assistant("a1", "p1", "m1", "", text("working")))
	end := endOf(b, path)
	b.SetBytes(claude.MaxActiveTaskScan)
	b.ReportAllocs()
	for b.Loop() {
		if _, uuid, err := claude.ActiveTaskAnchor(end); err != nil || uuid != "p1" {
			b.Fatalf("%s, %v", uuid, err)
		}
	}
}
