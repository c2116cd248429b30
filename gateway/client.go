package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/clawconnect/clawconnect/internal/backoff"
)

// Hello is what the gateway said in hello-ok.
type Hello struct {
	Protocol       int
	ServerVersion  string
	BootID         string // changes when the gateway process restarts
	ConnID         string
	Role           string
	Scopes         []string // scopes actually granted
	Methods        []string // methods offered, plugin methods included
	Events         []string
	DefaultAgentID string // sessionDefaults.defaultAgentId ("main" if absent)
	DeviceToken    string // auth.deviceToken, if the gateway issued one
	TickInterval   time.Duration
	MaxPayload     int64
	Raw            json.RawMessage // the whole hello-ok payload
}

// HasMethod reports whether the gateway offers method.
func (h *Hello) HasMethod(method string) bool {
	for _, m := range h.Methods {
		if m == method {
			return true
		}
	}
	return false
}

type helloWire struct {
	Type     string `json:"type"`
	Protocol int    `json:"protocol"`
	Server   struct {
		Version string `json:"version"`
		BootID  string `json:"bootId"`
		ConnID  string `json:"connId"`
	} `json:"server"`
	Features struct {
		Methods []string `json:"methods"`
		Events  []string `json:"events"`
	} `json:"features"`
	Snapshot struct {
		SessionDefaults struct {
			DefaultAgentID string `json:"defaultAgentId"`
		} `json:"sessionDefaults"`
	} `json:"snapshot"`
	Auth struct {
		Role        string   `json:"role"`
		Scopes      []string `json:"scopes"`
		DeviceToken string   `json:"deviceToken"`
	} `json:"auth"`
	Policy struct {
		MaxPayload     int64 `json:"maxPayload"`
		TickIntervalMs int64 `json:"tickIntervalMs"`
	} `json:"policy"`
}

func parseHello(payload json.RawMessage) (*Hello, error) {
	var w helloWire
	if err := json.Unmarshal(payload, &w); err != nil {
		return nil, fmt.Errorf("parse hello-ok: %w", err)
	}
	if w.Type != "hello-ok" {
		return nil, fmt.Errorf("parse hello-ok: unexpected payload type %q", w.Type)
	}
	h := &Hello{
		Protocol: w.Protocol, ServerVersion: w.Server.Version, BootID: w.Server.BootID, ConnID: w.Server.ConnID,
		Role: w.Auth.Role, Scopes: w.Auth.Scopes, Methods: w.Features.Methods, Events: w.Features.Events,
		DefaultAgentID: w.Snapshot.SessionDefaults.DefaultAgentID, DeviceToken: w.Auth.DeviceToken,
		TickInterval: time.Duration(w.Policy.TickIntervalMs) * time.Millisecond, MaxPayload: w.Policy.MaxPayload,
		Raw: payload,
	}
	if h.DefaultAgentID == "" {
		h.DefaultAgentID = "main"
	}
	return h, nil
}

// Stats are counters of a Client since Dial. All fields only grow.
type Stats struct {
	FramesIn       uint64 // frames read from the gateway
	BadFrames      uint64 // frames that could not be decoded or used
	LateResponses  uint64 // responses for calls no longer pending
	DroppedEvents  uint64 // chat/agent events that matched no followed run
	Reconnects     uint64 // successful reconnects after the first connect
	ConnectFailure uint64 // failed connect attempts
}

// Event is a gateway event as delivered to Subscribe callbacks.
type Event struct {
	Name    string
	Seq     int64 // per-connection sequence; resets on reconnect
	Payload json.RawMessage
}

// Client is a connection to one OpenClaw gateway that survives reconnects.
// It is safe for concurrent use. Create it with Dial; stop it with Close.
type Client struct {
	opts   Options
	url    string
	log    *slog.Logger
	life   context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	nextID atomic.Uint64

	framesIn, badFrames, lateRes, dropped, reconnects, connFail atomic.Uint64
	rawRunSubs                                                  atomic.Int32 // subscriptions that want raw agent/chat events
	rowSubs                                                     atomic.Int32 // subscriptions that want session.message events

	mu         sync.Mutex
	closed     bool
	cur        *conn
	up         chan struct{} // closed when cur becomes non-nil; replaced on disconnect
	lastErr    error
	hello      *Hello
	pending    map[string]*pendingCall
	runsByID   map[string][]*Run
	runsBySess map[string][]*Run // runs whose id is not yet confirmed
	allRuns    map[*Run]struct{}
	subs       map[int]*subscription
	nextSub    int
	watches    map[string]*watch // followed sessions by canonical key
}

