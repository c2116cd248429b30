package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/server"
)

// stdioPeer is a client of one stdio connection, a line at a time.
type stdioPeer struct {
	t     testing.TB // reset by a fuzz target for each input
	in    *io.PipeWriter
	lines chan string
	errc  chan error
}

type serveFunc func(ctx context.Context, r io.Reader, w io.Writer) error

func startStdio(t testing.TB, serve serveFunc) *stdioPeer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &stdioPeer{t: t, in: inW, lines: make(chan string, 16), errc: make(chan error, 1)}
	go func() { p.errc <- serve(context.Background(), inR, outW); _ = outW.Close() }()
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	return p
}

func (p *stdioPeer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatal(err)
	}
}

// next returns the next line the server wrote.
func (p *stdioPeer) next() string {
	p.t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatal("stdout closed")
		}
		return l
	case <-time.After(30 * time.Second):
		p.t.Fatal("no line from the server in 30 s")
	}
	return ""
}

// end closes stdin and returns what the server wrote after that and what
// ServeStdio returned.
func (p *stdioPeer) end() ([]string, error) {
	_ = p.in.Close()
	var rest []string
	for l := range p.lines {
		rest = append(rest, l)
	}
	return rest, <-p.errc
}

// stdioStep is one line a client sends; reply when an answer is due
// before the next, direct when the stdio calls (not go-sdk) answer it.
type stdioStep struct {
	line          string
	reply, direct bool
}

func toolCall(id, name, args string, direct bool) stdioStep {
	return stdioStep{fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, name, args), true, direct}
}

func rpcStep(id, method, params string, direct bool) stdioStep {
	return stdioStep{fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, params), true, direct}
}

// TestStdioCallsAgree holds the stdio calls to go-sdk: the same lines, sent
// to ServeStdio and to a server that hands every message to go-sdk, get
// the same bytes back, line for line; and the plain calls of an
// initialized session (and only they) were answered past go-sdk.
func TestStdioCallsAgree(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, initParams string }{
		{"2025-11-25", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}`},
		{"2026-07-28 with tasks", `{"protocolVersion":"2026-07-28","capabilities":{"extensions":{"` + server.TasksExtension + `":{}}},"clientInfo":{"name":"x","version":"1"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			stdioCallsAgree(t, c.initParams)
		})
	}
}

func stdioCallsAgree(t *testing.T, initParams string) {
	steps := []stdioStep{
		toolCall("0", "list_agents", `{}`, false), // before initialize: refused
		rpcStep("1", "initialize", initParams, false),
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false, false},
		rpcStep("2", "tools/list", `{}`, false), // answered once the tools are registered
		toolCall("3", "run_task", `{"task":"ECHO=ok <b>&amp; é \u2028 \ud83d\ude00","senderName":"Ann"}`, true),
		toolCall(`"s-<&>\u2028"`, "check_task", `{"jobId":"job-1","waitMs":1000}`, true),
		toolCall("5", "get_task", `{"taskId":"job-1","detail":"full"}`, true),
		toolCall("6", "get_task", `{"taskId":"job-1","detail":"prompt"}`, true),
		toolCall("7", "list_tasks", `{}`, true),
		toolCall("8", "list_sessions", `{}`, true),
		toolCall("9", "get_session", `{"sessionId":"agent:alpha:clawconnect:1"}`, true),
		toolCall("10", "cancel_task", `{"taskId":"job-1"}`, true),
		toolCall("11", "list_agents", `{}`, true),
		toolCall("12", "get_connection_info", `{}`, true),
		toolCall("13", "run_task", `{"task":"  "}`, true),                // the handler's error
		toolCall("14", "run_task", `{"task":"x","agent":"nope"}`, false), // an enum miss
		toolCall("15", "check_task", `{}`, true),
		toolCall("16", "get_task", `{"taskId":"missing"}`, true),
		toolCall("17", "check_task", `{"jobId":"<x>&"}`, true),
		toolCall("18", "get_session", `{"sessionId":"nope"}`, true),
		toolCall("19", "run_task", `{"task":"again","sessionKey":"agent:alpha:clawconnect:1"}`, true),
		toolCall("20", "no_such_tool", `{}`, false),
		toolCall("21.0", "list_agents", `{}`, true),
		toolCall("-22", "list_agents", `{}`, true),
		toolCall("23", "run_task", `{"task":"x","extra":1}`, false),
		rpcStep("24", "tools/call", `{"name":"check_task","arguments":{"jobId":"job-2"},"_meta":{"progressToken":"p","claudecode/toolUseId":"t"}}`, true),
		rpcStep("25", "tools/call", `{"name":"list_agents","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`, false),
		rpcStep("26", "tools/call", `{"name":"list_agents","arguments":{},"_meta":{"progressToken":{"a":1}}}`, false),
		rpcStep("27", "tools/call", `{"name":"nope","name":"list_agents","arguments":{}}`, true),
		rpcStep("28", "tools/call", `{"Name":"list_agents","arguments":{}}`, false),
		rpcStep("29", "tools/call", `{"name":"list_agents","arguments":{},"requestState":"s"}`, false),
		rpcStep("30", "tools/call", `{"name":"list_agents"}`, false),
		rpcStep("31", "tools/call", `{"name":"list_agents","arguments":null}`, false),
		rpcStep("32", "tools/call", `{"name":5,"arguments":{}}`, false),
		rpcStep("33", "ping", `{}`, false),
	}
	run := func(serve func(b *bundle, counted *atomic.Int64) serveFunc) (out []string, direct []bool) {
		b := setup(t, nil)
		b.tasks.Instant = true
		var counted atomic.Int64
		p := startStdio(t, serve(b, &counted))
		for _, s := range steps {
			before := counted.Load()
			p.send(s.line)
			if s.reply {
				out = append(out, p.next())
			}
			direct = append(direct, counted.Load() > before)
		}
		rest, err := p.end()
		if err != nil {
			t.Fatalf("ServeStdio = %v", err)
		}
		return append(out, rest...), direct
	}
	want, _ := run(servedViaSDK)
	got, direct := run(servedCounting)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers via go-sdk (-) and ServeStdio (+) differ:\n%s", diff)
	}
	for i, s := range steps {
		if direct[i] != s.direct {
			t.Errorf("%s: answered past go-sdk %v, want %v", s.line, direct[i], s.direct)
		}
	}
}

