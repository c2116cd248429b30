package terminal

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkSendAcrossHosts sends Turns to a pane of host B from B itself
// (local) and from host A (cross: queued in the store, run by B), each
// followed to its completion, and reports the send's p50 and p95 (send
// returned: typed, Enter pressed, acceptance seen) and the completion's
// p50 and p95 as the sender sees it (the agent finishing → the sender's
// wait returning).
func BenchmarkSendAcrossHosts(b *testing.B) {
	for _, mode := range []string{"local", "cross"} {
		b.Run(mode, func(b *testing.B) {
			_, a, hb := twoHosts(b, 401)
			sender := hb.svc
			if mode == "cross" {
				sender = a.svc
			}
			ctx := context.Background()
			var sends, dones []time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				res, err := sender.Send(ctx, SendRequest{TerminalID: hb.agent.pane.TerminalID, Request: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				sends = append(sends, time.Since(start))
				finished := time.Now()
				hb.agent.finish("ok", false)
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err = sender.WaitFor(wctx, res.TurnID, func(v TurnView) bool { return !Running(v.Status) })
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				dones = append(dones, time.Since(finished))
			}
			b.StopTimer()
			report(b, "send", sends)
			report(b, "done", dones)
		})
	}
}

func report(b *testing.B, what string, ds []time.Duration) {
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(at(0.50), what+"-p50-ms")
	b.ReportMetric(at(0.95), what+"-p95-ms")
}