type conn struct {
	ws       *websocket.Conn
	hello    *Hello
	scoped   bool         // run events come only for subscribed sessions
	lastRecv atomic.Int64 // unix nanos
	dead     chan struct{}
	once     sync.Once
}

func (cn *conn) kill() { cn.once.Do(func() { close(cn.dead) }) }

type pendingCall struct {
	method      string
	expectFinal bool
	ch          chan callResult
	cn          *conn
}

type callResult struct {
	payload json.RawMessage
	werr    *wireError
	err     error
}

type subscription struct {
	names map[string]bool
	fn    func(Event)
}

// Dial connects to the gateway, completes the handshake and returns a
// Client that keeps the connection up until Close. It retries while the
// gateway answers UNAVAILABLE (starting up) until ctx ends; other refusals
// return a *ConnectError at once. ctx bounds only the initial connect.
func Dial(ctx context.Context, opts Options) (*Client, error) {
	u, err := NormalizeURL(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("dial gateway: %w", err)
	}
	opts = opts.withDefaults()
	c := &Client{
		opts: opts, url: u, log: opts.Logger,
		up:         make(chan struct{}),
		pending:    map[string]*pendingCall{},
		runsByID:   map[string][]*Run{},
		runsBySess: map[string][]*Run{},
		allRuns:    map[*Run]struct{}{},
		subs:       map[int]*subscription{},
		watches:    map[string]*watch{},
	}
	var cn *conn
	for {
		cn, err = c.connect(ctx)
		if err == nil {
			break
		}
		var ce *ConnectError
		if !errors.As(err, &ce) || !errors.Is(ce, ErrUnavailable) {
			return nil, fmt.Errorf("dial gateway: %w", err)
		}
		delay := ce.RetryAfter
		if delay <= 0 {
			delay = 500 * time.Millisecond
		}
		c.log.Info("gateway starting; retrying", "url", c.url, "retry_after", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("dial gateway: %w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
	sctx, cancel := context.WithCancel(context.Background())
	c.life, c.cancel = sctx, cancel
	c.setConn(cn)
	c.wg.Add(1)
	go c.supervise(sctx, cn)
	return c, nil
}

// connect dials one socket and runs the handshake on it.
func (c *Client) connect(ctx context.Context) (*conn, error) {
	hctx, cancel := context.WithTimeout(ctx, c.opts.HandshakeTimeout)
	defer cancel()
	var hdr http.Header
	if len(c.opts.Headers) > 0 {
		hdr = http.Header{}
		for k, v := range c.opts.Headers {
			hdr.Set(k, v)
		}
	}
	ws, _, err := websocket.Dial(hctx, c.url, &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		c.connFail.Add(1)
		return nil, fmt.Errorf("connect %s: %w", c.url, err)
	}
	ws.SetReadLimit(c.opts.ReadLimit)
	hello, err := c.handshake(hctx, ws)
	if err != nil {
		c.connFail.Add(1)
		ws.CloseNow()
		return nil, err
	}
	cn := &conn{ws: ws, hello: hello, scoped: scopedConn(c.opts.Caps, hello), dead: make(chan struct{})}
	cn.lastRecv.Store(time.Now().UnixNano())
	return cn, nil
}

type connectParams struct {
	MinProtocol int `json:"minProtocol"`
	MaxProtocol int `json:"maxProtocol"`
	Client      struct {
		ID       string `json:"id"`
		Version  string `json:"version"`
		Platform string `json:"platform"`
		Mode     string `json:"mode"`
	} `json:"client"`
	Role   string        `json:"role"`
	Scopes []string      `json:"scopes"`
	Caps   []string      `json:"caps"`
	Auth   *connectAuth  `json:"auth,omitempty"`
	Device *deviceParams `json:"device,omitempty"`
}

type connectAuth struct {
	Token       string `json:"token,omitempty"`
	Password    string `json:"password,omitempty"`
	DeviceToken string `json:"deviceToken,omitempty"`
}

// handshake waits for connect.challenge, sends connect and reads hello-ok.
// It reads the socket itself; the read loop starts only afterwards.
func (c *Client) handshake(ctx context.Context, ws *websocket.Conn) (*Hello, error) {
	var nonce string
	var ts int64
	for nonce == "" {
		f, err := c.readHandshakeFrame(ctx, ws)
		if err != nil {
			return nil, err
		}
		if f.Type == frameEvent && f.Event == "connect.challenge" {
			var ch struct {
				Nonce string `json:"nonce"`
				Ts    int64  `json:"ts"`
			}
			if err := json.Unmarshal(f.Payload, &ch); err != nil || ch.Nonce == "" {
				return nil, fmt.Errorf("handshake: bad connect.challenge payload")
			}
			nonce, ts = ch.Nonce, ch.Ts
		}
	}
	o := c.opts
	var p connectParams
	p.MinProtocol, p.MaxProtocol = Protocol, Protocol
	p.Client.ID, p.Client.Version, p.Client.Platform, p.Client.Mode = o.ClientID, o.ClientVersion, o.Platform, o.ClientMode
	p.Role, p.Scopes, p.Caps = "operator", o.Scopes, o.Caps
	if o.Token != "" || o.Password != "" || o.DeviceToken != "" {
		p.Auth = &connectAuth{Token: o.Token, Password: o.Password, DeviceToken: o.DeviceToken}
	}
	if o.Device != nil {
		signed := o.Token
		if o.DeviceToken != "" {
			signed = o.DeviceToken
		}
		if ts == 0 {
			ts = time.Now().UnixMilli()
		}
		payload := devicePayloadV3(o.Device.ID, o.ClientID, o.ClientMode, "operator", o.Scopes, ts, signed, nonce, o.Platform, "")
		p.Device = o.Device.sign(payload, ts, nonce)
	}
	params, _ := json.Marshal(p)
	id := "connect-" + strconv.FormatUint(c.nextID.Add(1), 10)
	req, _ := json.Marshal(reqFrame{Type: frameReq, ID: id, Method: "connect", Params: params})
	if err := ws.Write(ctx, websocket.MessageText, req); err != nil {
		return nil, fmt.Errorf("handshake: send connect: %w", err)
	}
	for {
		f, err := c.readHandshakeFrame(ctx, ws)
		if err != nil {
			return nil, err
		}
		if f.Type != frameRes || f.ID != id {
			continue
		}
		if !f.OK {
			return nil, classifyConnect(f.Error)
		}
		h, err := parseHello(f.Payload)
		if err != nil {
			return nil, fmt.Errorf("handshake: %w", err)
		}
		if h.Protocol != 0 && h.Protocol != Protocol {
			return nil, &ConnectError{Code: "PROTOCOL", Message: fmt.Sprintf("gateway chose protocol %d", h.Protocol),
				kind: ErrProtocolMismatch, Hint: "this client speaks gateway protocol 4"}
		}
		return h, nil
	}
}

func (c *Client) readHandshakeFrame(ctx context.Context, ws *websocket.Conn) (inFrame, error) {
	for {
		_, data, err := ws.Read(ctx)
		if err != nil {
			if code := websocket.CloseStatus(err); code != -1 {
				var ce websocket.CloseError
				errors.As(err, &ce)
				return inFrame{}, closeConnectError(int(code), ce.Reason)
			}
			if ctx.Err() != nil {
				return inFrame{}, fmt.Errorf("handshake: no answer within %v: %w", c.opts.HandshakeTimeout, ctx.Err())
			}
			return inFrame{}, fmt.Errorf("handshake: %w", err)
		}
		c.framesIn.Add(1)
		f, err := decodeFrame(data)
		if err != nil {
			c.badFrames.Add(1)
			c.log.Warn("bad gateway frame during handshake", "err", err, "bytes", len(data))
			continue
		}
		return f, nil
	}
}

// supervise owns the connection: it serves cn until it dies, then
// reconnects with backoff, until ctx is cancelled by Close.
func (c *Client) supervise(ctx context.Context, cn *conn) {
	defer c.wg.Done()
	for {
		err := c.serve(ctx, cn)
		c.dropConn(cn, err)
		// Close marks the Client closed before it closes the socket, so a
		// deliberate close is never logged as a lost connection.
		if ctx.Err() != nil || c.isClosed() {
			return
		}
		c.log.Warn("gateway connection lost; reconnecting", "url", c.url, "err", err)
		cn = nil
		for attempt := 1; cn == nil; attempt++ {
			delay := backoff.Policy{Min: c.opts.MinReconnectDelay, Max: c.opts.MaxReconnectDelay}.Jittered(attempt)
			if ra := retryAfter(err); ra > 0 {
				delay = ra
			}
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			cn, err = c.connect(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				c.mu.Lock()
				c.lastErr = err
				c.mu.Unlock()
				c.log.Warn("gateway reconnect failed", "url", c.url, "attempt", attempt, "err", err)
			}
		}
		c.reconnects.Add(1)
		c.log.Info("gateway reconnected", "url", c.url, "boot_id", cn.hello.BootID)
		c.setConn(cn)
	}
}

func retryAfter(err error) time.Duration {
	var ce *ConnectError
	if errors.As(err, &ce) && errors.Is(ce, ErrUnavailable) {
		return ce.RetryAfter
	}
	return 0
}

// serve reads frames from cn until it fails or ctx ends, with a watchdog
// that closes the socket after two silent tick intervals.
func (c *Client) serve(ctx context.Context, cn *conn) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timeout := c.opts.TickTimeout
	if timeout <= 0 && cn.hello.TickInterval > 0 {
		timeout = 2 * cn.hello.TickInterval
	}
	var wwg sync.WaitGroup
	if timeout > 0 {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			c.watchdog(cctx, cn, timeout)
		}()
	}
	defer wwg.Wait()
	defer cn.kill()
	// One stop for the whole connection: a Read given a cancellable
	// context registers and removes a context.AfterFunc for each frame
	// header and payload.
	defer context.AfterFunc(cctx, func() { _ = cn.ws.CloseNow() })()
	// Frames are read into one buffer, kept from frame to frame:
	// handleFrame copies what it keeps, and reading each frame into a
	// fresh slice that grows from 512 bytes was a sixth of what a run_task
	// and check_task round trip allocates.
	var buf bytes.Buffer
	for {
		_, r, err := cn.ws.Reader(context.Background())
		if err == nil {
			buf.Reset()
			_, err = buf.ReadFrom(r)
		}
		if err != nil {
			cn.ws.CloseNow()
			return err
		}
		cn.lastRecv.Store(time.Now().UnixNano())
		c.handleFrame(cn, buf.Bytes())
		if buf.Cap() > maxKeptFrameBuffer {
			buf = bytes.Buffer{} // a rare large frame's room is not kept
		}
	}
}

// maxKeptFrameBuffer is the most room serve keeps for the next frame.
const maxKeptFrameBuffer = 64 << 10

func (c *Client) watchdog(ctx context.Context, cn *conn, timeout time.Duration) {
	t := time.NewTicker(timeout / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-cn.dead:
			return
		case now := <-t.C:
			if now.Sub(time.Unix(0, cn.lastRecv.Load())) > timeout {
				c.log.Warn("gateway silent; closing connection", "silent_for", timeout)
				cn.ws.Close(4000, "tick timeout")
				cn.ws.CloseNow()
				return
			}
		}
	}
}

