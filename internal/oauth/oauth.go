// Package oauth checks the access tokens that the operator's OAuth 2.1
// authorization server issues for serve, which is its resource server:
// JWTs against the issuer's published keys (found through its metadata,
// cached, fetched again for a key id it does not know), or opaque tokens
// through the issuer's introspection endpoint; then issuer, audience,
// lifetime, scopes and groups, and the claim that names the user.
package oauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults and bounds of Options.
const (
	// DefaultClockSkew is how far a token's exp and nbf may be off the
	// local clock.
	DefaultClockSkew = time.Minute
	// MaxClockSkew bounds ClockSkew: a larger one would keep an expired
	// token alive for long.
	MaxClockSkew = 5 * time.Minute
	// DefaultKeyRefresh is the least time between two fetches of the
	// issuer's keys (or metadata) made because a token named an unknown
	// key: a flood of tokens with made-up key ids costs one fetch per
	// interval, not one each.
	DefaultKeyRefresh = 10 * time.Second
	// DefaultKeyMaxAge is how long fetched keys are used before they are
	// fetched again regardless.
	DefaultKeyMaxAge = time.Hour
	// IntrospectionTTL is the longest an introspected token's answer is
	// reused: a stateless MCP client sends every message as a request, and
	// asking the issuer for each would load it; a revoked token stops
	// working within this time.
	IntrospectionTTL = 30 * time.Second
	// maxIntrospected bounds the answers kept.
	maxIntrospected = 1024
	// maxToken bounds the length of a token looked at.
	maxToken = 16 << 10
	// maxDocument bounds a metadata, key set or introspection reply.
	maxDocument = 1 << 20
)

// Options configures a Validator. Issuer and Audiences are required.
type Options struct {
	// Issuer is the authorization server's issuer identifier, exactly as
	// its metadata and its tokens' iss claim spell it.
	Issuer string
	// Audiences are the aud values accepted: the resource's canonical URL
	// first, and any other name the issuer puts in tokens meant for it.
	Audiences []string
	// RequiredScopes must all be granted to a token; nil requires none.
	RequiredScopes []string
	// UserClaim names the claim whose string value is the user; "" means
	// "sub".
	UserClaim string
	// GroupsClaim names the claim listing the user's groups; "" means
	// "groups".
	GroupsClaim string
	// AllowedGroups, when set, admit only users in at least one of them.
	AllowedGroups []string
	// Introspect sends tokens that are not JWTs to the issuer's
	// introspection endpoint (RFC 7662), authenticated as ClientID and
	// ClientSecret. Off, such tokens are refused.
	Introspect             bool
	ClientID, ClientSecret string
	// ClockSkew is the tolerance on exp and nbf; zero means
	// DefaultClockSkew, and it is capped at MaxClockSkew.
	ClockSkew time.Duration
	// KeyRefresh is the least time between fetches caused by unknown
	// key ids; zero means DefaultKeyRefresh.
	KeyRefresh time.Duration
	// KeyMaxAge is how long fetched keys are trusted before a fetch;
	// zero means DefaultKeyMaxAge.
	KeyMaxAge time.Duration
	// HTTPClient reaches the issuer; nil means a client with a 10 s
	// timeout.
	HTTPClient *http.Client
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives operational logs (never a token); nil discards them.
	Logger *slog.Logger
}

// Token is what a valid access token says.
type Token struct {
	// User is the value of the user claim.
	User string
	// Scopes are the scopes granted.
	Scopes []string
	// Groups are the user's groups, as far as the token lists them.
	Groups []string
	// Expiry is when the token expires (zero when it says nothing).
	Expiry time.Time
}

// Sentinel errors of Validate, for errors.Is.
var (
	// ErrInvalidToken: the token is not one to accept (malformed, forged,
	// expired, for another issuer or audience); RFC 6750's invalid_token.
	ErrInvalidToken = errors.New("invalid_token")
	// ErrInsufficientScope: the token is valid but lacks a required scope
	// or its user is in no allowed group; RFC 6750's insufficient_scope.
	ErrInsufficientScope = errors.New("insufficient_scope")
	// ErrUnavailable: the issuer could not be asked (metadata, keys or
	// introspection unreachable); the token is neither accepted nor
	// known bad.
	ErrUnavailable = errors.New("authorization server unavailable")
)

