// Package outboxtest is a fake OpenClaw gateway for tests of callback
// delivery: it answers clawconnect.callback, chat.send and agent.wait the
// way the ClawConnect plugin and the gateway do.
package outboxtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Gateway is an outbox.Caller (it does not import the outbox, whose own
// tests use it) that deduplicates injections and runs by
// their idempotency keys, as the plugin and the gateway do. It is safe for
// concurrent use.
type Gateway struct {
	// Ran, when set before the first call, receives each new run's id.
	Ran chan string

	mu         sync.Mutex
	down       int // the next down calls fail as if the gateway were stopped
	calls      []string
	injections map[string]string // idempotency key -> session key
	runs       map[string]string // run id -> message
}

// NewGateway returns a Gateway that is up.
func NewGateway() *Gateway {
	return &Gateway{injections: map[string]string{}, runs: map[string]string{}}
}

// SetDown makes the next n calls fail as if the gateway were stopped.
func (f *Gateway) SetDown(n int) {
	f.mu.Lock()
	f.down = n
	f.mu.Unlock()
}

// Call answers one gateway method.
func (f *Gateway) Call(_ context.Context, method string, params any) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method)
	if f.down > 0 {
		f.down--
		return nil, errors.New("gateway not connected")
	}
	b, _ := json.Marshal(params)
	switch method {
	case "clawconnect.callback":
		var p struct {
			SessionKey string `json:"sessionKey"`
			SessionID  string `json:"session_id"`
			TurnID     string `json:"turn_id"`
			Message    struct {
				ID        string `json:"id"`
				Type      string `json:"type"`
				Body      string `json:"body"`
				SessionID string `json:"session_id"`
				TurnID    string `json:"turn_id"`
			} `json:"message"`
		}
		if err := json.Unmarshal(b, &p); err != nil || p.SessionKey == "" || p.Message.ID == "" ||
			p.Message.SessionID != p.SessionID || p.Message.TurnID != p.TurnID {
			return nil, fmt.Errorf("CLAWCONNECT_CALLBACK_FAILED: bad params %s", b)
		}
		key := "clawconnect:" + p.SessionID + ":" + p.TurnID + ":" + p.Message.ID
		f.injections[key] = p.SessionKey
		out := map[string]any{"ok": true, "enqueued": true, "delivery_required": true, "delivery_mode": "chat.send",
			"injection_id": key, "session_key": p.SessionKey, "message_id": p.Message.ID, "message_type": p.Message.Type,
			"chat_send": map[string]any{"sessionKey": p.SessionKey, "message": "[ClawConnect callback]\n" + p.Message.Body,
				"idempotencyKey": "clawconnect-callback:" + p.SessionID + ":" + p.TurnID + ":" + p.Message.ID, "deliver": true}}
		return json.Marshal(out)
	case "chat.send":
		var c struct {
			Message        string `json:"message"`
			IdempotencyKey string `json:"idempotencyKey"`
		}
		_ = json.Unmarshal(b, &c)
		status := "started"
		if _, ok := f.runs[c.IdempotencyKey]; ok {
			status = "ok"
		} else {
			f.runs[c.IdempotencyKey] = c.Message
			if f.Ran != nil {
				f.Ran <- c.IdempotencyKey
			}
		}
		return json.Marshal(map[string]any{"runId": c.IdempotencyKey, "status": status})
	case "agent.wait":
		return json.RawMessage(`{"status":"ok"}`), nil
	}
	return nil, fmt.Errorf("unknown method %s", method)
}

// Calls returns the methods called so far, in order.
func (f *Gateway) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// Count returns how many times method was called.
func (f *Gateway) Count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == method {
			n++
		}
	}
	return n
}

// Runs returns how many distinct runs chat.send started.
func (f *Gateway) Runs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.runs)
}

// Injections returns the injected callbacks: idempotency key -> session key.
func (f *Gateway) Injections() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]string, len(f.injections))
	for k, v := range f.injections {
		out[k] = v
	}
	return out
}
