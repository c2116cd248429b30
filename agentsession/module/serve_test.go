package module

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/agentsession"
)

// serveBundle runs Serve over in-memory pipes.
type serveBundle struct {
	in      *io.PipeWriter
	out     *bufio.Scanner
	done    chan error
	cancel  context.CancelFunc
	started chan string
}

func newServeBundle(t *testing.T) *serveBundle {
	t.Helper()
	sb := &serveBundle{done: make(chan error, 1), started: make(chan string, 10)}
	reg := agentsession.NewRegistry()
	_ = reg.Register(agentsession.Runtime{ID: "rt", Provider: "p",
		Inspect: func(ctx context.Context, ref agentsession.Ref) (*agentsession.Observation, error) {
			switch ref.SessionID {
			case "block":
				sb.started <- ref.SessionID
				<-ctx.Done()
				return nil, ctx.Err()
			case "nil":
				return nil, nil
			case "badmeta":
				return &agentsession.Observation{Metadata: map[string]any{"f": func() {}}}, nil
			}
			return &agentsession.Observation{State: "idle", FinalResponse: "done " + ref.Runtime + "/" + ref.SessionID}, nil
		}})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	sb.in, sb.cancel = inW, cancel
	sb.out = bufio.NewScanner(outR)
	sb.out.Buffer(nil, 8<<20)
	go func() {
		err := Serve(ctx, reg, inR, outW)
		outW.Close()
		sb.done <- err
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		outR.Close()
		<-sb.done
	})
	return sb
}

