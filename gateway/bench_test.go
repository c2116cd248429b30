package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
	"github.com/coder/websocket"
)

// BenchmarkSubmitToFinal measures submit → final outcome against the
// instant in-process fake. "client" is this package's StartRun+Wait;
// "raw" is the floor: a bare WebSocket loop that sends the same agent
// request and reads frames until the run's chat final (the fake's own time
// plus transport). The client's overhead is client − raw.
func BenchmarkSubmitToFinal(b *testing.B) {
	gw := fakegateway.Start(fakegateway.Options{Token: fakegateway.Token})
	defer gw.Close()
	ctx := context.Background()

	b.Run("client", func(b *testing.B) {
		c, err := gateway.Dial(ctx, gateway.Options{URL: gw.URL(), Token: fakegateway.Token})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "bench-" + strconv.Itoa(i%8), Message: "hi",
				IdempotencyKey: fmt.Sprintf("client-%d-%d", b.N, i)})
			if err != nil {
				b.Fatal(err)
			}
			out, err := run.Wait(ctx)
			if err != nil || out.Text != "FAKE-REPLY: hi" {
				b.Fatalf("outcome %+v, %v", out, err)
			}
			run.Close()
		}
	})

	b.Run("raw", func(b *testing.B) {
		ws, _, err := websocket.Dial(ctx, gw.URL(), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ws.CloseNow()
		ws.SetReadLimit(32 << 20)
		_, _, _ = ws.Read(ctx) // challenge
		connect := `{"type":"req","id":"c","method":"connect","params":{"minProtocol":4,"maxProtocol":4,"client":{"id":"gateway-client","version":"b","platform":"linux","mode":"backend"},"role":"operator","scopes":["operator.read","operator.write"],"caps":[],"auth":{"token":"` + fakegateway.Token + `"}}}`
		if err := ws.Write(ctx, websocket.MessageText, []byte(connect)); err != nil {
			b.Fatal(err)
		}
		_, _, _ = ws.Read(ctx) // hello-ok
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			id := fmt.Sprintf("raw-%d-%d", b.N, i)
			req := fmt.Sprintf(`{"type":"req","id":%q,"method":"agent","params":{"message":"hi","sessionKey":"agent:main:raw-%d","idempotencyKey":%q}}`, id, i%8, id)
			if err := ws.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
				b.Fatal(err)
			}
			for {
				_, data, err := ws.Read(ctx)
				if err != nil {
					b.Fatal(err)
				}
				var f struct {
					Event   string `json:"event"`
					Payload struct {
						RunID string `json:"runId"`
						State string `json:"state"`
					} `json:"payload"`
				}
				_ = json.Unmarshal(data, &f)
				if f.Event == "chat" && f.Payload.RunID == id && f.Payload.State == "final" {
					break
				}
			}
		}
	})
}

// BenchmarkLiveRunMemory reports the heap held per followed, unfinished
// run (the Run, its goroutines' stacks are not on the heap: see the
// goroutine count metric) on the client side.
func BenchmarkLiveRunMemory(b *testing.B) {
	const runs = 200
	gw := fakegateway.Start(fakegateway.Options{Token: fakegateway.Token,
		Script: func(fakegateway.Submit) fakegateway.Turn { return fakegateway.Turn{Hold: true, Reply: "x"} }})
	defer gw.Close()
	ctx := context.Background()
	c, err := gateway.Dial(ctx, gateway.Options{URL: gw.URL(), Token: fakegateway.Token})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var perRun, gPerRun float64
	for i := 0; b.Loop(); i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		live := make([]*gateway.Run, 0, runs)
		for j := range runs {
			r, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: fmt.Sprintf("mem-%d", j), Message: "m",
				IdempotencyKey: fmt.Sprintf("mem-%d-%d-%d", b.N, i, j)})
			if err != nil {
				b.Fatal(err)
			}
			live = append(live, r)
		}
		// Let every waiter's agent.wait reach the gateway before measuring.
		deadline := time.Now().Add(10 * time.Second)
		for gw.CountRequests("agent.wait") < (i+1)*runs && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perRun = float64(after.HeapAlloc-before.HeapAlloc) / runs
		gPerRun = float64(runtime.NumGoroutine()-g0) / runs
		for _, r := range live {
			r.Close()
		}
	}
	b.ReportMetric(perRun, "heapB/run")
	b.ReportMetric(gPerRun, "goroutines/run")
}