// Error is a refusal of Validate: Kind is one of the sentinel errors,
// Reason says why for a person (it never quotes the token).
type Error struct {
	Kind   error
	Reason string
}

func (e *Error) Error() string { return e.Kind.Error() + ": " + e.Reason }

// Unwrap returns Kind.
func (e *Error) Unwrap() error { return e.Kind }

func invalid(format string, args ...any) error {
	return &Error{Kind: ErrInvalidToken, Reason: fmt.Sprintf(format, args...)}
}

// Validator checks access tokens. It is safe for concurrent use; it owns
// no goroutines (fetches happen inside Validate and Check).
type Validator struct {
	o      Options
	client *http.Client
	logger *slog.Logger

	mu       sync.Mutex
	meta     *Metadata // nil until discovered
	metaTry  time.Time // last discovery attempt
	keys     *keyCache
	fetching sync.Mutex // one discovery at a time
	// introspected holds accepted introspection answers by the token's
	// SHA-256 (never the token itself), until IntrospectionTTL or the
	// token's expiry.
	introspected map[[32]byte]introspectedToken
}

type introspectedToken struct {
	t     Token
	until time.Time
}

// ErrConfig is wrapped by New's errors.
var ErrConfig = errors.New("oauth configuration")

// New checks opts and returns a Validator. It does no network I/O: the
// issuer is asked on first use (or by Check).
func New(opts Options) (*Validator, error) {
	if err := CheckIssuerURL(opts.Issuer); err != nil {
		return nil, fmt.Errorf("%w: issuer: %w", ErrConfig, err)
	}
	if len(opts.Audiences) == 0 {
		return nil, fmt.Errorf("%w: no audience: give the resource's canonical URL (the /mcp URL clients use)", ErrConfig)
	}
	if opts.Introspect && opts.ClientID == "" {
		return nil, fmt.Errorf("%w: introspection needs a client id (and usually a secret) to authenticate to the issuer", ErrConfig)
	}
	if opts.UserClaim == "" {
		opts.UserClaim = "sub"
	}
	if opts.GroupsClaim == "" {
		opts.GroupsClaim = "groups"
	}
	if opts.ClockSkew <= 0 {
		opts.ClockSkew = DefaultClockSkew
	}
	opts.ClockSkew = min(opts.ClockSkew, MaxClockSkew)
	if opts.KeyRefresh <= 0 {
		opts.KeyRefresh = DefaultKeyRefresh
	}
	if opts.KeyMaxAge <= 0 {
		opts.KeyMaxAge = DefaultKeyMaxAge
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	v := &Validator{o: opts, client: opts.HTTPClient, logger: opts.Logger}
	if v.client == nil {
		v.client = &http.Client{Timeout: 10 * time.Second}
	}
	if v.logger == nil {
		v.logger = slog.New(slog.DiscardHandler)
	}
	v.keys = &keyCache{}
	return v, nil
}

// CheckIssuerURL refuses an issuer that is not an absolute https URL
// (http only on a loopback host), with no query or fragment.
func CheckIssuerURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%q is not an absolute http(s) URL: give the issuer identifier, e.g. https://login.example.com/realms/team", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q has a query or fragment, which an issuer identifier may not", raw)
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return fmt.Errorf("%q is plain http beyond loopback: an issuer must be https", raw)
	}
	return nil
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	return strings.HasPrefix(h, "127.") || h == "::1"
}

// Issuer returns the configured issuer.
func (v *Validator) Issuer() string { return v.o.Issuer }