func (c *Client) setConn(cn *conn) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		cn.ws.CloseNow()
		return
	}
	c.cur = cn
	c.hello = cn.hello
	c.lastErr = nil
	close(c.up)
	runs := make([]*Run, 0, len(c.allRuns))
	for r := range c.allRuns {
		runs = append(runs, r)
	}
	watched := len(c.watches) > 0
	if watched {
		c.wg.Add(1)
	}
	c.mu.Unlock()
	if watched {
		// Before the runs hear of the reconnect, so that their recovery
		// calls queue behind no more than these subscriptions.
		go func() {
			defer c.wg.Done()
			c.resubscribe(context.Background())
		}()
	}
	for _, r := range runs {
		r.post(runItem{kind: itemReconnected})
	}
}

// dropConn fails every call pending on cn and tells runs the stream broke.
func (c *Client) dropConn(cn *conn, cause error) {
	c.mu.Lock()
	if c.cur == cn {
		c.cur = nil
		c.up = make(chan struct{})
	}
	c.lastErr = cause
	var failed []*pendingCall
	for id, p := range c.pending {
		if p.cn == cn {
			failed = append(failed, p)
			delete(c.pending, id)
		}
	}
	runs := make([]*Run, 0, len(c.allRuns))
	for r := range c.allRuns {
		runs = append(runs, r)
	}
	c.mu.Unlock()
	for _, p := range failed {
		select {
		case p.ch <- callResult{err: fmt.Errorf("%s: %w: %v", p.method, ErrDisconnected, cause)}:
		default:
		}
	}
	for _, r := range runs {
		r.post(runItem{kind: itemDisconnected})
	}
}

