package gateway

// This file holds which sessions' events the gateway sends this client.
// Without the session-scoped-events cap a gateway broadcasts every run's
// chat and agent events to every operator connection, so each process
// connected to one gateway reads and decodes the events of all the others'
// runs. With the cap the gateway sends a session's events only to the
// connections that subscribed to it (sessions.messages.subscribe), so the
// Client subscribes to the session of every run it follows, for as long as
// it follows one there, and resubscribes after a reconnect.

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Client capabilities this package knows.
const (
	// CapToolEvents asks for structured tool start/result events.
	CapToolEvents = "tool-events"
	// CapSessionScopedEvents asks the gateway to send a session's chat and
	// agent events only to connections subscribed to that session. The
	// Client then subscribes to the session of each run it follows.
	CapSessionScopedEvents = "session-scoped-events"
)

const (
	methodSubscribe   = "sessions.messages.subscribe"
	methodUnsubscribe = "sessions.messages.unsubscribe"
)

// watch is one session key the Client wants events of.
type watch struct {
	refs     int  // followers: runs, watchers and an explicit subscription; guarded by Client.mu
	explicit bool // SubscribeSession holds one of refs; guarded by Client.mu
	// op serializes the key's subscribe and unsubscribe calls: the gateway
	// handles requests concurrently, so an unsubscribe still in flight could
	// otherwise land after a new subscribe and silence the session.
	op sync.Mutex
	on *conn // connection holding the gateway-side subscription; guarded by op and Client.mu
	// linger, while nobody follows the key, drops it once Options.SessionLinger
	// has passed; guarded by Client.mu. A pending one holds a count of Client.wg.
	linger *time.Timer
}

// scopedConn reports whether events on a connection with hello come only
// for subscribed sessions: the cap was declared and the gateway offers the
// subscription method. A gateway without that method does not know the cap
// and broadcasts, so subscribing there would only cost calls.
func scopedConn(caps []string, h *Hello) bool {
	return slices.Contains(caps, CapSessionScopedEvents) && (len(h.Methods) == 0 || h.HasMethod(methodSubscribe))
}

// SessionScoped reports whether the current connection receives run events
// only for the sessions the Client follows (see CapSessionScopedEvents).
// False while disconnected.
func (c *Client) SessionScoped() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil && c.cur.scoped
}

// WatchSession makes the gateway send key's chat and agent events to this
// Client (to Subscribe callbacks and runs) until release is called, on this
// and every later connection. It returns once the gateway confirmed the
// subscription, so no event that follows the return is lost. On a
// connection that is not session-scoped it only counts the interest. Calls
// for one key nest; release is idempotent and does not block.
func (c *Client) WatchSession(ctx context.Context, key string) (release func(), err error) {
	key = c.CanonicalSessionKey(key)
	w, err := c.acquireWatch(key, false)
	if err != nil {
		return nil, fmt.Errorf("watch session: %w", err)
	}
	if err := c.syncWatch(ctx, key, w); err != nil {
		c.releaseWatch(key, false)
		return nil, fmt.Errorf("watch session: %w", err)
	}
	var once sync.Once
	return func() { once.Do(func() { c.releaseWatch(key, false) }) }, nil
}

// PrepareSession starts subscribing to key's events as WatchSession does,
// without waiting for the gateway's answer, and yields so that the request
// goes out before the caller's next work: a StartRun in key that the caller
// makes after, say, recording the task then finds the subscription held or
// on its way and does not wait a round trip for it first. release ends
// this interest (the run's own subscription holds by then); it does not
// block.
func (c *Client) PrepareSession(key string) (release func()) {
	key = c.CanonicalSessionKey(key)
	w, err := c.acquireWatch(key, false)
	if err != nil {
		return func() {}
	}
	var once sync.Once
	release = func() { once.Do(func() { c.releaseWatch(key, false) }) }
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return release
	}
	c.wg.Add(1) // the supervisor holds a count until Close, so never from zero
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		// Close ends the wait for a connection at once: it waits for this.
		ctx, cancel := context.WithTimeout(c.life, c.opts.HandshakeTimeout)
		defer cancel()
		if err := c.syncWatch(ctx, key, w); err != nil {
			c.log.Debug("prepare session failed", "session_key", key, "err", err)
		}
	}()
	runtime.Gosched()
	return release
}

// acquireWatch counts one more follower of key.
func (c *Client) acquireWatch(key string, explicit bool) (*watch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	w := c.watches[key]
	if w == nil {
		w = &watch{}
		c.watches[key] = w
	}
	if explicit {
		if w.explicit {
			return w, nil
		}
		w.explicit = true
	}
	w.refs++
	if w.linger != nil {
		// Followed again before the linger ran out: the subscription (if
		// its connection is still up) serves the new follower.
		if w.linger.Stop() {
			c.wg.Done()
		}
		w.linger = nil
	}
	return w, nil
}

