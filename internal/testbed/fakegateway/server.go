package fakegateway

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// Token is a convenient shared token for tests.
const Token = "fake-gateway-token"

// Options configures a Server. Zero values are the documented defaults.
type Options struct {
	// Token and Password are the accepted shared secrets. Both empty means
	// any connect is accepted (even without auth).
	Token    string
	Password string
	// TickInterval is advertised in hello-ok and, when SendTicks is set,
	// used to send tick events. Default 30s.
	TickInterval time.Duration
	SendTicks    bool
	// DefaultAgentID is advertised in sessionDefaults; default "main".
	DefaultAgentID string
	// Unavailable answers the first N connect requests with UNAVAILABLE
	// (startup-sidecars, retryAfterMs RetryAfter) and closes 1013.
	Unavailable int
	// RetryAfter for Unavailable answers; default 10ms.
	RetryAfter time.Duration
	// Unscoped plays a gateway that predates session-scoped events: it
	// ignores the session-scoped-events cap, broadcasts every run event
	// and does not offer sessions.messages.subscribe.
	Unscoped bool
	// Script decides each run's Turn; nil means Echo.
	Script func(Submit) Turn
	// Logger; nil discards.
	Logger *slog.Logger
}

// Submit describes a message submitted with agent or chat.send.
type Submit struct {
	Method         string // "agent" or "chat.send"
	SessionKey     string // canonical
	Message        string
	IdempotencyKey string
}

// Turn scripts how the fake answers one run.
type Turn struct {
	// Reply is the final answer; Echo's default is "FAKE-REPLY: <message>".
	Reply string
	// Chunks splits Reply into that many cumulative deltas (default 1).
	Chunks int
	// NoStream sends no delta/assistant events (the text is then only in
	// the final, the transcript and agent.wait).
	NoStream bool
	// Delay before the run ends (after the deltas).
	Delay time.Duration
	// Hold keeps the run going until Server.Release(runID) or an abort.
	Hold bool
	// EmptyFinal sends the chat final and lifecycle end without text; the
	// text is only in the transcript (and agent.wait has none either).
	EmptyFinal bool
	// NoTranscript skips writing the assistant row to the transcript.
	NoTranscript bool
	// DropFinal sends no terminal chat/lifecycle events; the run still ends
	// (agent.wait, the agent method's final res and the transcript say so).
	DropFinal bool
	// Error ends the run with a chat error carrying this message.
	Error string
	// MessageTool, if set, emits a message tool call with this text before
	// the final (the agent's reply through the message tool).
	MessageTool string
	// Duplicate sends every event frame of the run twice.
	Duplicate bool
	// Malformed interleaves malformed frames (non-JSON, truncated,
	// wrong-type) with the run's events.
	Malformed bool
	// DisconnectMidRun closes every socket after the first delta; the run
	// continues and ends normally.
	DisconnectMidRun bool
}

// Echo is the default script: reply "FAKE-REPLY: " + message.
func Echo(s Submit) Turn { return Turn{Reply: "FAKE-REPLY: " + s.Message} }

// Request is a logged request.
type Request struct {
	Method string
	Params json.RawMessage
}

// Error is a failed response. Return it from a Handler.
type Error struct {
	Code         string
	Message      string
	Details      any
	Retryable    bool
	RetryAfterMs int64
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// ErrNoReply makes a Handler never answer its request.
var ErrNoReply = errors.New("no reply")

// Handler serves one method. Return a payload (marshaled to JSON), an
// *Error, or ErrNoReply. ctx ends when the connection or Server closes.
type Handler func(ctx context.Context, params json.RawMessage) (any, error)

// Server is the fake gateway.
type Server struct {
	opts Options
	hs   *httptest.Server
	log  *slog.Logger
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
	seq  atomic.Int64

	mu sync.Mutex
	// closed is set by Close before it waits for s.wg; goroutines are
	// added to s.wg only under mu while closed is false, so that no Add
	// races with the Wait.
	closed bool
	// restarting refuses connects (UNAVAILABLE) while restart rebuilds the
	// state, as a real gateway does during its startup window.
	restarting  bool
	conns       map[*fconn]struct{}
	handlers    map[string]Handler
	requests    []Request
	runs        map[string]*frun // by run id (= idempotency key)
	lanes       map[string]*frun // newest run per session (lane tail)
	transcripts map[string][]json.RawMessage
	bootID      string
	boots       int
	unavailable int
	started     map[string]chan struct{}
	script      func(Submit) Turn
	headers     []http.Header
}

type fconn struct {
	ws     *websocket.Conn
	cancel context.CancelFunc
	wmu    sync.Mutex
	// scoped: the connection declared the session-scoped-events cap, so
	// it gets run events only of the sessions in subs (guarded by
	// Server.mu), as on the real gateway.
	scoped bool
	subs   map[string]bool
}

// CapSessionScopedEvents is the connect cap that limits a connection's run
// events to the sessions it subscribed to with sessions.messages.subscribe.
const CapSessionScopedEvents = "session-scoped-events"

// scopedEvents are the events a session-scoped connection receives only
// for subscribed sessions (the real gateway's list).
var scopedEvents = map[string]bool{"agent": true, "chat": true, "chat.side_result": true, "session.observer": true,
	"session.tool": true}

func (c *fconn) send(v any) {
	b, _ := json.Marshal(v)
	c.sendRaw(b)
}

func (c *fconn) sendRaw(b []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.ws.Write(ctx, websocket.MessageText, b)
}

type frun struct {
	id, session, message, method string
	turn                         Turn
	cancel                       context.CancelFunc
	done                         chan struct{}
	prev                         *frun
	release                      chan struct{}
	relOnce                      sync.Once
	// set when done
	status, errMsg, text string
	aborted              bool
	startedAt            int64
	abortFlag            atomic.Bool
}

// New starts a Server and closes it when the test ends.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	s := Start(opts)
	t.Cleanup(s.Close)
	return s
}