// Close stops the Client: it closes the socket, fails pending calls with
// ErrClosed, ends every followed run (Wait returns ErrClosed) and waits for
// all goroutines the Client and its runs started. It is idempotent. Do not
// call it from a RunRequest.OnEvent or Subscribe callback.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.wg.Wait()
		return nil
	}
	c.closed = true
	c.stopLingersLocked()
	cn := c.cur
	pend := c.pending
	c.pending = map[string]*pendingCall{}
	runs := make([]*Run, 0, len(c.allRuns))
	for r := range c.allRuns {
		runs = append(runs, r)
	}
	c.mu.Unlock()
	// Stop the runs before failing their calls: a run must end with
	// ErrClosed, not with the outcome of its failed submit call.
	for _, r := range runs {
		r.stop(ErrClosed)
	}
	for _, p := range pend {
		select {
		case p.ch <- callResult{err: fmt.Errorf("%s: %w", p.method, ErrClosed)}:
		default:
		}
	}
	if cn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		go func() { <-ctx.Done(); cn.ws.CloseNow() }()
		_ = cn.ws.Close(websocket.StatusNormalClosure, "client closing")
		cancel()
	}
	c.cancel()
	c.wg.Wait()
	for _, r := range runs {
		r.wg.Wait()
	}
	return nil
}

