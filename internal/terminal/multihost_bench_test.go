package terminal

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox/outboxtest"
	"github.com/clawconnect/clawconnect/termapi"
)

// BenchmarkSendAcrossHosts sends Turns to a pane of host B from B itself
// (local) and from host A (cross: queued in the store, run by B), each
// followed to its completion and its callback, and reports the send's
// p50 and p95 (send returned: typed, Enter pressed, acceptance seen), the
// completion's as the sender sees it (the agent finishing → the sender's
// wait returning) and the callback's (the agent finishing → the callback
// run started in the origin session). The callback is delivered by the
// gateway's host: B itself when local, A when cross (B is configured with
// no gateway, so it leaves the callback to A). On PostgreSQL (each host
// its own connection, as on two machines) when TEST_DATABASE_URL is set,
// else on one SQLite file.
func BenchmarkSendAcrossHosts(b *testing.B) {
	const gw = "ws://gateway.example:18789"
	for _, mode := range []string{"local", "cross"} {
		b.Run(mode, func(b *testing.B) {
			r := newRig(b)
			stA, stB := r.st, r.st
			if pg := pgStoresIfSet(b, 2); pg != nil {
				stA, stB = pg[0], pg[1]
			}
			a := addHostOn(b, r, stA, "hosta", 401, "key-a")
			hb := addHostOn(b, r, stB, "hostb", 402, "key-b")
			open := outboxtest.NewGateway()
			open.Ran = make(chan string, 1)
			dial := func(context.Context, string) (outbox.Caller, error) { return open, nil }
			route := func(owned bool) func(string) bool { return func(string) bool { return owned } }
			sender := hb.svc
			a.outbox = outbox.New(outbox.Options{Store: stA, Dial: dial, Delivers: route(mode == "cross")})
			hb.outbox = outbox.New(outbox.Options{Store: stB, Dial: dial, Delivers: route(mode == "local")})
			if mode == "cross" {
				sender = a.svc
			}
			a.run(b, r)
			hb.run(b, r)
			ctx := context.Background()
			var sends, dones, callbacks []time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				res, err := sender.Send(ctx, termapi.SendRequest{TerminalID: hb.agent.pane.TerminalID, Request: "bench", OriginSession: "agent:main:s1", GatewayURL: gw})
				if err != nil {
					b.Fatal(err)
				}
				sends = append(sends, time.Since(start))
				finished := time.Now()
				hb.agent.finish("ok", false)
				wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err = sender.WaitFor(wctx, res.TurnID, func(v termapi.TurnView) bool { return !Running(v.Status) })
				if err != nil {
					cancel()
					b.Fatal(err)
				}
				dones = append(dones, time.Since(finished))
				select {
				case <-open.Ran:
					callbacks = append(callbacks, time.Since(finished))
				case <-wctx.Done():
					cancel()
					b.Fatal("no callback run started within 10 s")
				}
				cancel()
			}
			b.StopTimer()
			report(b, "send", sends)
			report(b, "done", dones)
			report(b, "callback", callbacks)
		})
	}
}

func report(b *testing.B, what string, ds []time.Duration) {
	slices.Sort(ds)
	at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(at(0.50), what+"-p50-ms")
	b.ReportMetric(at(0.95), what+"-p95-ms")
}
