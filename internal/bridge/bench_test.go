package bridge_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clawconnect/clawconnect/server"
	"github.com/clawconnect/clawconnect/server/servertest"
	"github.com/clawconnect/clawconnect/taskapi"
)

// roundTrip is one run_task + check_task (wait) pair, the unit the targets
// measure.
func roundTrip(ctx context.Context, cs *mcp.ClientSession) error {
	run, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_task", Arguments: map[string]any{"task": "ECHO=ok bench"}})
	if err != nil {
		return err
	}
	if run.IsError {
		return fmt.Errorf("run_task: %v", run.Content)
	}
	jobID := run.StructuredContent.(map[string]any)["jobId"].(string)
	for {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "check_task", Arguments: map[string]any{"jobId": jobID, "waitMs": 10000}})
		if err != nil {
			return err
		}
		sc := res.StructuredContent.(map[string]any)
		if sc["isTerminal"] == true {
			if sc["status"] != "completed" {
				return fmt.Errorf("task %s ended %v", jobID, sc["status"])
			}
			return nil
		}
	}
}

// transports returns client sessions to srv over each transport.
func benchSessions(b *testing.B, srv *server.Server, scope taskapi.Scope) map[string]*mcp.ClientSession {
	b.Helper()
	out := map[string]*mcp.ClientSession{}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)

	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCPServer(scope, taskapi.Identity{}).Connect(context.Background(), st, nil)
	if err != nil {
		b.Fatal(err)
	}
	mem, err := client.Connect(context.Background(), ct, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = mem.Close(); _ = ss.Wait() })
	out["inmemory"] = mem

	// stdio: ServeStdio over pipes, the client speaking newline-delimited
	// JSON exactly as over a process's stdin/stdout.
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
	stdio, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdio.Close(); _ = inW.Close(); <-done })
	out["stdio"] = stdio

	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(ts.Close)
	web, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = web.Close() })
	out["http"] = web
	return out
}

// BenchmarkRoundTrip measures run_task + check_task through the server,
// over each transport: against the in-memory fake task service (the
// server's own overhead) and against the real task manager, SQLite store
// and the in-process fake gateway (the bridge's overhead against an instant
// gateway).
func BenchmarkRoundTrip(b *testing.B) {
	backends := map[string]func(b *testing.B) (*server.Server, taskapi.Scope){
		"fake": func(b *testing.B) (*server.Server, taskapi.Scope) {
			f := servertest.New()
			f.Instant = true
			reg := testRegistry(b)
			srv, err := server.New(server.Options{Tasks: f, Registry: reg})
			if err != nil {
				b.Fatal(err)
			}
			return srv, reg.FullScope()
		},
		"bridge": func(b *testing.B) (*server.Server, taskapi.Scope) {
			br, _, _ := openBridge(b, nil)
			timeouts := br.Timeouts()
			srv, err := server.New(server.Options{Tasks: br, Registry: br.Registry(), CheckWait: timeouts.CheckWait, CheckMaxWait: timeouts.CheckMaxWait})
			if err != nil {
				b.Fatal(err)
			}
			return srv, br.Registry().FullScope()
		},
	}
	for _, backend := range []string{"fake", "bridge"} {
		b.Run(backend, func(b *testing.B) {
			srv, scope := backends[backend](b)
			sessions := benchSessions(b, srv, scope)
			for _, tr := range []string{"inmemory", "stdio", "http"} {
				b.Run(tr, func(b *testing.B) {
					cs := sessions[tr]
					b.ReportAllocs()
					for b.Loop() {
						if err := roundTrip(b.Context(), cs); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkConcurrentClients runs 100 HTTP clients against one server over
// the real bridge and fake gateway; each op is one task (run + wait).
// It fails if any task is lost or stuck.
func BenchmarkConcurrentClients(b *testing.B) {
	const clients = 100
	br, _, _ := openBridge(b, nil)
	timeouts := br.Timeouts()
	srv, err := server.New(server.Options{Tasks: br, Registry: br.Registry(), CheckWait: timeouts.CheckWait, CheckMaxWait: timeouts.CheckMaxWait})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	b.Cleanup(ts.Close)
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	sessions := make([]*mcp.ClientSession, clients)
	for i := range sessions {
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp"}, nil)
		if err != nil {
			b.Fatal(err)
		}
		sessions[i] = cs
		b.Cleanup(func() { _ = cs.Close() })
	}
	b.ResetTimer()
	var next, failed atomic.Int64
	var firstErr error
	var once sync.Once
	start := time.Now()
	var wg sync.WaitGroup
	for _, cs := range sessions {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := roundTrip(context.Background(), cs); err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d tasks failed; first: %v", n, b.N, firstErr)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tasks/s")
}