func (sb *serveBundle) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(sb.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (sb *serveBundle) recv(t *testing.T) map[string]any {
	t.Helper()
	if !sb.out.Scan() {
		t.Fatalf("no response: %v", sb.out.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(sb.out.Bytes(), &m); err != nil {
		t.Fatalf("response %q is not JSON: %v", sb.out.Text(), err)
	}
	if m["jsonrpc"] != "2.0" {
		t.Errorf("response without jsonrpc 2.0: %v", m)
	}
	return m
}

func TestServe(t *testing.T) {
	sb := newServeBundle(t)
	tests := []struct {
		name string
		req  string
		want map[string]any
	}{
		{"describe", `{"jsonrpc":"2.0","id":1,"method":"describe","params":{"protocolVersion":1}}`,
			map[string]any{"jsonrpc": "2.0", "id": 1.0, "result": map[string]any{"protocolVersion": 1.0,
				"runtimes": []any{map[string]any{"id": "rt", "provider": "p", "operations": []any{"inspect"}}}}}},
		{"inspect with a string id", `{"jsonrpc":"2.0","id":"a","method":"inspect","params":{"runtime":"rt","ref":{"runtime":"ignored","sessionId":"s"},"timeoutMs":5000}}`,
			map[string]any{"jsonrpc": "2.0", "id": "a", "result": map[string]any{"state": "idle", "finalResponse": "done rt/s"}}},
		{"null result", `{"jsonrpc":"2.0","id":3,"method":"inspect","params":{"runtime":"rt","ref":{"sessionId":"nil"}}}`,
			map[string]any{"jsonrpc": "2.0", "id": 3.0, "result": nil}},
		{"unencodable observation", `{"jsonrpc":"2.0","id":4,"method":"inspect","params":{"runtime":"rt","ref":{"sessionId":"badmeta"}}}`,
			map[string]any{"jsonrpc": "2.0", "id": 4.0, "error": map[string]any{"code": -32000.0,
				"message": "encode observation: json: unsupported type: func()"}}},
		{"unsupported op", `{"jsonrpc":"2.0","id":5,"method":"continue","params":{"runtime":"rt","ref":{"sessionId":"s"},"prompt":"x"}}`,
			map[string]any{"jsonrpc": "2.0", "id": 5.0, "error": map[string]any{"code": -32601.0, "message": `runtime "rt" does not support continue`}}},
		{"unknown runtime", `{"jsonrpc":"2.0","id":6,"method":"inspect","params":{"runtime":"nope","ref":{}}}`,
			map[string]any{"jsonrpc": "2.0", "id": 6.0, "error": map[string]any{"code": -32602.0, "message": `unknown runtime "nope"`}}},
		{"bad params", `{"jsonrpc":"2.0","id":7,"method":"inspect","params":[1]}`,
			map[string]any{"jsonrpc": "2.0", "id": 7.0, "error": map[string]any{"code": -32602.0,
				"message": "invalid params: json: cannot unmarshal array into Go value of type module.callParams"}}},
		{"unknown method", `{"jsonrpc":"2.0","id":8,"method":"spawn"}`,
			map[string]any{"jsonrpc": "2.0", "id": 8.0, "error": map[string]any{"code": -32601.0, "message": `method "spawn" not found`}}},
		{"parse error", `{nope`,
			map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": -32700.0,
				"message": "parse error: invalid character 'n' looking for beginning of object key string"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sb.send(t, tc.req)
			if diff := cmp.Diff(tc.want, sb.recv(t)); diff != "" {
				t.Errorf("response mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("notifications and blank lines get no answer", func(t *testing.T) {
		sb.send(t, `{"jsonrpc":"2.0","method":"describe"}`)
		sb.send(t, `{"jsonrpc":"2.0","method":"inspect","params":{"runtime":"rt","ref":{}}}`)
		sb.send(t, `{"jsonrpc":"2.0","method":"whatever"}`)
		sb.send(t, ``)
		sb.send(t, `{"jsonrpc":"2.0","id":9,"method":"describe"}`)
		if got := sb.recv(t); got["id"] != 9.0 {
			t.Errorf("first answer after notifications: %v", got)
		}
	})
	t.Run("cancel notification cancels the call", func(t *testing.T) {
		sb.send(t, `{"jsonrpc":"2.0","id":10,"method":"inspect","params":{"runtime":"rt","ref":{"sessionId":"block"}}}`)
		<-sb.started
		sb.send(t, `{"jsonrpc":"2.0","method":"cancel","params":{"id":10}}`)
		got := sb.recv(t)
		want := map[string]any{"jsonrpc": "2.0", "id": 10.0, "error": map[string]any{"code": -32000.0, "message": "context canceled"}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("response mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("timeoutMs bounds the call", func(t *testing.T) {
		sb.send(t, `{"jsonrpc":"2.0","id":11,"method":"inspect","params":{"runtime":"rt","ref":{"sessionId":"block"},"timeoutMs":50}}`)
		<-sb.started
		got := sb.recv(t)
		if e, _ := got["error"].(map[string]any); e == nil || e["message"] != "context deadline exceeded" {
			t.Errorf("got %v", got)
		}
	})
	t.Run("a request line over the limit is rejected", func(t *testing.T) {
		sb.send(t, strings.Repeat("x", maxRequestBytes+10))
		got := sb.recv(t)
		if e, _ := got["error"].(map[string]any); e == nil || e["code"] != -32600.0 {
			t.Errorf("got %v", got)
		}
	})
	t.Run("end of input returns nil after in-flight calls answer", func(t *testing.T) {
		sb.send(t, `{"jsonrpc":"2.0","id":12,"method":"inspect","params":{"runtime":"rt","ref":{"sessionId":"s"}}}`)
		sb.in.Close()
		if got := sb.recv(t); got["id"] != 12.0 {
			t.Errorf("got %v", got)
		}
		if err := <-sb.done; err != nil {
			t.Errorf("Serve = %v", err)
		}
		sb.done <- nil // for the cleanup
	})
}

func TestServeContextCancel(t *testing.T) {
	sb := newServeBundle(t)
	sb.send(t, `{"jsonrpc":"2.0","id":1,"method":"inspect","params":{"runtime":"rt","ref":{"sessionId":"block"}}}`)
	<-sb.started
	sb.cancel()
	// The in-flight call is cancelled; Serve returns ctx's error.
	go func() {
		for sb.out.Scan() {
		}
	}()
	if err := <-sb.done; !errors.Is(err, context.Canceled) {
		t.Errorf("Serve = %v", err)
	}
	sb.in.Close()
	sb.done <- nil
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("pipe gone") }

func TestServeWriteAndReadErrors(t *testing.T) {
	reg := agentsession.NewRegistry()
	err := Serve(t.Context(), reg, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"describe"}`+"\n"), failingWriter{})
	if err == nil || !strings.Contains(err.Error(), "pipe gone") {
		t.Errorf("Serve with a failing writer = %v", err)
	}
	r, w := io.Pipe()
	w.CloseWithError(errors.New("broken stdin"))
	if err := Serve(t.Context(), reg, r, io.Discard); err == nil || !strings.Contains(err.Error(), "broken stdin") {
		t.Errorf("Serve with a failing reader = %v", err)
	}
}

func TestLineReader(t *testing.T) {
	in := "short\n" + strings.Repeat("a", 25) + "\n\nlast"
	lr := newLineReader(strings.NewReader(in), 10)
	type line struct {
		Text    string
		TooLong bool
	}
	var got []line
	for {
		l, tooLong, err := lr.next()
		if err != nil {
			if err != io.EOF {
				t.Fatal(err)
			}
			break
		}
		got = append(got, line{string(l), tooLong})
	}
	want := []line{{"short", false}, {"aaaaaaaaaa", true}, {"", false}, {"last", false}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines mismatch (-want +got):\n%s", diff)
	}
}

// FuzzServe feeds arbitrary input to Serve: it must not panic, and every
// line it writes must be a JSON-RPC 2.0 message.
func FuzzServe(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"describe"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"inspect","params":{"runtime":"rt","ref":{"sessionId":"s"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"cancel","params":{"id":2}}` + "\n{\n[]\nnull\n"))
	reg := agentsession.NewRegistry()
	_ = reg.Register(agentsession.Runtime{ID: "rt", Inspect: func(context.Context, agentsession.Ref) (*agentsession.Observation, error) {
		return &agentsession.Observation{State: "running"}, nil
	}})
	f.Fuzz(func(t *testing.T, data []byte) {
		var out bytes.Buffer
		if err := Serve(context.Background(), reg, bytes.NewReader(data), &out); err != nil {
			t.Fatalf("Serve = %v", err)
		}
		for line := range strings.SplitSeq(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if line == "" {
				continue
			}
			var m message
			if err := json.Unmarshal([]byte(line), &m); err != nil || m.JSONRPC != "2.0" {
				t.Fatalf("bad output line %q: %v", line, err)
			}
		}
	})
}

// FuzzReplies feeds arbitrary module output to the loader's reply reader:
// it must not panic, and it must deliver only well-formed responses to the
// request they answer.
func FuzzReplies(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":2,"result":{"state":"running"}}` + "\n"))
	f.Add([]byte("not json\n" + `{"jsonrpc":"2.0","id":99,"result":null}` + "\n" + `{"id":2,"method":"x"}`))
	cfg := &config{log: slog.New(slog.DiscardHandler), maxLine: 1 << 10}
	f.Fuzz(func(t *testing.T, data []byte) {
		ch := make(chan *message, 1)
		p := &proc{c: &moduleClient{name: "fuzz", cfg: cfg}, cmd: &exec.Cmd{}, pending: map[int64]chan *message{2: ch}}
		p.readReplies(bytes.NewReader(data))
		select {
		case m := <-ch:
			if m == nil || m.Method != "" {
				t.Fatalf("delivered %+v", m)
			}
		default:
		}
	})
}

func TestServeIDKey(t *testing.T) {
	for _, tc := range []struct{ a, b string }{{`1`, `1.0`}, {`"x"`, `"x"`}, {` 2`, `2`}} {
		if idKey(json.RawMessage(tc.a)) != idKey(json.RawMessage(tc.b)) {
			t.Errorf("idKey(%s) != idKey(%s)", tc.a, tc.b)
		}
	}
	if idKey(json.RawMessage(`{bad`)) != "{bad" {
		t.Error("idKey of invalid JSON")
	}
}