// Validate checks token and returns what it says. A refusal is an *Error
// wrapping ErrInvalidToken or ErrInsufficientScope; an issuer that cannot
// be reached gives an error wrapping ErrUnavailable. It may block on the
// issuer (discovery, keys, introspection) for as long as ctx allows.
func (v *Validator) Validate(ctx context.Context, token string) (Token, error) {
	if token == "" {
		return Token{}, invalid("no token")
	}
	if len(token) > maxToken {
		return Token{}, invalid("the token is longer than %d bytes", maxToken)
	}
	var c claims
	var err error
	if strings.Count(token, ".") == 2 {
		c, err = v.verifyJWT(ctx, token)
	} else {
		if !v.o.Introspect {
			return Token{}, invalid("not a JWT, and introspection of opaque tokens is not configured")
		}
		return v.introspectCached(ctx, token)
	}
	if err != nil {
		return Token{}, err
	}
	return v.check(c)
}

// introspectCached answers an opaque token from the cache of accepted
// answers, else asks the issuer and keeps an accepted answer.
func (v *Validator) introspectCached(ctx context.Context, token string) (Token, error) {
	key := sha256.Sum256([]byte(token))
	now := v.o.Now()
	v.mu.Lock()
	hit, ok := v.introspected[key]
	v.mu.Unlock()
	if ok && now.Before(hit.until) {
		return hit.t, nil
	}
	c, err := v.introspect(ctx, token)
	if err != nil {
		return Token{}, err
	}
	t, err := v.check(c)
	if err != nil {
		return Token{}, err
	}
	until := now.Add(IntrospectionTTL)
	if t.Expiry.Before(until) {
		until = t.Expiry
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.introspected == nil {
		v.introspected = map[[32]byte]introspectedToken{}
	}
	if len(v.introspected) >= maxIntrospected {
		for k, e := range v.introspected {
			if !now.Before(e.until) || len(v.introspected) >= maxIntrospected {
				delete(v.introspected, k)
			}
		}
	}
	v.introspected[key] = introspectedToken{t: t, until: until}
	return t, nil
}

// check applies the rules every token obeys, JWT or introspected.
func (v *Validator) check(c claims) (Token, error) {
	if c.Issuer != v.o.Issuer {
		return Token{}, invalid("issued by %q, not by the configured issuer %q", clip(c.Issuer), v.o.Issuer)
	}
	// An introspection reply may leave aud out: the issuer answered this
	// resource server's own credentials. An aud it gives is still checked.
	if !c.introspected || len(c.Audience) > 0 {
		if !slices.ContainsFunc(c.Audience, func(a string) bool { return slices.Contains(v.o.Audiences, a) }) {
			return Token{}, invalid("its audience %q is not this resource (accepted: %s)", clipList(c.Audience), strings.Join(v.o.Audiences, ", "))
		}
	}
	now := v.o.Now()
	skew := v.o.ClockSkew
	if c.Expiry.IsZero() {
		return Token{}, invalid("it has no expiry (exp)")
	}
	if now.After(c.Expiry.Add(skew)) {
		return Token{}, invalid("expired at %s", c.Expiry.UTC().Format(time.RFC3339))
	}
	if !c.NotBefore.IsZero() && now.Add(skew).Before(c.NotBefore) {
		return Token{}, invalid("not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	}
	if !c.IssuedAt.IsZero() && now.Add(skew).Before(c.IssuedAt) {
		return Token{}, invalid("issued in the future (%s)", c.IssuedAt.UTC().Format(time.RFC3339))
	}
	user := c.str(v.o.UserClaim)
	if user == "" {
		return Token{}, invalid("it has no %q claim naming the user", v.o.UserClaim)
	}
	t := Token{User: user, Scopes: c.scopes(), Groups: c.list(v.o.GroupsClaim), Expiry: c.Expiry}
	var missing []string
	for _, s := range v.o.RequiredScopes {
		if !slices.Contains(t.Scopes, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		return Token{}, &Error{Kind: ErrInsufficientScope, Reason: "missing scope " + strings.Join(missing, " ")}
	}
	if len(v.o.AllowedGroups) > 0 && !slices.ContainsFunc(t.Groups, func(g string) bool { return slices.Contains(v.o.AllowedGroups, g) }) {
		return Token{}, &Error{Kind: ErrInsufficientScope, Reason: "the user is in no allowed group"}
	}
	return t, nil
}

// clip bounds a value from a token quoted in an error.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

func clipList(l []string) string { return clip(strings.Join(l, " ")) }
