package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/clawconnect/clawconnect/internal/testbed/cputime"
)

// BenchmarkEventPipeline measures the native frame → normalized RunEvent
// path for one followed run: decode the frame, route it by run id, queue
// it, and normalize it (what the run goroutine does), on one goroutine.
func BenchmarkEventPipeline(b *testing.B) {
	c := &Client{log: slog.New(slog.DiscardHandler), runsByID: map[string][]*Run{}, runsBySess: map[string][]*Run{}, allRuns: map[*Run]struct{}{}}
	events := 0
	r := &Run{c: c, id: "run-1", key: "agent:main:s", notify: make(chan struct{}, 1), done: make(chan struct{}),
		req: RunRequest{OnEvent: func(RunEvent) { events++ }}}
	c.runsByID["run-1"] = []*Run{r}
	st := &runState{id: "run-1", seen: map[seenKey]struct{}{}}
	frames := make([][]byte, 0, 64)
	for i := 1; i <= 64; i++ {
		text := fmt.Sprintf("token %d of a streamed assistant answer", i)
		switch i % 4 {
		case 0:
			frames = append(frames, fmt.Appendf(nil, `{"type":"event","event":"agent","payload":{"runId":"run-1","sessionKey":"agent:main:s","seq":%d,"stream":"assistant","ts":1796031566666,"data":{"text":%q,"delta":"x"}},"seq":%d}`, i, text, i))
		case 1:
			frames = append(frames, fmt.Appendf(nil, `{"type":"event","event":"chat","payload":{"runId":"run-1","sessionKey":"agent:main:s","seq":%d,"state":"delta","deltaText":"x","message":{"role":"assistant","content":[{"type":"text","text":%q}],"timestamp":1796031566666}},"seq":%d}`, i, text+"!", i))
		case 2:
			frames = append(frames, fmt.Appendf(nil, `{"type":"event","event":"agent","payload":{"runId":"run-1","sessionKey":"agent:main:s","seq":%d,"stream":"tool","data":{"phase":"start","name":"exec","toolCallId":"c%d","args":{"command":"ls -la"}}},"seq":%d}`, i, i, i))
		default:
			frames = append(frames, fmt.Appendf(nil, `{"type":"event","event":"agent","payload":{"runId":"run-1","sessionKey":"agent:main:s","seq":%d,"stream":"lifecycle","data":{"phase":"model","provider":"fake","model":"fake-model"}},"seq":%d}`, i, i))
		}
	}
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := cputime.Self()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c.handleFrame(nil, frames[i%len(frames)])
		items := r.queue
		r.queue = r.queue[:0]
		for _, it := range items {
			if _, done := r.handle(ctx, st, it); done {
				b.Fatal("run ended")
			}
		}
		if i%len(frames) == len(frames)-1 {
			clear(st.seen) // keep the duplicate filter from dropping replays
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	// On a shared machine wall time includes waiting for a CPU; the CPU
	// time the process used (GC included) is the stable figure.
	b.ReportMetric(float64(b.N)/(cputime.Self()-cpu0).Seconds(), "events/cpu-s")
	if events == 0 || c.badFrames.Load() != 0 {
		b.Fatalf("events %d bad %d", events, c.badFrames.Load())
	}
}
