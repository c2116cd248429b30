package gateway

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strings"
	"time"
)

// Protocol is the gateway protocol version this client speaks.
const Protocol = 4

// Default connect identity. The gateway accepts only a closed set of client
// ids and modes; "gateway-client"/"backend" is the reserved local-backend
// path that keeps its scopes without a device identity on loopback.
const (
	DefaultClientID   = "gateway-client"
	DefaultClientMode = "backend"
)

// Operator scopes.
const (
	ScopeRead  = "operator.read"
	ScopeWrite = "operator.write"
	ScopeAdmin = "operator.admin"
)

// Defaults used when the matching Options field is zero.
const (
	DefaultHandshakeTimeout  = 15 * time.Second
	DefaultCallTimeout       = 30 * time.Second
	DefaultReadLimit         = 32 << 20
	DefaultMinReconnectDelay = time.Second
	DefaultMaxReconnectDelay = 30 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultRestartGrace      = 5 * time.Minute
	DefaultSessionLinger     = 2 * time.Second
)

// Options configures Dial. The zero value of each field is a documented
// default; only URL and one of Token/Password are normally set.
type Options struct {
	// URL of the gateway. http:// and https:// are rewritten to ws:// and
	// wss://; a bare host:port gets ws://.
	URL string
	// Token is the shared gateway token (auth.token); Password the shared
	// password (auth.password). Either or both may be set.
	Token    string
	Password string
	// Headers are extra HTTP headers sent with the WebSocket upgrade (for
	// example Cloudflare Access credentials). See ParseHeaders.
	Headers map[string]string

	// ClientID and ClientMode identify the client; defaults DefaultClientID
	// and DefaultClientMode. The gateway rejects values outside its closed
	// enums.
	ClientID   string
	ClientMode string
	// ClientVersion is reported in connect; default "clawconnect".
	ClientVersion string
	// Platform is reported in connect and signed into the device payload;
	// default runtime.GOOS.
	Platform string
	// Scopes requested; default read, write and admin.
	Scopes []string
	// Caps advertised; nil means CapToolEvents, so that tool start/result
	// events (and message-tool replies) reach runs, and
	// CapSessionScopedEvents, so that the gateway sends this client only
	// the events of sessions it follows. Pass an empty non-nil slice to
	// advertise none (every run event is then received and filtered here).
	Caps []string
	// Device, if set, signs the connect with this Ed25519 identity (v3
	// payload). Needed for gateways that are not on loopback. See
	// LoadOrCreateDevice.
	Device *Device
	// DeviceToken, if set, is sent as auth.deviceToken (issued earlier in
	// hello-ok.auth.deviceToken) and signed instead of Token.
	DeviceToken string

	// HandshakeTimeout bounds the wait for connect.challenge and for the
	// connect answer; default 15s.
	HandshakeTimeout time.Duration
	// CallTimeout is the default per-call timeout; default 30s. A negative
	// value means no timeout beyond the caller's context.
	CallTimeout time.Duration
	// ReadLimit is the largest frame accepted, in bytes; default 32 MiB
	// (the gateway's maxPayload is 25 MiB).
	ReadLimit int64
	// MinReconnectDelay and MaxReconnectDelay shape the reconnect backoff
	// min(Min·2^(n-1), Max), each delay drawn from its upper half (jitter);
	// defaults 1s and 30s.
	MinReconnectDelay time.Duration
	MaxReconnectDelay time.Duration
	// TickTimeout overrides the silence after which the connection is
	// considered dead; default 2 × hello-ok policy.tickIntervalMs.
	TickTimeout time.Duration

	// RestartGrace is how long a run interrupted by a gateway restart waits
	// for the restarted gateway to re-run it (OpenClaw recovers the main
	// session's interrupted turn under a new run id) before resubmitting its
	// idempotency key; default 5 minutes.
	RestartGrace time.Duration

	// SessionLinger is how long the gateway-side subscription to a
	// session's events outlives the last run followed there (see
	// CapSessionScopedEvents), so that a run started there meanwhile (a
	// client continuing its thread) submits without a subscribe round trip
	// first; default 2s, a negative value unsubscribes at once.
	SessionLinger time.Duration

	// Logger receives connection and bad-frame logs; nil discards.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.ClientID == "" {
		o.ClientID = DefaultClientID
	}
	if o.ClientMode == "" {
		o.ClientMode = DefaultClientMode
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "clawconnect"
	}
	if o.Platform == "" {
		o.Platform = runtime.GOOS
	}
	if o.Scopes == nil {
		o.Scopes = []string{ScopeRead, ScopeWrite, ScopeAdmin}
	}
	if o.Caps == nil {
		o.Caps = []string{CapToolEvents, CapSessionScopedEvents}
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.SessionLinger == 0 {
		o.SessionLinger = DefaultSessionLinger
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.ReadLimit <= 0 {
		o.ReadLimit = DefaultReadLimit
	}
	if o.MinReconnectDelay <= 0 {
		o.MinReconnectDelay = DefaultMinReconnectDelay
	}
	if o.MaxReconnectDelay <= 0 {
		o.MaxReconnectDelay = DefaultMaxReconnectDelay
	}
	if o.RestartGrace <= 0 {
		o.RestartGrace = DefaultRestartGrace
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// NormalizeURL rewrites a gateway URL to a WebSocket URL: http→ws,
// https→wss, and a missing scheme becomes ws.
func NormalizeURL(raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", fmt.Errorf("normalize url: empty gateway url")
	}
	if !strings.Contains(raw, "://") {
		raw = "ws://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("normalize url: %w", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "ws":
		u.Scheme = "ws"
	case "https", "wss":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("normalize url: unsupported scheme %q (want ws, wss, http or https)", u.Scheme)
	}
	if u.Host == "" {
		return "", fmt.Errorf("normalize url: %q has no host", raw)
	}
	return u.String(), nil
}

// SyntheticClientAddress is the X-Forwarded-For value added when Cloudflare
// Access headers are present without one.
const SyntheticClientAddress = "192.0.2.1"

// ParseHeaders parses the CLAWCONNECT_GATEWAY_HEADERS value: a JSON object
// whose string values are kept (others dropped) and whose keys are
// lowercased. If any key starts with "cf-access-" and there is no
// "x-forwarded-for", it adds x-forwarded-for: SyntheticClientAddress. An
// empty string yields nil, nil; invalid JSON yields an error (callers
// usually warn once and continue without extra headers).
func ParseHeaders(raw string) (map[string]string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("parse gateway headers: %w", err)
	}
	out := make(map[string]string, len(m))
	cf := false
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			continue
		}
		k = strings.ToLower(k)
		out[k] = s
		if strings.HasPrefix(k, "cf-access-") {
			cf = true
		}
	}
	if _, ok := out["x-forwarded-for"]; cf && !ok {
		out["x-forwarded-for"] = SyntheticClientAddress
	}
	return out, nil
}