// servedViaSDK and servedCounting are the two ways of serving stdio the
// tests compare: every message through go-sdk, and ServeStdio counting
// the calls it answers past go-sdk.
func servedViaSDK(b *bundle, _ *atomic.Int64) serveFunc { return b.srv.ServeStdioViaSDK }

func servedCounting(b *bundle, counted *atomic.Int64) serveFunc {
	return func(ctx context.Context, r io.Reader, w io.Writer) error {
		return b.srv.ServeStdioCounted(ctx, r, w, counted)
	}
}

// TestStdioCallsWaitAndCancel holds the stdio calls to go-sdk for a call
// that waits: its progress notifications, other requests answered while it
// waits, a second call with its id dropped, its answer once
// notifications/cancelled names it, and, for one still waiting when stdin
// closes, no answer after the end of input's grace, and ServeStdio
// returning.
func TestStdioCallsWaitAndCancel(t *testing.T) {
	t.Parallel()
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	run := func(serve func(b *bundle, counted *atomic.Int64) serveFunc) (out []string, direct int64) {
		b := setup(t, nil)
		var counted atomic.Int64
		p := startStdio(t, serve(b, &counted))
		p.send(initialize)
		out = append(out, p.next())
		p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		out = append(out, p.next())
		p.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_task","arguments":{"task":"waits"}}}`)
		out = append(out, p.next())
		p.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"check_task","arguments":{"jobId":"job-1","waitMs":60000},"_meta":{"progressToken":7}}}`)
		if got := <-b.tasks.Waiting; got != "job-1" {
			t.Fatalf("waiting on %q, want job-1", got)
		}
		b.tasks.Log("job-1", "step one")
		out = append(out, p.next()) // the progress notification
		// A call with the id of the one waiting is dropped; a ping is
		// answered meanwhile.
		p.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_agents","arguments":{}}}`)
		p.send(`{"jsonrpc":"2.0","id":5,"method":"ping"}`)
		out = append(out, p.next())
		p.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4,"reason":"enough"}}`)
		out = append(out, p.next())
		p.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"run_task","arguments":{"task":"never ends"}}}`)
		out = append(out, p.next())
		p.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"check_task","arguments":{"jobId":"job-2","waitMs":60000}}}`)
		if got := <-b.tasks.Waiting; got != "job-2" {
			t.Fatalf("waiting on %q, want job-2", got)
		}
		rest, err := p.end() // after the grace, the wait is cut and not answered
		if err != nil {
			t.Fatalf("ServeStdio = %v", err)
		}
		return append(out, rest...), counted.Load()
	}
	want, _ := run(servedViaSDK)
	got, direct := run(servedCounting)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines via go-sdk (-) and ServeStdio (+) differ:\n%s", diff)
	}
	if direct != 4 {
		t.Errorf("%d calls answered past go-sdk, want 4 (the run_tasks and check_tasks)", direct)
	}
	if len(want) != 7 {
		t.Errorf("go-sdk wrote %d lines, want 7:\n%s", len(want), strings.Join(want, "\n"))
	}
}

// BenchmarkStdioCall is one run_task + check_task over the stdio
// connection against the in-memory task service (instant), with every
// message handed to go-sdk and with the stdio calls answering past it.
func BenchmarkStdioCall(b *testing.B) {
	for _, c := range []struct {
		name  string
		serve func(*server.Server) serveFunc
	}{
		{"via-sdk", func(s *server.Server) serveFunc { return s.ServeStdioViaSDK }},
		{"direct", func(s *server.Server) serveFunc { return s.ServeStdio }},
	} {
		b.Run(c.name, func(b *testing.B) {
			bd := setup(b, nil)
			bd.tasks.Instant = true
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			errc := make(chan error, 1)
			go func() { errc <- c.serve(bd.srv)(context.Background(), inR, outW); _ = outW.Close() }()
			sc := bufio.NewScanner(outR)
			sc.Buffer(nil, 1<<24)
			exchange := func(line string) {
				if _, err := io.WriteString(inW, line+"\n"); err != nil {
					b.Fatal(err)
				}
				if !sc.Scan() {
					b.Fatalf("no answer: %v", sc.Err())
				}
			}
			exchange(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
			exchange(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			id := 1
			b.ReportAllocs()
			for b.Loop() {
				id++
				exchange(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_task","arguments":{"task":"ECHO=ok bench"}}}`, id))
				id++
				exchange(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"check_task","arguments":{"jobId":"job-%d","waitMs":10000}}}`, id, id/2))
			}
			b.StopTimer()
			_ = inW.Close()
			go func() { _, _ = io.Copy(io.Discard, outR) }()
			if err := <-errc; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// FuzzStdioCallParams: whatever the params of a tools/call, a call the
// stdio calls answer gets the bytes go-sdk would have answered (see
// TestStdioCallsAgree). A call both hand to go-sdk is not compared: its
// refusal may name unexpected properties in map order.
func FuzzStdioCallParams(f *testing.F) {
	for _, s := range []string{
		`{"name":"list_agents","arguments":{}}`,
		`{"name":"run_task","arguments":{"task":"x <&>"},"_meta":{"progressToken":1}}`,
		`{"name":"check_task","arguments":{"jobId":"job-1","waitMs":0}}`,
		`{"name":"get_task","arguments":{"taskId":"job-1","detail":"full"},"_meta":{"a":null,"b":true}}`,
		`{"name":"check_task","name":"list_agents","arguments":{"jobId":"j"}}`,
	} {
		f.Add(s)
	}
	start := func(serve func(*bundle) serveFunc) *stdioPeer {
		b := setup(f, nil)
		b.tasks.Instant = true
		p := startStdio(f, serve(b))
		p.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
		p.next()
		p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		p.next()
		f.Cleanup(func() { _, _ = p.end() })
		return p
	}
	var counted atomic.Int64
	viaSDK := start(func(b *bundle) serveFunc { return b.srv.ServeStdioViaSDK })
	direct := start(func(b *bundle) serveFunc {
		return func(ctx context.Context, r io.Reader, w io.Writer) error {
			return b.srv.ServeStdioCounted(ctx, r, w, &counted)
		}
	})
	n := 1
	f.Fuzz(func(t *testing.T, params string) {
		if strings.ContainsAny(params, "\n\r") || !json.Valid([]byte(params)) || !strings.HasPrefix(strings.TrimSpace(params), "{") {
			return // the guard answers these itself, the same on both paths
		}
		n++
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, n, params)
		viaSDK.t, direct.t = t, t
		before := counted.Load()
		viaSDK.send(line)
		direct.send(line)
		want, got := viaSDK.next(), direct.next()
		if counted.Load() > before && want != got {
			t.Errorf("%s:\nvia go-sdk %s\nServeStdio %s", line, want, got)
		}
	})
}
