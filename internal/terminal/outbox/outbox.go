// Package outbox delivers the callbacks of terminal Turns and watches to
// their OpenClaw sessions: each callback is a row the Turn service wrote in
// the store (in the same transaction as the Turn's new status); the Outbox
// makes one attempt at a time per row under an attempt lease, calls the
// ClawConnect plugin's clawconnect.callback and follows its chat.send wake
// plan, records the evidence, and retries on a schedule until delivered or
// exhausted. It knows the store's CallbackStore and a gateway Caller, not
// the Turn service.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/owner"
	"github.com/clawconnect/clawconnect/internal/terminal/redact"
	"github.com/clawconnect/clawconnect/termapi"
)

// CallbackMethod is the gateway method of the ClawConnect OpenClaw plugin
// that takes a callback into a session.
const CallbackMethod = "clawconnect.callback"

// CallbackMessage is the canonical message of a callback: what the OpenClaw
// session receives. It never holds thinking text or raw terminal output.
type CallbackMessage struct {
	ID               string         `json:"id"`
	TS               int64          `json:"ts"`
	From             string         `json:"from"`
	To               string         `json:"to"`
	Type             string         `json:"type"`
	RequiresResponse bool           `json:"requires_response"`
	Round            int            `json:"round"`
	Body             string         `json:"body"`
	SessionID        string         `json:"session_id"`
	TurnID           string         `json:"turn_id"`
	ConversationID   string         `json:"conversation_id"`
	Metadata         map[string]any `json:"metadata"`
}

