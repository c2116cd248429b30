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
	"github.com/clawconnect/clawconnect/internal/testbed/cputime"
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
		cpu0 := cputime.Self()                                 // the fake gateway's share included, in both variants alike
		prefix := strconv.FormatInt(time.Now().UnixNano(), 36) // fresh idempotency keys per invocation
		for i := 0; b.Loop(); i++ {
			run, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: "bench-" + strconv.Itoa(i%8), Message: "hi",
				IdempotencyKey: prefix + "-" + strconv.Itoa(i)})
			if err != nil {
				b.Fatal(err)
			}
			out, err := run.Wait(ctx)
			if err != nil || out.Text != "FAKE-REPLY: hi" {
				b.Fatalf("outcome %+v, %v", out, err)
			}
			run.Close()
		}
		b.ReportMetric(float64((cputime.Self()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
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
		cpu0 := cputime.Self()
		prefix := strconv.FormatInt(time.Now().UnixNano(), 36)
		for i := 0; b.Loop(); i++ {
			id := prefix + "-raw-" + strconv.Itoa(i)
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
		b.ReportMetric(float64((cputime.Self()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}

// BenchmarkLiveRunMemory reports the heap held per followed, unfinished
// run: b.N runs are started against the in-process fake and held open,
// then the heap growth is divided by b.N. The figure includes the fake
// gateway's own per-run state (same process), so it is an upper bound for
// the client. goroutines/run counts both sides too (the client's share is
// one: the run loop).
func BenchmarkLiveRunMemory(b *testing.B) {
	gw := fakegateway.Start(fakegateway.Options{Token: fakegateway.Token,
		Script: func(fakegateway.Submit) fakegateway.Turn { return fakegateway.Turn{Hold: true, Reply: "x"} }})
	defer gw.Close()
	ctx := context.Background()
	c, err := gateway.Dial(ctx, gateway.Options{URL: gw.URL(), Token: fakegateway.Token})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	g0 := runtime.NumGoroutine()
	live := make([]*gateway.Run, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := c.StartRun(ctx, gateway.RunRequest{SessionKey: fmt.Sprintf("mem-%d", i), Message: "m",
			IdempotencyKey: fmt.Sprintf("mem-%d-%d-%d", time.Now().UnixNano(), b.N, i)})
		if err != nil {
			b.Fatal(err)
		}
		live = append(live, r)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(b.N), "heapB/run")
	b.ReportMetric(float64(runtime.NumGoroutine()-g0)/float64(b.N), "goroutines/run")
	for _, r := range live {
		r.Close()
	}
}
