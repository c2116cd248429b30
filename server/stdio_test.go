package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/server"
)

// TestStdioSurvivesMalformedLines sends every kind of broken line a client
// could write; each gets a JSON-RPC error (or nothing, for a response), and
// the session keeps serving.
func TestStdioSurvivesMalformedLines(t *testing.T) {
	t.Parallel()
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

// TestStdioAnswersRequestsReadBeforeEOF: a client that writes its
// requests and closes stdin at once (echo ... | clawconnect mcp) still gets
// an answer to each, and a check_task still waiting when stdin closes is cut
// after a short grace instead of holding the exit.
func TestStdioAnswersRequestsReadBeforeEOF(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	run, err := b.tasks.Run(t.Context(), server.RunRequest{Task: "never ends"})
	if err != nil {
		t.Fatal(err)
	}
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_tasks","arguments":{}}}`,
	}, "\n") + "\n"
	for i := range 20 { // the answers used to race the end of input
		var out safeBuffer
		if err := b.srv.ServeStdio(t.Context(), strings.NewReader(input), &out); err != nil {
			t.Fatalf("round %d: ServeStdio = %v", i, err)
		}
		for _, id := range []string{`"id":1,`, `"id":2,`, `"id":3,`} {
			if !strings.Contains(out.String(), id) {
				t.Fatalf("round %d: no answer with %s in %q", i, id, out.String())
			}
		}
	}
	waiting := input + `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"check_task","arguments":{"jobId":"` + run.JobID + `","waitMs":120000}}}` + "\n"
	done := make(chan error, 1)
	go func() { done <- b.srv.ServeStdio(t.Context(), strings.NewReader(waiting), &safeBuffer{}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeStdio with a waiting check_task = %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a waiting check_task held the exit after stdin closed")
	}
}

// safeBuffer is a bytes.Buffer safe for the SDK's concurrent writers.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStdioOversizedLineKeepsItsID is issue 11 item 11: a line over 16 MiB
// is answered with the id found at its start, so the client waiting on
// that id is not left hanging; when no id can be found it is null. The
// session goes on.
func TestStdioOversizedLineKeepsItsID(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- b.srv.ServeStdio(context.Background(), inR, outW); _ = outW.Close() }()
	huge := strings.Repeat("a", server.MaxStdioLineBytes+10)
	lines := []string{
		`{"jsonrpc":"2.0","id":"big-1","method":"tools/call","params":{"name":"run_task","arguments":{"task":"` + huge + `"}}}`,
		`{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"nested":[1,{"x":"y"}],"task":"` + huge + `"}},"id":42}`,
		`{"jsonrpc":"2.0","id":{"bad":1},"method":"x","params":"` + huge + `"}`,
		`{"jsonrpc":"2.0","id":"after","method":"ping"}`,
	}
	go func() {
		for _, l := range lines {
			_, _ = io.WriteString(inW, l+"\n")
		}
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	var ids []string
	for len(ids) < 4 && sc.Scan() {
		var r struct {
			ID    json.RawMessage `json:"id"`
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reply %q: %v", sc.Text(), err)
		}
		ids = append(ids, string(r.ID))
	}
	want := []string{`"big-1"`, `null`, `null`, `"after"`}
	// The first line's id is at its start and recovered; the second's
	// comes after the huge params and cannot be; the third is not a valid
	// id. Replies to the two oversized lines without an id are both null.
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("reply ids (-want +got):\n%s", diff)
	}
	_ = inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	if err := <-errc; err != nil {
		t.Fatalf("ServeStdio = %v", err)
	}
}