// isClosed reports whether Close has been called.
func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Hello returns the hello-ok of the current (or last) connection.
func (c *Client) Hello() *Hello {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hello
}

// Connected reports whether a connection is up right now.
func (c *Client) Connected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil
}

// Stats returns a snapshot of the Client's counters.
func (c *Client) Stats() Stats {
	return Stats{
		FramesIn: c.framesIn.Load(), BadFrames: c.badFrames.Load(), LateResponses: c.lateRes.Load(),
		DroppedEvents: c.dropped.Load(), Reconnects: c.reconnects.Load(), ConnectFailure: c.connFail.Load(),
	}
}

// CanonicalSessionKey returns the key the gateway will use for key:
// "agent:<defaultAgentId>:<key>" unless key already starts with "agent:".
func (c *Client) CanonicalSessionKey(key string) string {
	agent := "main"
	if h := c.Hello(); h != nil && h.DefaultAgentID != "" {
		agent = h.DefaultAgentID
	}
	return canonicalKey(key, agent)
}

func canonicalKey(key, agent string) string {
	if key == "" || len(key) >= 6 && key[:6] == "agent:" {
		return key
	}
	return "agent:" + agent + ":" + key
}

// Subscribe calls fn for every event whose name is in names (all events if
// names is empty), on this and every later connection, until the returned
// cancel func is called. fn runs on the Client's read goroutine: it must
// return quickly and must not call the Client synchronously.
func (c *Client) Subscribe(fn func(Event), names ...string) (cancel func()) {
	s := &subscription{fn: fn}
	if len(names) > 0 {
		s.names = map[string]bool{}
		for _, n := range names {
			s.names[n] = true
		}
	}
	raw := s.names == nil || s.names["agent"] || s.names["chat"]
	rows := s.names == nil || s.names["session.message"]
	c.mu.Lock()
	id := c.nextSub
	c.nextSub++
	c.subs[id] = s
	if raw {
		c.rawRunSubs.Add(1)
	}
	if rows {
		c.rowSubs.Add(1)
	}
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			delete(c.subs, id)
			if raw {
				c.rawRunSubs.Add(-1)
			}
			if rows {
				c.rowSubs.Add(-1)
			}
			c.mu.Unlock()
		})
	}
}