// syncWatch subscribes key on the current connection if it has followers
// and the connection needs a subscription that it does not hold yet. An
// answer of the gateway that refuses the subscription is logged, not
// returned: such a gateway broadcasts, and a run's outcome never depends on
// its events alone (the agent method's final answer and agent.wait back it).
func (c *Client) syncWatch(ctx context.Context, key string, w *watch) error {
	w.op.Lock()
	defer w.op.Unlock()
	cn, err := c.connected(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	need := w.refs > 0 && w.on != cn && (cn.scoped || w.explicit)
	c.mu.Unlock()
	if !need {
		return nil
	}
	_, on, err := c.call(ctx, methodSubscribe, map[string]string{"key": key}, CallOptions{})
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		c.log.Warn("subscribe session failed", "session_key", key, "err", err)
		return nil
	}
	c.mu.Lock()
	w.on = on
	c.mu.Unlock()
	return nil
}

// releaseWatch counts one follower of key less; the last one's release
// unsubscribes in the background once Options.SessionLinger has passed
// without a new follower.
func (c *Client) releaseWatch(key string, explicit bool) {
	c.mu.Lock()
	w := c.watches[key]
	if w == nil || (explicit && !w.explicit) {
		c.mu.Unlock()
		return
	}
	if explicit {
		w.explicit = false
	}
	w.refs--
	last := w.refs == 0 && !c.closed
	if !last {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1) // the supervisor holds a count until Close, so never from zero
	drop := func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.life, c.opts.HandshakeTimeout)
		defer cancel()
		if err := c.dropWatch(ctx, key, w); err != nil {
			c.log.Debug("unsubscribe session failed", "session_key", key, "err", err)
		}
	}
	if c.opts.SessionLinger > 0 {
		w.linger = time.AfterFunc(c.opts.SessionLinger, drop)
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	go drop()
}

// stopLingersLocked cancels the pending drops of lingering watches when
// the Client closes: its connection, and with it every subscription, ends.
func (c *Client) stopLingersLocked() {
	for _, w := range c.watches {
		if w.linger != nil && w.linger.Stop() {
			c.wg.Done()
		}
		w.linger = nil
	}
}

// dropWatch unsubscribes key if nobody follows it any more and forgets it.
// A subscription held by a connection that is gone needs no call.
func (c *Client) dropWatch(ctx context.Context, key string, w *watch) error {
	w.op.Lock()
	defer w.op.Unlock()
	c.mu.Lock()
	if w.refs > 0 {
		c.mu.Unlock()
		return nil
	}
	live := w.on != nil && w.on == c.cur
	c.mu.Unlock()
	var err error
	if live {
		_, err = c.Call(ctx, methodUnsubscribe, map[string]string{"key": key})
	}
	c.mu.Lock()
	w.on = nil
	if w.refs == 0 && c.watches[key] == w {
		delete(c.watches, key)
	}
	c.mu.Unlock()
	return err
}

// resubscribe renews the subscriptions of every followed session on a new
// connection. It runs on its own goroutine after a reconnect.
func (c *Client) resubscribe(ctx context.Context) {
	c.mu.Lock()
	keys := make([]string, 0, len(c.watches))
	ws := make([]*watch, 0, len(c.watches))
	for k, w := range c.watches {
		if w.refs > 0 {
			keys, ws = append(keys, k), append(ws, w)
		}
	}
	c.mu.Unlock()
	for i, k := range keys {
		wctx, cancel := context.WithTimeout(ctx, c.opts.HandshakeTimeout)
		err := c.syncWatch(wctx, k, ws[i])
		cancel()
		if err != nil {
			c.log.Warn("resubscribe session failed", "session_key", k, "err", err)
		}
	}
}

// SubscribeSession asks the gateway for the events of session key,
// session.message rows included (sessions.messages.subscribe), and repeats
// the request after every reconnect until UnsubscribeSession. Runs
// subscribe to their own sessions by themselves; this is for callers that
// want a session's transcript rows or events without following a run.
func (c *Client) SubscribeSession(ctx context.Context, key string) error {
	key = c.CanonicalSessionKey(key)
	w, err := c.acquireWatch(key, true)
	if err != nil {
		return fmt.Errorf("subscribe session: %w", err)
	}
	w.op.Lock()
	defer w.op.Unlock()
	_, on, err := c.call(ctx, methodSubscribe, map[string]string{"key": key}, CallOptions{})
	if err != nil {
		return fmt.Errorf("subscribe session: %w", err)
	}
	c.mu.Lock()
	w.on = on
	c.mu.Unlock()
	return nil
}

// UnsubscribeSession undoes SubscribeSession. The gateway keeps sending the
// session's events while a followed run is in it.
func (c *Client) UnsubscribeSession(ctx context.Context, key string) error {
	key = c.CanonicalSessionKey(key)
	c.mu.Lock()
	w := c.watches[key]
	if w == nil || !w.explicit {
		c.mu.Unlock()
		return nil
	}
	w.explicit = false
	w.refs--
	c.mu.Unlock()
	if err := c.dropWatch(ctx, key, w); err != nil {
		return fmt.Errorf("unsubscribe session: %w", err)
	}
	return nil
}