// Caller is the part of the gateway client the outbox uses.
type Caller interface {
	Call(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// DefaultCallbackDelays are the waits before retries 1–4 of a failed
// delivery; a fifth failure exhausts it.
var DefaultCallbackDelays = []time.Duration{5 * time.Second, 15 * time.Second, 60 * time.Second, 60 * time.Second}

// Options configures an Outbox.
type Options struct {
	// Store holds the outbox; required.
	Store store.CallbackStore
	// Dial returns a gateway client for a gateway URL ("" = the
	// configured default); required. Clients are cached per URL.
	Dial func(ctx context.Context, gatewayURL string) (Caller, error)
	// Owner names this process in attempt leases. "" means the owner of
	// the Host the Outbox is given to (host.Options.Outbox), whose process
	// registry entry lets another host prove it dead and free its attempts
	// at once; an Outbox used on its own gets a fresh owner.Self id (the
	// owner id every lease of the store uses).
	Owner string
	// Delays between attempts; DefaultCallbackDelays.
	Delays []time.Duration
	// Lease is the attempt lease; 2 minutes.
	Lease time.Duration
	// Poll is how often due callbacks are looked for; 1 s.
	Poll time.Duration
	// WaitTimeout bounds the agent.wait observation; 20 s.
	WaitTimeout time.Duration
	// Workers is the number of concurrent attempts; 8.
	Workers int
	// Logger receives operational logs; nil discards them.
	Logger *slog.Logger
	// Now is the clock; time.Now.
	Now func() time.Time
	// WarmURL, when set, is a gateway Run connects to in the background
	// as it starts (the URL Turns record, terminal.Options.CallbackGateway), so the
	// first callback does not pay the connect and handshake (a second
	// against a real gateway on a busy machine). A failed warm-up is
	// logged; the first delivery dials again.
	WarmURL string
	// Delivers reports whether this process delivers the callbacks
	// recorded for a gateway URL; nil delivers every one.
	Delivers func(gatewayURL string) bool
}

// Outbox delivers pending callbacks to their OpenClaw sessions: one attempt
// at a time per message under an attempt lease held in the store, retried
// after Delays, picked up again by any host after a restart.
type Outbox struct {
	o        Options
	log      *slog.Logger
	kick     chan struct{}
	ownOwner bool // Owner was given in the options

	// mu guards only the map of per-URL dial states; a dial never runs
	// under it, so a gateway that does not answer delays only callbacks
	// to its own URL.
	mu      sync.Mutex
	callers map[string]*dialState
}

// dialState is one gateway URL's client, or the dial in progress for it.
// ready is closed when the dial ends; c and err are set before that and
// never change after. A failed state is removed, so the next attempt
// dials again.
type dialState struct {
	ready chan struct{}
	c     Caller
	err   error
}

// New returns an Outbox; call Run to deliver.
func New(o Options) *Outbox {
	ownOwner := o.Owner != ""
	if o.Owner == "" {
		o.Owner = owner.Self().ID
	}
	if len(o.Delays) == 0 {
		o.Delays = DefaultCallbackDelays
	}
	if o.Lease <= 0 {
		o.Lease = 2 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = 20 * time.Second
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Outbox{o: o, log: log, kick: make(chan struct{}, 1), ownOwner: ownOwner, callers: map[string]*dialState{}}
}

// Owner is the name the Outbox holds attempt leases under.
func (x *Outbox) Owner() string { return x.o.Owner }

// AdoptOwner makes id the owner of the Outbox's attempt leases unless its
// Options named one: a monitor host gives the Outbox its own identity, so a
// host that proves it dead frees its attempts with its monitor leases.
// Call it before Run.
func (x *Outbox) AdoptOwner(id string) {
	if !x.ownOwner {
		x.o.Owner = id
	}
}

// Kick asks Run to look for due callbacks now.
func (x *Outbox) Kick() {
	select {
	case x.kick <- struct{}{}:
	default:
	}
}

// Run delivers due callbacks until ctx ends.
func (x *Outbox) Run(ctx context.Context) error {
	if x.o.WarmURL != "" {
		warmed := make(chan struct{})
		go func() {
			defer close(warmed)
			if _, err := x.caller(ctx, x.o.WarmURL); err != nil && ctx.Err() == nil {
				x.log.Info("connect to the callback gateway ahead of the first callback failed; the first delivery dials again", "err", err)
			}
			x.Kick() // the callbacks that waited for this dial
		}()
		defer func() { <-warmed }()
	}
	t := time.NewTicker(x.o.Poll)
	defer t.Stop()
	workers := make(chan struct{}, x.o.Workers)
	inflight := map[string]bool{} // message ids with an attempt under way
	var mu sync.Mutex
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		// Attempts run on their own: a slow one (a gateway that does not
		// answer its dial) never holds back the next look for due
		// callbacks, and a callback whose gateway is being dialled waits
		// for that dial without taking a worker of its own.
		due, err := x.o.Store.DueCallbacks(ctx, x.o.Now().UnixMilli(), store.MaxPage)
		if err != nil && ctx.Err() == nil {
			x.log.Warn("deliver callbacks", "err", err)
		}
	start:
		for _, cb := range due {
			mu.Lock()
			busy := inflight[cb.MessageID]
			mu.Unlock()
			if busy || x.dialing(cb.GatewayURL) || !x.routes(cb) {
				continue
			}
			select {
			case workers <- struct{}{}:
			default:
				break start // all busy; a worker that ends looks again
			}
			mu.Lock()
			inflight[cb.MessageID] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				x.attempt(ctx, cb.MessageID)
				mu.Lock()
				delete(inflight, cb.MessageID)
				mu.Unlock()
				<-workers
				x.Kick()
			}()
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-x.kick:
		}
	}
	return nil
}

// DeliverDue makes one attempt for every callback due now (Workers at a
// time) and returns how many it attempted.
func (x *Outbox) DeliverDue(ctx context.Context) (int, error) {
	total := 0
	for {
		due, err := x.o.Store.DueCallbacks(ctx, x.o.Now().UnixMilli(), store.MaxPage)
		if err != nil {
			return total, err
		}
		n := 0
		sem := make(chan struct{}, x.o.Workers)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, cb := range due {
			if !x.routes(cb) {
				continue
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if x.attempt(ctx, cb.MessageID) {
					mu.Lock()
					n++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		total += n
		if n == 0 || len(due) < store.MaxPage || ctx.Err() != nil {
			return total, ctx.Err()
		}
	}
}

// caller returns the cached client of url, dialling it when there is
// none. Callers of one URL share one dial; callers of another URL never
// wait on it.
func (x *Outbox) caller(ctx context.Context, url string) (Caller, error) {
	x.mu.Lock()
	d, ok := x.callers[url]
	if !ok {
		d = &dialState{ready: make(chan struct{})}
		x.callers[url] = d
	}
	x.mu.Unlock()
	if ok {
		select {
		case <-d.ready:
			return d.c, d.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c, err := x.o.Dial(ctx, url)
	x.mu.Lock()
	current := x.callers[url] == d
	switch {
	case err != nil && current:
		delete(x.callers, url)
	case err == nil && !current:
		// Close ran while this dial was under way: the client it would
		// have closed must not outlive it.
		err = errors.New("the outbox was closed while connecting")
		if cl, ok := c.(io.Closer); ok {
			_ = cl.Close()
		}
		c = nil
	}
	d.c, d.err = c, err
	close(d.ready)
	x.mu.Unlock()
	return c, err
}

// dialing reports whether a dial of url is under way.
func (x *Outbox) dialing(url string) bool {
	x.mu.Lock()
	d, ok := x.callers[url]
	x.mu.Unlock()
	if !ok {
		return false
	}
	select {
	case <-d.ready:
		return false
	default:
		return true
	}
}

// Close closes the cached gateway clients that are io.Closers; a dial
// under way closes its client when it ends.
func (x *Outbox) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	for url, d := range x.callers {
		select {
		case <-d.ready:
			if cl, ok := d.c.(io.Closer); ok {
				_ = cl.Close()
			}
		default:
		}
		delete(x.callers, url)
	}
	return nil
}

// Plan is the answer of clawconnect.callback: whether the plugin enqueued
// the callback, and the chat.send that wakes the session.
type Plan struct {
	OK               bool            `json:"ok"`
	Enqueued         *bool           `json:"enqueued"`
	DeliveryRequired *bool           `json:"delivery_required"`
	DeliveryMode     string          `json:"delivery_mode"`
	ChatSend         *ChatSend       `json:"chat_send"`
	InjectionID      string          `json:"injection_id"`
	SessionKey       string          `json:"session_key"`
	MessageID        string          `json:"message_id"`
	Extra            json.RawMessage `json:"-"`
}

// ChatSend is the params of the chat.send a Plan asks for.
type ChatSend struct {
	SessionKey     string `json:"sessionKey"`
	Message        string `json:"message"`
	IdempotencyKey string `json:"idempotencyKey"`
	Deliver        bool   `json:"deliver"`
	// QueueMode "followup" (the plugin's): into a busy session the
	// callback starts its own run after the running one.
	QueueMode string `json:"queueMode,omitempty"`
}

// ParsePlan decodes and checks the plugin's answer to cb's callback.
func ParsePlan(raw json.RawMessage, cb *store.Callback) (Plan, error) {
	var p Plan
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, fmt.Errorf("callback answer is not a plan: %w", err)
	}
	switch {
	case !p.OK:
		return p, errors.New("callback answer: ok is not true")
	case p.MessageID != "" && p.MessageID != cb.MessageID:
		return p, fmt.Errorf("callback answer names message %s, not %s", p.MessageID, cb.MessageID)
	case p.DeliveryRequired != nil && *p.DeliveryRequired && (p.DeliveryMode != "chat.send" || p.ChatSend == nil):
		return p, fmt.Errorf("callback answer requires delivery by %q without a chat_send plan", p.DeliveryMode)
	case p.DeliveryRequired != nil && !*p.DeliveryRequired && p.ChatSend != nil:
		return p, errors.New("callback answer has a chat_send plan but no delivery required")
	}
	if c := p.ChatSend; c != nil {
		if c.SessionKey != cb.SessionKey || c.Message == "" || c.IdempotencyKey == "" || !c.Deliver {
			return p, fmt.Errorf("callback answer: chat_send needs sessionKey %s, a message, an idempotencyKey and deliver:true", cb.SessionKey)
		}
	}
	return p, nil
}

// Params are the params of clawconnect.callback for cb; a replay with the
// same params is deduplicated by the plugin.
func Params(cb *store.Callback) map[string]any {
	return map[string]any{
		"sessionKey": cb.SessionKey, "session_id": cb.SessionID, "turn_id": cb.TurnID,
		"conversation": map[string]any{"conversation_id": cb.TurnID, "session_id": cb.SessionID, "turn_id": cb.TurnID,
			"gateway_session": cb.SessionKey, "binding_id": cb.BindingID, "binding_generation": cb.Generation},
		"message": cb.Message,
	}
}

// Accepted reports whether recorded evidence (a callback's injection or
// wake) says the gateway accepted it.
func Accepted(raw json.RawMessage) bool {
	var v struct {
		Status string `json:"status"`
	}
	return json.Unmarshal(raw, &v) == nil && v.Status == "accepted"
}

// attempt makes one delivery attempt of the callback and settles it; it
// reports whether it held the attempt lease.
func (x *Outbox) attempt(ctx context.Context, id string) bool {
	now := x.o.Now()
	cb, err := x.o.Store.ClaimCallback(ctx, id, x.o.Owner, now.UnixMilli(), now.Add(x.o.Lease).UnixMilli())
	if err != nil {
		if !errors.Is(err, store.ErrLeaseLost) && ctx.Err() == nil {
			x.log.Warn("claim callback", "message_id", id, "err", err)
		}
		return false
	}
	// Evidence of an earlier attempt that died after acceptance: settle,
	// never resend.
	if Accepted(cb.Injection) || Accepted(cb.Wake) {
		x.settle(ctx, cb, nil, false)
		return true
	}
	cb.Attempts++
	cb.LastAttemptAt = now.UnixMilli()
	x.settle(ctx, cb, x.send(ctx, cb), true)
	return true
}

// send calls the plugin's method and follows its plan, recording the
// evidence on cb as it arrives.
func (x *Outbox) send(ctx context.Context, cb *store.Callback) error {
	began := x.o.Now().UnixMilli()
	c, err := x.caller(ctx, cb.GatewayURL)
	if err != nil {
		return fmt.Errorf("connect to the gateway: %w", err)
	}
	sent := x.o.Now().UnixMilli()
	raw, err := c.Call(ctx, CallbackMethod, Params(cb))
	if err != nil {
		return fmt.Errorf("%s: %w", CallbackMethod, err)
	}
	p, err := ParsePlan(raw, cb)
	if err != nil {
		return err
	}
	// attempt_at and sent_at (the attempt began; the method was called,
	// after connecting) say where an attempt's time went.
	inj := map[string]any{"status": "unconfirmed", "injection_id": p.InjectionID, "attempt_at": began, "sent_at": sent, "at": x.o.Now().UnixMilli()}
	if p.Enqueued != nil {
		inj["status"] = map[bool]string{true: "accepted", false: "uncertain"}[*p.Enqueued]
	}
	cb.Injection, _ = json.Marshal(inj)
	x.progress(ctx, cb)
	if p.ChatSend == nil {
		if p.Enqueued != nil && *p.Enqueued {
			return nil
		}
		return errors.New("the plugin neither enqueued the callback nor returned a wake plan")
	}
	ack, err := c.Call(ctx, "chat.send", p.ChatSend)
	if err != nil {
		return fmt.Errorf("chat.send: %w", err)
	}
	var a struct {
		RunID  string `json:"runId"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(ack, &a); err != nil {
		return fmt.Errorf("chat.send answer: %w", err)
	}
	switch a.Status {
	case "started", "in_flight", "ok", "error", "timeout":
	default:
		return fmt.Errorf("chat.send answered status %q", a.Status)
	}
	if a.RunID != p.ChatSend.IdempotencyKey {
		return fmt.Errorf("chat.send answered run %s, not %s", a.RunID, p.ChatSend.IdempotencyKey)
	}
	cb.Wake, _ = json.Marshal(map[string]any{"status": "accepted", "run_id": a.RunID, "ack_status": a.Status,
		"idempotency_key": p.ChatSend.IdempotencyKey, "at": x.o.Now().UnixMilli()})
	return nil
}

// progress persists evidence mid-attempt (and extends the lease).
func (x *Outbox) progress(ctx context.Context, cb *store.Callback) {
	cb.UpdatedAt = x.o.Now().UnixMilli()
	cb.LeaseUntil = x.o.Now().Add(x.o.Lease).UnixMilli()
	if err := x.o.Store.SaveCallback(ctx, cb); err != nil {
		x.log.Warn("record callback progress", "message_id", cb.MessageID, "err", err)
	}
}

// settle records the attempt's outcome: delivered when the injection or
// the wake was accepted, whatever failed after; otherwise failed with the
// next attempt due, or exhausted. observe follows the woken run (only for
// a wake made by this attempt).
func (x *Outbox) settle(ctx context.Context, cb *store.Callback, sendErr error, observe bool) {
	now := x.o.Now().UnixMilli()
	cb.UpdatedAt = now
	if Accepted(cb.Injection) || Accepted(cb.Wake) {
		cb.Status, cb.DeliveredAt, cb.LastError, cb.NextAttemptAt = termapi.CallbackDelivered, now, "", 0
		if sendErr != nil {
			cb.LastError = "after acceptance: " + redact.Redact(sendErr.Error())
		}
		observe = observe && Accepted(cb.Wake) && sendErr == nil
		if !observe {
			cb.LeaseUntil = 0
		}
		if err := x.o.Store.SaveCallback(ctx, cb); err != nil {
			x.log.Warn("settle callback", "message_id", cb.MessageID, "err", err)
			return
		}
		x.log.Info("callback delivered", "message_id", cb.MessageID, "turn_id", cb.TurnID, "attempts", cb.Attempts)
		if observe {
			x.observe(ctx, cb)
		}
		return
	}
	cb.LastError = redact.Redact(sendErr.Error())
	cb.LeaseUntil = 0
	if cb.Attempts > len(x.o.Delays) {
		cb.Status, cb.NextAttemptAt = termapi.CallbackExhausted, 0
	} else {
		cb.Status, cb.NextAttemptAt = termapi.CallbackFailed, now+x.o.Delays[cb.Attempts-1].Milliseconds()
	}
	if err := x.o.Store.SaveCallback(ctx, cb); err != nil {
		x.log.Warn("settle callback", "message_id", cb.MessageID, "err", err)
		return
	}
	x.log.Warn("callback not delivered", "message_id", cb.MessageID, "status", cb.Status, "attempts", cb.Attempts, "err", cb.LastError)
}

// observe follows the woken run with agent.wait; the result is recorded
// and never changes the settlement.
func (x *Outbox) observe(ctx context.Context, cb *store.Callback) {
	var w struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal(cb.Wake, &w)
	obs := map[string]any{"run_id": w.RunID}
	if c, err := x.caller(ctx, cb.GatewayURL); err == nil {
		wctx, cancel := context.WithTimeout(ctx, x.o.WaitTimeout+5*time.Second)
		raw, err := c.Call(wctx, "agent.wait", map[string]any{"runId": w.RunID, "timeoutMs": x.o.WaitTimeout.Milliseconds()})
		cancel()
		var r struct {
			Status string `json:"status"`
		}
		if err != nil {
			obs["status"], obs["error"] = "unknown", redact.Redact(err.Error())
		} else if json.Unmarshal(raw, &r) == nil {
			obs["status"] = r.Status
		}
	}
	obs["at"] = x.o.Now().UnixMilli()
	cb.RunObservation, _ = json.Marshal(obs)
	cb.LeaseUntil = 0
	if err := x.o.Store.SaveCallback(ctx, cb); err != nil {
		x.log.Warn("record run observation", "message_id", cb.MessageID, "err", err)
	}
}

// routes reports whether the Outbox delivers cb. On several machines a
// host delivers only the callbacks of a gateway it is configured with
// (Options.Delivers): one that cannot reach the origin's gateway
// leaves the callback unclaimed, its attempts unspent, for a host that
// can; the attempt lease keeps the delivery to one of those.
func (x *Outbox) routes(cb *store.Callback) bool {
	return x.o.Delivers == nil || x.o.Delivers(cb.GatewayURL)
}
