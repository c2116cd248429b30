package terminal

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/clawconnect/clawconnect/internal/terminal/agents"
	"github.com/clawconnect/clawconnect/internal/terminal/native"
)

// maxInputScans bounds the human-input scans that read session files at
// once across every pane; each holds one line (native.MaxLine at most).
const maxInputScans = 2

// inputScans remembers, per pane, how far the session file after the
// Session's checkpoint was read and whether a human typed there, so that
// every List (each terminal_list call, each open dashboard stream every
// 2 s) reads only what was appended since the last one. Callers asking for
// one pane while its scan runs wait for that scan and share its answer
// instead of starting their own; scans of different panes run at most
// maxInputScans at a time. The zero value is ready; it is safe for
// concurrent use.
type inputScans struct {
	mu    sync.Mutex
	byKey map[string]*inputScan
	sem   chan struct{}
}

// inputScan is one pane's state: the checkpoint it answers for, the
// cursor, the last transient error, and the scan in flight.
type inputScan struct {
	checkpoint string
	cur        native.Cursor
	err        error
	running    chan struct{} // closed when the scan in flight ends; nil when none runs
}

// since reports whether a human typed in p since checkpoint, as
// a.UserInputSince does, resuming the pane's cached cursor when a can.
func (c *inputScans) since(ctx context.Context, a agents.Agent, p agents.Pane, checkpoint json.RawMessage) (bool, error) {
	r, ok := a.(agents.InputResumer)
	if !ok {
		return a.UserInputSince(ctx, p, checkpoint)
	}
	key := p.Key + "\x00" + p.Agent
	for {
		c.mu.Lock()
		if c.byKey == nil {
			c.byKey = map[string]*inputScan{}
			c.sem = make(chan struct{}, maxInputScans)
		}
		e := c.byKey[key]
		if e == nil || e.checkpoint != string(checkpoint) {
			e = &inputScan{checkpoint: string(checkpoint)}
			c.byKey[key] = e
		}
		if e.cur.Done() {
			cur := e.cur
			c.mu.Unlock()
			return cur.Found, errOf(cur)
		}
		if running := e.running; running != nil {
			c.mu.Unlock()
			select {
			case <-running:
			case <-ctx.Done():
				return false, ctx.Err()
			}
			c.mu.Lock()
			found, err := e.cur.Found, e.err
			c.mu.Unlock()
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				continue // the scanner's caller went away: scan for this one
			}
			return found, err
		}
		done := make(chan struct{})
		e.running = done
		cur, sem := e.cur, c.sem
		c.mu.Unlock()

		var err error
		select {
		case sem <- struct{}{}:
			cur, err = r.UserInputFrom(ctx, p, checkpoint, cur)
			<-sem
		case <-ctx.Done():
			err = ctx.Err()
		}
		c.mu.Lock()
		e.cur, e.err, e.running = cur, err, nil
		close(done)
		c.mu.Unlock()
		return cur.Found, err
	}
}

// errOf is a final cursor's error.
func errOf(cur native.Cursor) error {
	if cur.Err != nil {
		return cur.Err
	}
	return nil
}

// keep forgets the panes not in live (gone from the inventory), so the
// cache holds at most one entry per live pane.
func (c *inputScans) keep(live []agents.Pane) {
	keys := make(map[string]bool, len(live))
	for _, p := range live {
		keys[p.Key+"\x00"+p.Agent] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.byKey {
		if !keys[k] && e.running == nil {
			delete(c.byKey, k)
		}
	}
}