// Start starts a Server on 127.0.0.1. Call Close when done.
func Start(opts Options) *Server {
	if opts.TickInterval <= 0 {
		opts.TickInterval = 30 * time.Second
	}
	if opts.DefaultAgentID == "" {
		opts.DefaultAgentID = "main"
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 10 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Server{
		opts: opts, log: opts.Logger, ctx: ctx, stop: stop,
		conns: map[*fconn]struct{}{}, handlers: map[string]Handler{},
		runs: map[string]*frun{}, lanes: map[string]*frun{}, transcripts: map[string][]json.RawMessage{},
		started: map[string]chan struct{}{}, unavailable: opts.Unavailable, script: opts.Script,
	}
	s.newBoot()
	s.hs = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	return s
}

func (s *Server) newBoot() {
	s.boots++
	s.bootID = fmt.Sprintf("fake-boot-%d", s.boots)
}

// URL is the ws:// URL of the gateway.
func (s *Server) URL() string { return "ws" + strings.TrimPrefix(s.hs.URL, "http") }

// HTTPURL is the http:// URL of the gateway (clients rewrite it to ws://).
func (s *Server) HTTPURL() string { return s.hs.URL }

// BootID is the current boot id (changes on Restart).
func (s *Server) BootID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bootID
}

// Close closes every connection, stops every run and the HTTP server.
func (s *Server) Close() {
	s.stop()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.cancel()
		c.ws.CloseNow()
	}
	s.mu.Unlock()
	s.hs.CloseClientConnections()
	s.hs.Close()
	s.wg.Wait()
}

// SetScript replaces the run script (nil restores Echo).
func (s *Server) SetScript(f func(Submit) Turn) {
	s.mu.Lock()
	s.script = f
	s.mu.Unlock()
}

// Handle registers h for method, overriding any built-in method. The method
// is advertised in hello-ok.features.methods.
func (s *Server) Handle(method string, h Handler) {
	s.mu.Lock()
	s.handlers[method] = h
	s.mu.Unlock()
}

// Requests returns the requests received so far (connect included).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// CountRequests returns how many requests of method were received.
func (s *Server) CountRequests(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.requests {
		if r.Method == method {
			n++
		}
	}
	return n
}

// UpgradeHeaders returns the HTTP headers of every WebSocket upgrade
// received so far, oldest first.
func (s *Server) UpgradeHeaders() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.headers)
}

// RunCount is the number of distinct runs started since the last Restart.
func (s *Server) RunCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.runs)
}

// Connections is the number of open, authenticated sockets.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// AwaitRun blocks until run id has started (its first events were sent) or
// ctx ends.
func (s *Server) AwaitRun(ctx context.Context, id string) error {
	s.mu.Lock()
	ch := s.startedCh(id)
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("await run %s: %w", id, ctx.Err())
	}
}

func (s *Server) startedCh(id string) chan struct{} {
	ch := s.started[id]
	if ch == nil {
		ch = make(chan struct{})
		s.started[id] = ch
	}
	return ch
}

// Release ends a Hold run normally.
func (s *Server) Release(id string) {
	s.mu.Lock()
	r := s.runs[id]
	s.mu.Unlock()
	if r != nil {
		r.relOnce.Do(func() { close(r.release) })
	}
}