// handleFrame dispatches one frame read from cn. It runs on the read
// goroutine and never blocks.
func (c *Client) handleFrame(cn *conn, data []byte) {
	c.framesIn.Add(1)
	// Fast path for the bulk of the traffic: run events as the gateway
	// serializes them ({"type":"event","event":"agent"|"chat",…}) are decoded
	// in one pass straight into the run payload, unless someone subscribed
	// to their raw form. Anything else takes the generic path.
	isAgent := bytes.HasPrefix(data, agentPrefix)
	if c.rawRunSubs.Load() == 0 && (isAgent || bytes.HasPrefix(data, chatPrefix)) {
		name := "chat"
		if isAgent {
			name = "agent"
		}
		// scanRunEvent decodes what encoding/json would, without its
		// reflection; it declines anything unusual, which then takes
		// encoding/json below.
		if p, ok := scanRunEvent(data); ok {
			c.routeRun(name, p)
			return
		}
		var f struct {
			Payload runPayload `json:"payload"`
		}
		if json.Unmarshal(data, &f) == nil && f.Payload.RunID != "" {
			c.routeRun(name, &f.Payload)
			return
		}
	}
	// A session subscription also brings one session.message event per
	// transcript row; nothing here reads them unless a caller subscribed.
	if c.rowSubs.Load() == 0 && bytes.HasPrefix(data, rowPrefix) {
		return
	}
	f, err := decodeFrame(data)
	if err != nil {
		c.badFrames.Add(1)
		c.log.Warn("bad gateway frame", "err", err, "bytes", len(data))
		return
	}
	switch f.Type {
	case frameRes:
		c.handleResponse(f)
	case frameEvent:
		c.handleEvent(f)
	}
}

func (c *Client) handleResponse(f inFrame) {
	c.mu.Lock()
	p := c.pending[f.ID]
	if p == nil {
		c.mu.Unlock()
		c.lateRes.Add(1)
		return
	}
	intermediate := p.expectFinal && f.OK && payloadStatus(f.Payload) == "accepted"
	if !intermediate {
		delete(c.pending, f.ID)
	}
	c.mu.Unlock()
	r := callResult{payload: f.Payload}
	if !f.OK {
		r.werr = f.Error
	}
	select {
	case p.ch <- r:
	default:
		c.lateRes.Add(1) // duplicate answers beyond the buffer
	}
}

func (c *Client) handleEvent(f inFrame) {
	switch f.Event {
	case "agent", "chat":
		c.routeRunEvent(f)
	case "shutdown":
		c.log.Info("gateway announced shutdown", "payload", truncate(string(f.Payload), 200))
	}
	c.mu.Lock()
	if len(c.subs) == 0 {
		c.mu.Unlock()
		return
	}
	var fns []func(Event)
	for _, s := range c.subs {
		if s.names == nil || s.names[f.Event] {
			fns = append(fns, s.fn)
		}
	}
	c.mu.Unlock()
	ev := Event{Name: f.Event, Seq: f.Seq, Payload: f.Payload}
	for _, fn := range fns {
		fn(ev)
	}
}

var (
	agentPrefix = []byte(`{"type":"event","event":"agent",`)
	chatPrefix  = []byte(`{"type":"event","event":"chat",`)
	rowPrefix   = []byte(`{"type":"event","event":"session.message",`)
)

func (c *Client) routeRunEvent(f inFrame) {
	var p runPayload
	if err := json.Unmarshal(f.Payload, &p); err != nil || p.RunID == "" {
		c.badFrames.Add(1)
		c.log.Warn("bad run event payload", "event", f.Event, "err", err)
		return
	}
	c.routeRun(f.Event, &p)
}

// routeRun hands a decoded run event to the runs that follow it.
func (c *Client) routeRun(event string, p *runPayload) {
	c.mu.Lock()
	targets := c.runsByID[p.RunID]
	if len(targets) == 0 && p.SessionKey != "" {
		targets = c.runsBySess[p.SessionKey]
	}
	if len(targets) == 0 {
		c.mu.Unlock()
		c.dropped.Add(1)
		return
	}
	if len(targets) > 1 {
		targets = append([]*Run(nil), targets...)
	}
	c.mu.Unlock()
	item := runItem{kind: itemEvent, event: event, p: p}
	for _, r := range targets {
		r.post(item)
	}
}

