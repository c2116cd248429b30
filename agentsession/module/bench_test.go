package module

import (
	"slices"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/agentsession"
)

// BenchmarkInspectRoundTrip measures one inspect through the registry, the
// loader and a Go module built on Serve (the test binary), reporting the
// median and 99th-percentile latency.
func BenchmarkInspectRoundTrip(b *testing.B) {
	reg := agentsession.NewRegistry()
	l := Load(b.Context(), helperSpec(b), reg, LoadOptions{Env: helperEnv("basic")})
	defer l.Close()
	if !reg.Has("go-rt") {
		b.Fatal("helper module not loaded")
	}
	ref := agentsession.Ref{Runtime: "go-rt", SessionID: "s1"}
	req := agentsession.Request{Op: agentsession.OpInspect}
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		st := reg.Dispatch(b.Context(), ref, req, agentsession.CallOptions{})
		lat = append(lat, time.Since(start))
		if st.Error != nil {
			b.Fatal(st.Error)
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkConcurrentInspects measures inspect throughput with many callers
// sharing one module process (calls multiplexed by id).
func BenchmarkConcurrentInspects(b *testing.B) {
	reg := agentsession.NewRegistry()
	l := Load(b.Context(), helperSpec(b), reg, LoadOptions{Env: helperEnv("basic")})
	defer l.Close()
	ref := agentsession.Ref{Runtime: "go-rt", SessionID: "s1"}
	req := agentsession.Request{Op: agentsession.OpInspect}
	b.SetParallelism(8)
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if st := reg.Dispatch(b.Context(), ref, req, agentsession.CallOptions{}); st.Error != nil {
				b.Error(st.Error)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "inspects/s")
}