// DisconnectAll closes every socket with 1012 (service restart) after a
// shutdown event. State (runs, transcripts) is kept.
func (s *Server) DisconnectAll() {
	s.mu.Lock()
	conns := make([]*fconn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.send(map[string]any{"type": "event", "event": "shutdown", "payload": map[string]any{"reason": "restart"}})
		c.cancel()
		c.ws.Close(websocket.StatusServiceRestart, "gateway restarting")
		c.ws.CloseNow()
	}
}

// Restart simulates a real gateway restart: sockets close (1012), the boot
// id changes, runs and idempotency keys are forgotten (agent.wait no longer
// knows them), transcripts survive, and every run that was in flight is
// re-run by the new process under a new run id ("recovered-<old id>"),
// after a RecoveryNote user row, with a fresh Turn from the script (its
// Submit carries the original message), as OpenClaw's restart recovery
// does.
func (s *Server) Restart() { s.restart(true) }

// RecoveryNote is the user row a restarted gateway adds before re-running
// an interrupted turn (text as OpenClaw 2026.9.6 writes it, shortened).
const RecoveryNote = "[System] Your previous turn was interrupted by a gateway restart while OpenClaw was waiting on tool/model work. The restart did not cancel the user's task. Continue from the existing transcript."

// RestartLosingRuns is Restart without the recovery: in-flight runs are
// simply gone (their user message stays in the transcript).
func (s *Server) RestartLosingRuns() { s.restart(false) }

func (s *Server) restart(recover bool) {
	s.mu.Lock()
	// Until the recovered runs are registered, connects are refused: a
	// client must not find the new process without its recovery runs.
	s.restarting = true
	runs := s.runs
	s.runs = map[string]*frun{}
	s.lanes = map[string]*frun{}
	s.started = map[string]chan struct{}{}
	s.newBoot()
	var lost []*frun
	for _, r := range runs {
		if !isDone(r) {
			lost = append(lost, r)
		}
	}
	s.mu.Unlock()
	for _, r := range runs {
		r.cancel()
	}
	s.DisconnectAll()
	if recover {
		for _, r := range lost {
			s.startRun(nil, "", "recovery", r.session, r.message, "recovered-"+r.id, RecoveryNote)
		}
	}
	s.mu.Lock()
	s.restarting = false
	s.mu.Unlock()
}

// Broadcast sends a raw frame to every connection (malformed ones too).
func (s *Server) Broadcast(frame []byte) {
	for _, c := range s.snapshotConns() {
		c.sendRaw(frame)
	}
}

func (s *Server) snapshotConns() []*fconn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*fconn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// eventFrame is an event in the gateway's own member order (type and
// event first, then payload and seq): clients may key a fast path on that
// prefix, so a map (whose keys encoding/json sorts) would send every event
// down their slow path and measure what a real gateway never costs.
type eventFrame struct {
	Type    string `json:"type"`
	Event   string `json:"event"`
	Payload any    `json:"payload"`
	Seq     int64  `json:"seq"`
}

func (s *Server) event(name string, payload any) eventFrame {
	return eventFrame{Type: "event", Event: name, Payload: payload, Seq: s.seq.Add(1)}
}

// broadcastEvent sends an event of session key to every connection that
// may see it: all of them, except that a session-scoped connection sees
// run events only of the sessions it subscribed to.
func (s *Server) broadcastEvent(name, key string, payload any, dup bool) {
	b, _ := json.Marshal(s.event(name, payload))
	for _, c := range s.recipients(name, key) {
		c.sendRaw(b)
		if dup {
			c.sendRaw(b)
		}
	}
}

func (s *Server) recipients(name, key string) []*fconn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*fconn, 0, len(s.conns))
	for c := range s.conns {
		if !c.scoped || !scopedEvents[name] || c.subs[key] {
			out = append(out, c)
		}
	}
	return out
}

// subscribers returns the connections subscribed to session key. s.mu held.
func (s *Server) subscribers(key string) []*fconn {
	var out []*fconn
	for c := range s.conns {
		if c.subs[key] {
			out = append(out, c)
		}
	}
	return out
}

// Subscribed reports how many connections are subscribed to session key.
func (s *Server) Subscribed(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subscribers(s.canonical(key)))
}