// CallOptions tunes one call.
type CallOptions struct {
	// Timeout bounds the call; 0 means Options.CallTimeout, negative means
	// only ctx.
	Timeout time.Duration
	// ExpectFinal keeps waiting after an intermediate answer whose payload
	// has status "accepted" (the agent method) and returns the final one.
	ExpectFinal bool
	// OnAccepted, if set with ExpectFinal, receives the intermediate
	// payload. It runs on the caller's goroutine.
	OnAccepted func(json.RawMessage)
}

// Call sends method with params (any JSON-marshalable value; nil sends {})
// and returns the response payload. A response with ok:false returns a
// *RPCError. Call waits for a connection if the Client is reconnecting, and
// returns when ctx ends or Options.CallTimeout passes, whichever is first.
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	return c.CallWith(ctx, method, params, CallOptions{})
}

// CallWith is Call with per-call options.
func (c *Client) CallWith(ctx context.Context, method string, params any, o CallOptions) (json.RawMessage, error) {
	payload, _, err := c.call(ctx, method, params, o)
	return payload, err
}

// connected waits for a connection and returns it.
func (c *Client) connected(ctx context.Context) (*conn, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		cn, up, last := c.cur, c.up, c.lastErr
		c.mu.Unlock()
		if cn != nil {
			return cn, nil
		}
		select {
		case <-up:
		case <-ctx.Done():
			if last != nil {
				return nil, fmt.Errorf("%w: %w (last error: %v)", ErrNotConnected, ctx.Err(), last)
			}
			return nil, fmt.Errorf("%w: %w", ErrNotConnected, ctx.Err())
		}
	}
}

// call is CallWith that also returns the connection the call went out on.
func (c *Client) call(ctx context.Context, method string, params any, o CallOptions) (json.RawMessage, *conn, error) {
	timeout := o.Timeout
	if timeout == 0 {
		timeout = c.opts.CallTimeout
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	raw, err := marshalParams(params)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", method, err)
	}
	id := strconv.FormatUint(c.nextID.Add(1), 36)
	frame := appendReq(nil, id, method, raw)
	p := &pendingCall{method: method, expectFinal: o.ExpectFinal, ch: make(chan callResult, 4)}
	// Wait for a connection and register atomically with it.
	for {
		cn, err := c.connected(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", method, err)
		}
		c.mu.Lock()
		if c.cur == cn && !c.closed {
			p.cn = cn
			c.pending[id] = p
			c.mu.Unlock()
			break
		}
		c.mu.Unlock()
	}
	unregister := func() {
		c.mu.Lock()
		if c.pending[id] == p {
			delete(c.pending, id)
		}
		c.mu.Unlock()
	}
	// Writes get their own timeout context: a cancelled write context closes
	// the whole connection in coder/websocket, so the caller's ctx is not used.
	wctx, wcancel := context.WithTimeout(context.Background(), DefaultWriteTimeout)
	err = p.cn.ws.Write(wctx, websocket.MessageText, frame)
	wcancel()
	if err != nil {
		unregister()
		return nil, nil, fmt.Errorf("%s: %w: write: %v", method, ErrDisconnected, err)
	}
	for {
		select {
		case r := <-p.ch:
			if r.err != nil {
				return nil, nil, r.err
			}
			if r.werr != nil {
				return nil, p.cn, newRPCError(method, r.werr, r.payload)
			}
			if o.ExpectFinal {
				if payloadStatus(r.payload) == "accepted" {
					if o.OnAccepted != nil {
						o.OnAccepted(r.payload)
					}
					continue
				}
			}
			return r.payload, p.cn, nil
		case <-ctx.Done():
			unregister()
			return nil, nil, fmt.Errorf("%s: %w", method, ctx.Err())
		}
	}
}

func marshalParams(params any) (json.RawMessage, error) {
	switch v := params.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		if len(v) == 0 {
			return json.RawMessage("{}"), nil
		}
		if !json.Valid(v) {
			return nil, errors.New("params are not valid JSON")
		}
		return v, nil
	case []byte:
		return marshalParams(json.RawMessage(v))
	default:
		b, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("marshal params: %w", err)
		}
		return b, nil
	}
}
