package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// TestStdioSurvivesMalformedLines sends every kind of broken line a client
// could write; each gets a JSON-RPC error (or nothing, for a response), and
// the session keeps serving.
func TestStdioSurvivesMalformedLines(t *testing.T) {
	b := setup(t, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- b.srv.ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
	lines := []struct {
		line     string
		wantCode float64 // 0: no reply expected
		wantID   any
	}{
		{`this is not json`, -32700, nil},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`, 0, float64(1)},
		{`{"foo":1}`, -32600, nil},
		{`[1,2]`, -32600, nil},
		{`"str"`, -32600, nil},
		{`{"jsonrpc":"1.0","id":10,"method":"ping"}`, -32600, float64(10)},
		{`{"jsonrpc":"2.0","id":11,"method":5}`, -32600, float64(11)},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, -32600, nil},
		{`{"jsonrpc":"2.0","id":1e400,"method":"ping"}`, -32600, nil},
		{`{"jsonrpc":"2.0","id":12,"method":"ping","params":"x"}`, -32600, float64(12)},
		{`{"jsonrpc":"2.0","id":13}`, -32600, float64(13)},
		{`{"jsonrpc":"2.0","id":14,"error":"nope"}`, -32600, float64(14)},
		{`{"jsonrpc":"2.0","id":15,"method":"no/such/method"}`, -32601, float64(15)},
		{`{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"run_task","arguments":"oops"}}`, 0, float64(16)},
		{``, 0, nil},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 0, float64(2)},
	}
	go func() {
		for _, l := range lines {
			_, _ = io.WriteString(inW, l.line+"\n")
		}
	}()
	want := map[string]float64{}
	for _, l := range lines {
		if l.wantCode != 0 || l.wantID != nil {
			key, _ := json.Marshal(l.wantID)
			want[string(key)+l.line] = l.wantCode
		}
	}
	type reply struct {
		ID    any `json:"id"`
		Error *struct {
			Code float64 `json:"code"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	got := map[string]float64{} // id -> error code (0 for a result)
	nullErrors := 0
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<24)
	deadline := time.After(30 * time.Second)
	lineCh := make(chan string)
	go func() {
		for sc.Scan() {
			lineCh <- sc.Text()
		}
		close(lineCh)
	}()
	for len(got)+nullErrors < 15 {
		select {
		case l, ok := <-lineCh:
			if !ok {
				t.Fatalf("stdout closed early; got %v", got)
			}
			var r reply
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("non-JSON reply %q", l)
			}
			code := 0.0
			if r.Error != nil {
				code = r.Error.Code
			}
			if r.ID == nil {
				nullErrors++
				continue
			}
			key, _ := json.Marshal(r.ID)
			got[string(key)] = code
		case <-deadline:
			t.Fatalf("replies so far: %v and %d with null id", got, nullErrors)
		}
	}
	for _, l := range lines {
		if l.wantID == nil {
			continue
		}
		key, _ := json.Marshal(l.wantID)
		if code, ok := got[string(key)]; !ok || code != l.wantCode {
			t.Errorf("%s: reply code %v (present %v), want %v", l.line, code, ok, l.wantCode)
		}
	}
	if nullErrors != 6 {
		t.Errorf("null-id error replies = %d, want 6", nullErrors)
	}
	_ = inW.Close()
	go func() {
		for range lineCh {
		}
	}()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("ServeStdio = %v after malformed input, want nil at EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeStdio did not return after stdin closed")
	}
}

func FuzzStdioLine(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `not json`, `[1]`, `{"jsonrpc":"2.0","id":1e400,"method":"x"}`, `{"jsonrpc":"2.0","id":3,"result":{}}`} {
		f.Add(s)
	}
	b := setup(f, nil)
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\n\r") {
			return
		}
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		errc := make(chan error, 1)
		go func() { errc <- b.srv.ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
		go func() {
			_, _ = io.WriteString(inW, line+"\n"+`{"jsonrpc":"2.0","id":"probe","method":"ping"}`+"\n")
		}()
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"id":"probe"`) {
				break
			}
		}
		_ = inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		if err := <-errc; err != nil {
			t.Fatalf("line %q ended the session: %v", line, err)
		}
	})
}