var clientIDs = []string{"webchat-ui", "openclaw-control-ui", "openclaw-browser-copilot", "openclaw-tui", "webchat",
	"cli", "gateway-client", "openclaw-macos", "openclaw-linux", "openclaw-ios", "openclaw-watchos",
	"openclaw-android", "node-host", "openclaw-worker", "test", "fingerprint", "openclaw-probe"}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" && r.Header.Get("Upgrade") == "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"status":"live"}`))
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "gateway closed", http.StatusServiceUnavailable)
		return
	}
	s.wg.Add(1)
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
	defer s.wg.Done()
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	ws.SetReadLimit(32 << 20)
	ctx, cancel := context.WithCancel(s.ctx)
	c := &fconn{ws: ws, cancel: cancel}
	defer cancel()
	defer ws.CloseNow()
	s.serveConn(ctx, c)
}

type reqFrame struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (s *Server) serveConn(ctx context.Context, c *fconn) {
	nonce := fmt.Sprintf("nonce-%d", s.seq.Add(1))
	ts := time.Now().UnixMilli()
	c.send(map[string]any{"type": "event", "event": "connect.challenge",
		"payload": map[string]any{"nonce": nonce, "ts": ts}})
	_, data, err := c.ws.Read(ctx)
	if err != nil {
		return
	}
	var f reqFrame
	if json.Unmarshal(data, &f) != nil || f.Type != "req" || f.Method != "connect" {
		c.ws.Close(websocket.StatusPolicyViolation, "first request must be connect")
		return
	}
	s.logRequest(f)
	if !s.handshake(c, f, nonce, ts) {
		return
	}
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	if s.opts.SendTicks {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTicker(s.opts.TickInterval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					c.send(s.event("tick", map[string]any{"ts": time.Now().UnixMilli()}))
				}
			}
		}()
	}
	for {
		_, data, err := c.ws.Read(ctx)
		if err != nil {
			return
		}
		var f reqFrame
		if err := json.Unmarshal(data, &f); err != nil || f.Type != "req" || f.ID == "" {
			continue
		}
		s.logRequest(f)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.dispatch(ctx, c, f)
		}()
	}
}

func (s *Server) logRequest(f reqFrame) {
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: f.Method, Params: f.Params})
	s.mu.Unlock()
}

func resOK(id string, payload any) map[string]any {
	return map[string]any{"type": "res", "id": id, "ok": true, "payload": payload}
}

func resErr(id string, e *Error) map[string]any {
	er := map[string]any{"code": e.Code, "message": e.Message}
	if e.Details != nil {
		er["details"] = e.Details
	}
	if e.Retryable {
		er["retryable"] = true
	}
	if e.RetryAfterMs > 0 {
		er["retryAfterMs"] = e.RetryAfterMs
	}
	return map[string]any{"type": "res", "id": id, "ok": false, "error": er}
}

type connectWire struct {
	MinProtocol int `json:"minProtocol"`
	MaxProtocol int `json:"maxProtocol"`
	Client      struct {
		ID, Version, Platform, Mode string
	} `json:"client"`
	Role   string   `json:"role"`
	Scopes []string `json:"scopes"`
	Caps   []string `json:"caps"`
	Auth   *struct {
		Token, Password, DeviceToken string
	} `json:"auth"`
	Device *struct {
		ID        string `json:"id"`
		PublicKey string `json:"publicKey"`
		Signature string `json:"signature"`
		SignedAt  int64  `json:"signedAt"`
		Nonce     string `json:"nonce"`
	} `json:"device"`
}

func (s *Server) handshake(c *fconn, f reqFrame, nonce string, ts int64) bool {
	var p connectWire
	if err := json.Unmarshal(f.Params, &p); err != nil {
		c.send(resErr(f.ID, &Error{Code: "INVALID_REQUEST", Message: "invalid connect params: " + err.Error()}))
		c.ws.Close(websocket.StatusPolicyViolation, "invalid connect params")
		return false
	}
	s.mu.Lock()
	unavailable := s.restarting || s.unavailable > 0
	if unavailable && !s.restarting {
		s.unavailable--
	}
	s.mu.Unlock()
	if unavailable {
		c.send(resErr(f.ID, &Error{Code: "UNAVAILABLE", Message: "gateway starting; retry shortly", Retryable: true,
			RetryAfterMs: s.opts.RetryAfter.Milliseconds(), Details: map[string]any{"reason": "startup-sidecars"}}))
		c.ws.Close(websocket.StatusTryAgainLater, "gateway starting")
		return false
	}
	if p.MinProtocol > 4 || p.MaxProtocol < 4 {
		c.ws.Close(websocket.StatusProtocolError, "protocol mismatch")
		return false
	}
	if !slices.Contains(clientIDs, p.Client.ID) {
		msg := "invalid connect params: at /client/id: must be equal to one of the allowed values"
		c.send(resErr(f.ID, &Error{Code: "INVALID_REQUEST", Message: msg}))
		c.ws.Close(websocket.StatusPolicyViolation, msg)
		return false
	}
	if s.opts.Token != "" || s.opts.Password != "" {
		if p.Auth == nil || (p.Auth.Token == "" && p.Auth.Password == "") {
			c.send(resErr(f.ID, &Error{Code: "NOT_PAIRED", Message: "device identity required",
				Details: map[string]any{"code": "DEVICE_IDENTITY_REQUIRED"}}))
			c.ws.Close(websocket.StatusPolicyViolation, "device identity required")
			return false
		}
		okTok := s.opts.Token != "" && p.Auth.Token == s.opts.Token
		okPw := s.opts.Password != "" && p.Auth.Password == s.opts.Password
		if !okTok && !okPw {
			msg := "unauthorized: gateway token mismatch (provide gateway auth token)"
			c.send(resErr(f.ID, &Error{Code: "INVALID_REQUEST", Message: msg, Details: map[string]any{
				"code": "AUTH_TOKEN_MISMATCH", "authReason": "token_mismatch", "canRetryWithDeviceToken": false,
				"recommendedNextStep": "update_auth_credentials"}}))
			c.ws.Close(websocket.StatusPolicyViolation, msg)
			return false
		}
	}
	if d := p.Device; d != nil {
		tok := ""
		if p.Auth != nil {
			tok = p.Auth.Token
		}
		if err := verifyDevice(d.ID, d.PublicKey, d.Signature, d.Nonce, d.SignedAt, nonce, ts, p, tok); err != nil {
			msg := "device signature invalid: " + err.Error()
			c.send(resErr(f.ID, &Error{Code: "INVALID_REQUEST", Message: msg, Details: map[string]any{"code": "DEVICE_SIGNATURE_INVALID"}}))
			c.ws.Close(websocket.StatusPolicyViolation, "device signature invalid")
			return false
		}
	}
	s.mu.Lock()
	methods := []string{"health", "agent", "agent.wait", "chat.send", "chat.abort", "chat.history",
		"sessions.list", "sessions.describe", "sessions.abort", "agents.list"}
	if !s.opts.Unscoped {
		methods = append(methods, "sessions.messages.subscribe", "sessions.messages.unsubscribe")
	}
	for m := range s.handlers {
		if !slices.Contains(methods, m) {
			methods = append(methods, m)
		}
	}
	boot := s.bootID
	// Register before hello-ok: once the client holds hello-ok, broadcasts
	// and DisconnectAll reach this connection.
	c.scoped = !s.opts.Unscoped && slices.Contains(p.Caps, CapSessionScopedEvents)
	c.subs = map[string]bool{}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	hello := map[string]any{
		"type": "hello-ok", "protocol": 4,
		"server":   map[string]any{"version": "fake", "bootId": boot, "connId": fmt.Sprintf("conn-%d", s.seq.Add(1))},
		"features": map[string]any{"methods": methods, "events": []string{"connect.challenge", "agent", "chat", "tick", "health", "shutdown"}},
		"snapshot": map[string]any{"sessionDefaults": map[string]any{"defaultAgentId": s.opts.DefaultAgentID,
			"mainKey": "main", "mainSessionKey": "agent:" + s.opts.DefaultAgentID + ":main"}},
		"auth":   map[string]any{"method": "token", "role": "operator", "scopes": p.Scopes},
		"policy": map[string]any{"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": s.opts.TickInterval.Milliseconds()},
	}
	c.send(resOK(f.ID, hello))
	return true
}

func verifyDevice(id, pubB64, sigB64, dNonce string, signedAt int64, nonce string, ts int64, p connectWire, token string) error {
	pub, err := base64.RawURLEncoding.DecodeString(pubB64)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return errors.New("bad public key")
	}
	sum := sha256.Sum256(pub)
	if hex.EncodeToString(sum[:]) != id {
		return errors.New("device id is not the public key hash")
	}
	if dNonce != nonce || signedAt != ts {
		return errors.New("nonce or signedAt does not match the challenge")
	}
	sig, err := base64.RawURLEncoding.DecodeString(sigB64)
	if err != nil {
		return errors.New("bad signature encoding")
	}
	payload := strings.Join([]string{"v3", id, p.Client.ID, p.Client.Mode, p.Role, strings.Join(p.Scopes, ","),
		strconv.FormatInt(signedAt, 10), token, nonce, strings.ToLower(strings.TrimSpace(p.Client.Platform)), ""}, "|")
	if !ed25519.Verify(pub, []byte(payload), sig) {
		return errors.New("signature does not verify")
	}
	return nil
}
