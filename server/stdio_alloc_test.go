package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
)

// TestStdioMessageAllocations bounds what the stdio connection allocates
// per message: the SDK's own stdio transport decoded each line three more
// times through a decoder that allocates a 32 KiB buffer each time (about
// 100 KiB per ping); the connection builds the message from the guard's
// one decode. Not parallel: it reads the process's allocation counter.
func TestStdioMessageAllocations(t *testing.T) {
	b := setup(t, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- b.srv.ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
	lines := bufio.NewScanner(outR)
	call := func(id int, line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
		if !lines.Scan() {
			t.Fatalf("no answer to request %d: %v", id, lines.Err())
		}
	}
	call(0, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	ping := func(id int) { call(id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id)) }
	for i := 1; i <= 20; i++ { // warm up
		ping(i)
	}
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range n {
		ping(100 + i)
	}
	runtime.ReadMemStats(&after)
	perPing := (after.TotalAlloc - before.TotalAlloc) / n
	// Both ends of the pipe are in this process, the test's scanner too;
	// the server's share was ~100 KiB per ping before.
	t.Logf("%d bytes allocated per ping", perPing)
	if perPing > 24<<10 {
		t.Errorf("a ping allocated %d bytes, want at most 24 KiB", perPing)
	}
	_ = inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestStdioCallAllocations bounds what a run_task + check_task round trip
// allocates on the stdio connection against a task service that
// allocates little: go-sdk's dispatch decoded each call's _meta and params
// through a decoder that allocates 32 KiB each time, and encoded the
// result and then the response around it; the stdio calls answer from the
// guard's decode and encode once. Not parallel: it reads the process's
// allocation counter.
func TestStdioCallAllocations(t *testing.T) {
	perRoundTrip := func(serve serveFunc) uint64 {
		p := startStdio(t, serve)
		p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
		p.next()
		p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		p.next()
		id := 1
		roundTrip := func() {
			id++
			p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_task","arguments":{"task":"ECHO=ok bench"}}}`, id))
			p.next()
			id++
			p.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"check_task","arguments":{"jobId":"job-%d","waitMs":10000}}}`, id, id/2))
			p.next()
		}
		for range 20 { // warm up
			roundTrip()
		}
		const n = 200
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			roundTrip()
		}
		runtime.ReadMemStats(&after)
		if _, err := p.end(); err != nil {
			t.Fatal(err)
		}
		return (after.TotalAlloc - before.TotalAlloc) / n
	}
	sdk := setup(t, nil)
	sdk.tasks.Instant = true
	viaSDK := perRoundTrip(sdk.srv.ServeStdioViaSDK)
	direct := setup(t, nil)
	direct.tasks.Instant = true
	past := perRoundTrip(direct.srv.ServeStdio)
	// Both ends of the pipes are in this process, the test's scanner too.
	t.Logf("bytes allocated per run_task + check_task: %d via go-sdk, %d past it", viaSDK, past)
	if past > viaSDK/2 {
		t.Errorf("a round trip past go-sdk allocated %d bytes, want at most half of go-sdk's %d", past, viaSDK)
	}
}
