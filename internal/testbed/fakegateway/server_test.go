package fakegateway

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/poll"
	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rawConn is a bare protocol client for checking the wire format.
type rawConn struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialRaw(t *testing.T, s *Server) *rawConn {
	t.Helper()
	ws, _, err := websocket.Dial(t.Context(), s.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return &rawConn{t: t, ws: ws}
}

func (c *rawConn) send(v string) {
	c.t.Helper()
	if err := c.ws.Write(c.t.Context(), websocket.MessageText, []byte(v)); err != nil {
		c.t.Fatal(err)
	}
}

// next reads frames until one satisfies match.
func (c *rawConn) next(match func(map[string]any) bool) map[string]any {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 10*time.Second)
	defer cancel()
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			c.t.Fatalf("read: %v", err)
		}
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			c.t.Fatalf("frame is not JSON: %s", data)
		}
		if match(m) {
			return m
		}
	}
}

func isRes(id string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["type"] == "res" && m["id"] == id }
}

const connect = `{"type":"req","id":"c1","method":"connect","params":{"minProtocol":4,"maxProtocol":4,"client":{"id":"gateway-client","version":"t","platform":"linux","mode":"backend"},"role":"operator","scopes":["operator.read","operator.write"],"auth":{"token":"tok"}}}`

func TestWireFormat(t *testing.T) {
	s := New(t, Options{Token: "tok"})
	c := dialRaw(t, s)
	ch := c.next(func(m map[string]any) bool { return true })
	if ch["event"] != "connect.challenge" {
		t.Fatalf("first frame = %v, want connect.challenge", ch)
	}
	c.send(connect)
	hello := c.next(isRes("c1"))
	p := hello["payload"].(map[string]any)
	if p["type"] != "hello-ok" || p["protocol"] != float64(4) {
		t.Fatalf("hello = %v", hello)
	}

	c.send(`{"type":"req","id":"u","method":"no.such","params":{}}`)
	got := c.next(isRes("u"))
	if diff := cmp.Diff(map[string]any{"code": "INVALID_REQUEST", "message": "unknown method: no.such"}, got["error"]); diff != "" {
		t.Errorf("unknown method error (-want +got):\n%s", diff)
	}

	// agent answers twice: accepted, then the final result.
	c.send(`{"type":"req","id":"a","method":"agent","params":{"message":"hi","sessionKey":"s","idempotencyKey":"k1"}}`)
	first := c.next(isRes("a"))["payload"].(map[string]any)
	final := c.next(isRes("a"))["payload"].(map[string]any)
	if first["status"] != "accepted" || first["runId"] != "k1" || first["sessionKey"] != "agent:main:s" || final["status"] != "ok" {
		t.Errorf("agent answers = %v then %v", first, final)
	}
	// The same key again: one run, the stored result.
	c.send(`{"type":"req","id":"b","method":"agent","params":{"message":"hi","sessionKey":"s","idempotencyKey":"k1"}}`)
	if again := c.next(isRes("b"))["payload"].(map[string]any); again["status"] != "ok" || s.RunCount() != 1 {
		t.Errorf("resubmit = %v, runs %d", again, s.RunCount())
	}
	c.send(`{"type":"req","id":"h","method":"chat.history","params":{"sessionKey":"s"}}`)
	msgs := c.next(isRes("h"))["payload"].(map[string]any)["messages"].([]any)
	if len(msgs) != 2 {
		t.Errorf("history has %d rows, want 2", len(msgs))
	}
}

func TestHandshakeRefusals(t *testing.T) {
	tests := []struct {
		name, connect string
		wantCode      string
	}{
		{"wrong token", `{"type":"req","id":"c1","method":"connect","params":{"minProtocol":4,"maxProtocol":4,"client":{"id":"cli","mode":"cli"},"role":"operator","scopes":[],"auth":{"token":"bad"}}}`, "INVALID_REQUEST"},
		{"no auth", `{"type":"req","id":"c1","method":"connect","params":{"minProtocol":4,"maxProtocol":4,"client":{"id":"cli","mode":"cli"},"role":"operator","scopes":[]}}`, "NOT_PAIRED"},
		{"client id", `{"type":"req","id":"c1","method":"connect","params":{"minProtocol":4,"maxProtocol":4,"client":{"id":"akk","mode":"cli"},"role":"operator","scopes":[],"auth":{"token":"tok"}}}`, "INVALID_REQUEST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(t, Options{Token: "tok"})
			c := dialRaw(t, s)
			c.next(func(map[string]any) bool { return true })
			c.send(tt.connect)
			res := c.next(isRes("c1"))
			if res["ok"] != false || res["error"].(map[string]any)["code"] != tt.wantCode {
				t.Errorf("answer = %v, want %s", res, tt.wantCode)
			}
		})
	}
}

// TestCloseWhileClientsConnect: Close may run while connections are being
// accepted; it must stop them all (no goroutine added after it waited;
// -race reports a WaitGroup reuse) and refuse later ones.
func TestCloseWhileClientsConnect(t *testing.T) {
	s := Start(Options{})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				ws, _, err := websocket.Dial(ctx, s.URL(), nil)
				if err == nil {
					_, _, _ = ws.Read(ctx) // the challenge, or the close
					ws.CloseNow()
				}
				cancel()
			}
		}()
	}
	// Let the dialers get going: wait until the server saw some upgrades.
	poll.Within(10*time.Second, func() bool { return len(s.UpgradeHeaders()) >= 8 })
	s.Close()
	close(stop)
	wg.Wait()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if ws, _, err := websocket.Dial(ctx, s.URL(), nil); err == nil {
		ws.CloseNow()
		t.Fatal("Dial after Close succeeded")
	}
}

// TestEventsInTheGatewaysMemberOrder: events go out as the gateway writes
// them, type and event first, which is the prefix clients' fast path reads.
func TestEventsInTheGatewaysMemberOrder(t *testing.T) {
	s := New(t, Options{Token: "tok"})
	c := dialRaw(t, s)
	c.next(func(map[string]any) bool { return true }) // the challenge
	c.send(connect)
	c.next(isRes("c1"))
	c.send(`{"type":"req","id":"a","method":"agent","params":{"message":"hi","sessionKey":"s","idempotencyKey":"k1"}}`)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for seen := 0; seen < 2; {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		var f struct{ Type, Event string }
		if err := json.Unmarshal(data, &f); err != nil || f.Type != "event" || (f.Event != "agent" && f.Event != "chat") {
			continue
		}
		seen++
		if want := `{"type":"event","event":"` + f.Event + `","payload":{`; !strings.HasPrefix(string(data), want) {
			t.Fatalf("event frame %s does not start with %s", data, want)
		}
	}
}
