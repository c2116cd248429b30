package realgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// Probe is a minimal, synchronous OpenClaw Gateway connection used by the
// harness for readiness checks and by tests that must not depend on the
// product's gateway client (which imports nothing from here, so its own
// tests can use this harness). It speaks just enough protocol v4: the
// challenge, connect with the shared token as gateway-client/backend, and
// request/response calls. It is not safe for concurrent use.
type Probe struct {
	ws    *websocket.Conn
	hello json.RawMessage
	ids   atomic.Int64
}

// ProbeError is a gateway error answer ({ok:false, error:{…}}).
type ProbeError struct {
	Code         string          `json:"code"`
	Message      string          `json:"message"`
	Retryable    bool            `json:"retryable"`
	RetryAfterMs int             `json:"retryAfterMs"`
	Details      json.RawMessage `json:"details"`
}

func (e *ProbeError) Error() string { return e.Code + ": " + e.Message }

type frame struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	OK      bool            `json:"ok"`
	Event   string          `json:"event"`
	Payload json.RawMessage `json:"payload"`
	Error   *ProbeError     `json:"error"`
}

// DialProbe connects to url (ws://host:port), waits for connect.challenge
// and completes the handshake with token. A gateway still starting answers
// with a *ProbeError whose Retryable is true.
func DialProbe(ctx context.Context, url, token string) (*Probe, error) {
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		return nil, fmt.Errorf("probe: dial %s: %w", url, err)
	}
	ws.SetReadLimit(32 << 20)
	p := &Probe{ws: ws}
	ch, err := p.read(ctx)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("probe: wait for challenge: %w", err)
	}
	if ch.Type != "event" || ch.Event != "connect.challenge" {
		p.Close()
		return nil, fmt.Errorf("probe: first frame is %s %s, want the connect.challenge event", ch.Type, ch.Event)
	}
	hello, err := p.Call(ctx, "connect", map[string]any{
		"minProtocol": 4, "maxProtocol": 4,
		"client": map[string]any{"id": "gateway-client", "version": "clawconnect-testbed", "platform": "linux", "mode": "backend"},
		"role":   "operator",
		"scopes": []string{"operator.read", "operator.write", "operator.admin"},
		"auth":   map[string]any{"token": token},
	})
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("probe: connect: %w", err)
	}
	var h struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(hello, &h) != nil || h.Type != "hello-ok" {
		p.Close()
		return nil, fmt.Errorf("probe: connect answered %.200s, want hello-ok", hello)
	}
	p.hello = hello
	return p, nil
}

// Hello is the raw hello-ok payload.
func (p *Probe) Hello() json.RawMessage { return p.hello }

// Methods lists hello-ok's features.methods.
func (p *Probe) Methods() []string {
	var h struct {
		Features struct {
			Methods []string `json:"methods"`
		} `json:"features"`
	}
	_ = json.Unmarshal(p.hello, &h) // checked to be an object by DialProbe
	return h.Features.Methods
}

// Call sends one request and returns the payload of its first response,
// skipping events (and responses to other ids) meanwhile. A gateway error
// comes back as *ProbeError.
func (p *Probe) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := "probe-" + strconv.FormatInt(p.ids.Add(1), 10)
	req, err := json.Marshal(map[string]any{"type": "req", "id": id, "method": method, "params": params})
	if err != nil {
		return nil, fmt.Errorf("probe: encode %s: %w", method, err)
	}
	if err := p.ws.Write(ctx, websocket.MessageText, req); err != nil {
		return nil, fmt.Errorf("probe: send %s: %w", method, err)
	}
	for {
		f, err := p.read(ctx)
		if err != nil {
			return nil, fmt.Errorf("probe: %s: %w", method, err)
		}
		if f.Type != "res" || f.ID != id {
			continue
		}
		if !f.OK {
			if f.Error == nil {
				f.Error = &ProbeError{Code: "UNKNOWN", Message: "ok:false without error"}
			}
			return f.Payload, f.Error
		}
		return f.Payload, nil
	}
}

// WaitEvent reads frames until an event for which match returns true, and
// returns its payload.
func (p *Probe) WaitEvent(ctx context.Context, match func(name string, payload json.RawMessage) bool) (json.RawMessage, error) {
	for {
		f, err := p.read(ctx)
		if err != nil {
			return nil, fmt.Errorf("probe: wait event: %w", err)
		}
		if f.Type == "event" && match(f.Event, f.Payload) {
			return f.Payload, nil
		}
	}
}

func (p *Probe) read(ctx context.Context) (frame, error) {
	_, data, err := p.ws.Read(ctx)
	if err != nil {
		return frame{}, err
	}
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		return frame{}, fmt.Errorf("decode frame %.200q: %w", data, err)
	}
	return f, nil
}

// Close closes the connection.
func (p *Probe) Close() error {
	return p.ws.Close(websocket.StatusNormalClosure, "")
}

// errExited is waitReady's answer when the gateway process ended.
var errExited = errors.New("the gateway process exited")

// waitReady dials until a handshake succeeds, retrying refused
// connections and "gateway starting" answers, and returns the hello-ok
// payload. exited is closed when the gateway process ends (a start failure).
func waitReady(ctx context.Context, url, token string, exited <-chan struct{}) (json.RawMessage, error) {
	for {
		attempt, cancel := context.WithTimeout(ctx, 20*time.Second)
		p, err := DialProbe(attempt, url, token)
		cancel()
		if err == nil {
			hello := p.Hello()
			_ = p.Close()
			return hello, nil
		}
		wait := 250 * time.Millisecond
		var pe *ProbeError
		if errors.As(err, &pe) {
			if !pe.Retryable {
				return nil, err // a wrong token or bad config: waiting will not help
			}
			if pe.RetryAfterMs > 0 {
				wait = time.Duration(pe.RetryAfterMs) * time.Millisecond
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("last attempt: %v: %w", err, ctx.Err())
		case <-exited:
			t.Stop()
			return nil, errExited
		case <-t.C:
		}
	}
}
