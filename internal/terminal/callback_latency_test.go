package terminal

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/gateway"
	"github.com/clawconnect/clawconnect/internal/store"
	hostpkg "github.com/clawconnect/clawconnect/internal/terminal/host"
	"github.com/clawconnect/clawconnect/internal/terminal/outbox"
	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/clawconnect/clawconnect/internal/testbed/realgateway"
	"github.com/clawconnect/clawconnect/plugins/openclaw"
	"github.com/clawconnect/clawconnect/termapi"
)

// timedCaller records how long each gateway call took, by method.
type timedCaller struct {
	c  outbox.Caller
	mu sync.Mutex
	d  map[string][]time.Duration
}

func (t *timedCaller) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	start := time.Now()
	raw, err := t.c.Call(ctx, method, params)
	t.mu.Lock()
	t.d[method] = append(t.d[method], time.Since(start))
	t.mu.Unlock()
	return raw, err
}

// last returns the duration of method's latest call.
func (t *timedCaller) last(method string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d := t.d[method]; len(d) > 0 {
		return d[len(d)-1]
	}
	return 0
}

// percentile returns the p-th percentile (nearest rank) of d.
func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

// latencyTurns is how many Turns BenchmarkCallbackLatencyRealGateway
// measures per iteration.
const latencyTurns = 50

// BenchmarkCallbackLatencyRealGateway measures, over 50 Turns against the
// real gateway 2026.9.6 with the ClawConnect plugin loaded, the time from
// the agent's completion record being written to the callback's run being
// started in S (chat.send answered "started"), as a daemon runs it: the
// Host's monitor sees the record, claims the completion with the callback
// in its transaction, and the outbox (woken by the change) calls
// clawconnect.callback and chat.send. It reports p50/p95 of the whole, of
// the two gateway calls, and of our own part (the whole minus the two
// calls: detection, claim, store and outbox scheduling). Each callback
// run is let finish before the next Turn, so S is idle when it is woken.
//
//	CLAWCONNECT_E2E=1 go test -run '^$' -bench CallbackLatencyRealGateway -benchtime=1x ./internal/terminal/
func BenchmarkCallbackLatencyRealGateway(b *testing.B) {
	if os.Getenv("CLAWCONNECT_E2E") != "1" {
		b.Skip("set CLAWCONNECT_E2E=1 to run against the real OpenClaw gateway")
	}
	ctx, cancel := context.WithTimeout(b.Context(), 20*time.Minute)
	defer cancel()
	g, err := realgateway.Start(ctx, realgateway.Options{
		Plugins: []realgateway.Plugin{{ID: "clawconnect", Dir: openclaw.Dir(), Config: map[string]any{"daemon": false}}}})
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	gc, err := gateway.Dial(ctx, gateway.Options{URL: g.URL(), Token: g.Token()})
	if err != nil {
		b.Fatal(err)
	}
	defer gc.Close()
	tc := &timedCaller{d: map[string][]time.Duration{}, c: gc}
	a := newFakeAgent(termapi.AgentCodex, 601)
	r := newRig(b, a)
	x := outbox.New(outbox.Options{Store: r.st, Dial: func(context.Context, string) (outbox.Caller, error) { return tc, nil },
		WaitTimeout: 30 * time.Second})
	r.start(r.svc, hostpkg.Options{Outbox: x})
	const S = "agent:main:cc-latency-s"
	var total, callback, send, own, history []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for n := range latencyTurns {
			marker := fmt.Sprintf("latency-%d-%d", i, n)
			res, err := r.svc.Send(ctx, termapi.SendRequest{TerminalID: a.pane.TerminalID, Request: "do " + marker, OriginSession: S})
			if err != nil {
				b.Fatal(err)
			}
			written := time.Now()
			a.finish("FAKE-REPLY: "+marker, false)
			cb := waitObserved(b, r, res.TurnID)
			var wake struct {
				At int64 `json:"at"`
			}
			_ = json.Unmarshal(cb.Wake, &wake)
			d := time.UnixMilli(wake.At).Sub(written)
			total = append(total, d)
			callback = append(callback, tc.last(outbox.CallbackMethod))
			send = append(send, tc.last("chat.send"))
			own = append(own, d-tc.last(outbox.CallbackMethod)-tc.last("chat.send"))
			if at := userRowAt(ctx, gc, S, marker); at > 0 {
				history = append(history, time.UnixMilli(at).Sub(written))
			}
		}
	}
	b.StopTimer()
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"total", total}, {"own", own}, {"plugin-callback", callback}, {"chat.send", send}, {"history-row", history}} {
		if len(m.d) == 0 {
			continue
		}
		b.ReportMetric(float64(percentile(m.d, 50).Microseconds())/1000, m.name+"-p50-ms")
		b.ReportMetric(float64(percentile(m.d, 95).Microseconds())/1000, m.name+"-p95-ms")
	}
	b.Logf("%d turns: completion record → callback run started in S: p50 %v p95 %v; our own part p50 %v p95 %v; "+
		"clawconnect.callback p50 %v p95 %v; chat.send p50 %v p95 %v; user row in chat.history p50 %v p95 %v (%d rows)",
		len(total), percentile(total, 50), percentile(total, 95), percentile(own, 50), percentile(own, 95),
		percentile(callback, 50), percentile(callback, 95), percentile(send, 50), percentile(send, 95),
		percentile(history, 50), percentile(history, 95), len(history))
}

// waitObserved waits until the Turn's callback is delivered and its run
// observed (finished), and returns it.
func waitObserved(b *testing.B, r *rig, turnID string) *store.Callback {
	b.Helper()
	var cbs []*store.Callback
	var err error
	if !poll.WithinEveryOn(2*time.Minute, 20*time.Millisecond, nextChangeOf(r.svc), func() bool {
		cbs, err = r.st.TurnCallbacks(b.Context(), turnID, 10)
		return err == nil && len(cbs) == 1 && cbs[0].Status == termapi.CallbackDelivered && len(cbs[0].RunObservation) > 0
	}) {
		b.Fatalf("callback of %s not delivered and observed: %+v, %v", turnID, cbs, err)
	}
	return cbs[0]
}

// userRowAt is the timestamp of S's user row that carries marker, or 0.
func userRowAt(ctx context.Context, gc *gateway.Client, key, marker string) int64 {
	h, err := gc.History(ctx, gateway.HistoryRequest{SessionKey: key, Limit: 20})
	if err != nil {
		return 0
	}
	for _, m := range h.Messages {
		if m.Role == "user" && strings.Contains(m.Text, marker) {
			return m.Timestamp
		}
	}
	return 0
}
