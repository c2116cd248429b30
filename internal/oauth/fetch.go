package oauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Metadata is the part of the issuer's authorization server metadata
// (RFC 8414, or OpenID Connect discovery) that serve uses.
type Metadata struct {
	Issuer                string   `json:"issuer"`
	AuthorizationEndpoint string   `json:"authorization_endpoint"`
	TokenEndpoint         string   `json:"token_endpoint"`
	JWKSURI               string   `json:"jwks_uri"`
	IntrospectionEndpoint string   `json:"introspection_endpoint"`
	CodeChallengeMethods  []string `json:"code_challenge_methods_supported"`
}

// signingAlgs are the JWS algorithms accepted: asymmetric ones only. An
// HMAC algorithm would let anyone holding the issuer's public key (every
// client) forge tokens, and "none" is no signature at all.
var signingAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

// keyCache holds the issuer's signing keys.
type keyCache struct {
	set     jose.JSONWebKeySet
	fetched time.Time // when set was fetched; zero before the first fetch
	tried   time.Time // the last fetch attempt
	// hunted is the last fetch attempt made for a key id that a fresh set
	// lacked. Only such fetches hold back the next one for an unknown key
	// id: a key the issuer rotated in just after a fetch made for another
	// reason (the first token, an aged set) is looked for at once.
	hunted time.Time
}

// metadataURLs are where the metadata of issuer may be: the RFC 8414
// location (the well-known segment inserted before the issuer's path),
// then OpenID Connect discovery's (appended to it).
func metadataURLs(issuer string) []string {
	u, _ := url.Parse(issuer)
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	base := u.Scheme + "://" + u.Host
	return []string{
		base + "/.well-known/oauth-authorization-server" + path,
		strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration",
	}
}

// Discover returns the issuer's metadata, fetched once and then kept. A
// failed discovery is retried at most once per KeyRefresh; meanwhile it
// answers an error wrapping ErrUnavailable.
func (v *Validator) Discover(ctx context.Context) (*Metadata, error) {
	v.mu.Lock()
	m, tried := v.meta, v.metaTry
	v.mu.Unlock()
	if m != nil {
		return m, nil
	}
	v.fetching.Lock()
	defer v.fetching.Unlock()
	v.mu.Lock()
	m = v.meta
	v.mu.Unlock()
	if m != nil {
		return m, nil
	}
	now := v.o.Now()
	if !tried.IsZero() && now.Sub(tried) < v.o.KeyRefresh {
		return nil, fmt.Errorf("%w: its metadata could not be read a moment ago; trying again shortly", ErrUnavailable)
	}
	v.mu.Lock()
	v.metaTry = now
	v.mu.Unlock()
	m, err := v.discover(ctx)
	if err != nil {
		v.logger.Warn("oauth: issuer metadata unavailable", "issuer", v.o.Issuer, "err", err)
		return nil, err
	}
	v.mu.Lock()
	v.meta = m
	v.mu.Unlock()
	return m, nil
}

func (v *Validator) discover(ctx context.Context) (*Metadata, error) {
	var errs []error
	for _, u := range metadataURLs(v.o.Issuer) {
		var m Metadata
		err := v.getJSON(ctx, u, &m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if m.Issuer != v.o.Issuer {
			// RFC 8414 §3.3: metadata naming another issuer is not this
			// issuer's, whoever served it.
			return nil, fmt.Errorf("%w: %s names issuer %q, not the configured %q: set the issuer exactly as the server spells it",
				ErrUnavailable, u, clip(m.Issuer), v.o.Issuer)
		}
		if m.JWKSURI == "" && m.IntrospectionEndpoint == "" {
			return nil, fmt.Errorf("%w: %s lists neither jwks_uri nor introspection_endpoint", ErrUnavailable, u)
		}
		return &m, nil
	}
	return nil, fmt.Errorf("%w: no metadata at the issuer: %w", ErrUnavailable, errors.Join(errs...))
}

// getJSON reads a JSON document of at most maxDocument bytes.
func (v *Validator) getJSON(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	return v.do(req, out)
}

func (v *Validator) do(req *http.Request, out any) error {
	resp, err := v.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", strings.ToLower(req.Method), req.URL.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDocument))
		return fmt.Errorf("%s %s: status %s", strings.ToLower(req.Method), req.URL.Redacted(), resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDocument)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode: %w", strings.ToLower(req.Method), req.URL.Redacted(), err)
	}
	return nil
}

// keysFor returns the keys that may have signed a token with this key id
// and algorithm, fetching the key set when it was never fetched, is older
// than KeyMaxAge, or lacks kid. Fetches for key ids a fresh set lacks
// happen at most once per KeyRefresh, so that tokens naming made-up keys
// cannot make serve hammer the issuer; so do attempts after a failed
// fetch. Between fetches, an unknown kid finds no key.
func (v *Validator) keysFor(ctx context.Context, kid string, alg string) ([]jose.JSONWebKey, error) {
	now := v.o.Now()
	v.mu.Lock()
	found := match(v.keys.set, kid, alg)
	never := v.keys.fetched.IsZero()
	fresh := !never && now.Sub(v.keys.fetched) <= v.o.KeyMaxAge
	last := v.keys.tried // a never fetched or aged set: since any attempt
	if fresh {
		last = v.keys.hunted // a fresh set lacking kid: since the last hunt
	}
	recent := !last.IsZero() && now.Sub(last) < v.o.KeyRefresh
	if (len(found) > 0 && fresh) || recent {
		v.mu.Unlock()
		if never && len(found) == 0 {
			return nil, fmt.Errorf("%w: its keys could not be read a moment ago; trying again shortly", ErrUnavailable)
		}
		return found, nil
	}
	// Concurrent callers see the attempt and do not repeat it.
	v.keys.tried = now
	if fresh {
		v.keys.hunted = now
	}
	v.mu.Unlock()
	m, err := v.Discover(ctx)
	if err != nil {
		return found, err
	}
	if m.JWKSURI == "" {
		return nil, invalid("a JWT, but the issuer publishes no keys (jwks_uri)")
	}
	var set jose.JSONWebKeySet
	if err := v.getJSON(ctx, m.JWKSURI, &set); err != nil {
		v.logger.Warn("oauth: issuer keys unavailable", "jwks_uri", m.JWKSURI, "err", err)
		if len(found) > 0 {
			return found, nil // keep using the known keys
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	v.mu.Lock()
	v.keys.set, v.keys.fetched = set, now
	v.mu.Unlock()
	v.logger.Info("oauth: fetched issuer keys", "jwks_uri", m.JWKSURI, "keys", len(set.Keys))
	return match(set, kid, alg), nil
}

// match lists the public signing keys of set with this kid that allow
// alg ("" matches any).
func match(set jose.JSONWebKeySet, kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range set.Keys {
		if (kid != "" && k.KeyID != kid) || (k.Use != "" && k.Use != "sig") || (alg != "" && k.Algorithm != "" && k.Algorithm != alg) {
			continue
		}
		if !k.IsPublic() {
			continue // a secret in a published key set is a mistake; never verify with it
		}
		out = append(out, k)
	}
	return out
}

// verifyJWT checks a JWT's signature against the issuer's keys and returns
// its claims.
func (v *Validator) verifyJWT(ctx context.Context, token string) (claims, error) {
	if alg := headerAlg(token); alg != "" && !slices.Contains(signingAlgs, jose.SignatureAlgorithm(alg)) {
		return claims{}, invalid("signed with algorithm %q, which is never accepted (accepted: %s)", clip(alg), algNames())
	}
	tok, err := jwt.ParseSigned(token, signingAlgs)
	if err != nil {
		return claims{}, invalid("not a well-formed signed JWT")
	}
	if len(tok.Headers) != 1 {
		return claims{}, invalid("it carries %d signatures, not one", len(tok.Headers))
	}
	h := tok.Headers[0]
	keys, err := v.keysFor(ctx, h.KeyID, h.Algorithm)
	if err != nil {
		return claims{}, err
	}
	if len(keys) == 0 {
		return claims{}, invalid("signed with key %q (%s), which the issuer does not publish", clip(h.KeyID), h.Algorithm)
	}
	for _, k := range keys {
		var payload json.RawMessage
		if err := tok.Claims(k.Key, &payload); err == nil {
			return parseClaims(payload)
		}
	}
	return claims{}, invalid("its signature does not verify with the issuer's key %q", clip(h.KeyID))
}

// headerAlg is the alg of a JWT's header, "" when it cannot be read.
func headerAlg(token string) string {
	seg, _, _ := strings.Cut(token, ".")
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return ""
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(b, &h) != nil {
		return ""
	}
	return h.Alg
}

func algNames() string {
	names := make([]string, len(signingAlgs))
	for i, a := range signingAlgs {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

// introspect asks the issuer about an opaque token (RFC 7662).
func (v *Validator) introspect(ctx context.Context, token string) (claims, error) {
	m, err := v.Discover(ctx)
	if err != nil {
		return claims{}, err
	}
	if m.IntrospectionEndpoint == "" {
		return claims{}, fmt.Errorf("%w: the issuer's metadata lists no introspection_endpoint", ErrUnavailable)
	}
	form := url.Values{"token": {token}, "token_type_hint": {"access_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.IntrospectionEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return claims{}, fmt.Errorf("%w: introspect: %w", ErrUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 §2.3.1: the client id and secret are form-encoded first.
	req.SetBasicAuth(url.QueryEscape(v.o.ClientID), url.QueryEscape(v.o.ClientSecret))
	var raw json.RawMessage
	if err := v.do(req, &raw); err != nil {
		return claims{}, fmt.Errorf("%w: introspect: %w", ErrUnavailable, err)
	}
	c, err := parseClaims(raw)
	if err != nil {
		return claims{}, err
	}
	if active, _ := c.raw["active"].(bool); !active {
		return claims{}, invalid("the issuer reports it inactive (revoked, expired or unknown)")
	}
	c.introspected = true
	if c.Issuer == "" {
		c.Issuer = v.o.Issuer // the issuer asked is the one that answered
	}
	return c, nil
}

// Check is doctor's probe: the issuer's metadata and (when it publishes
// them) keys can be fetched. It returns the metadata and the number of
// signing keys.
func (v *Validator) Check(ctx context.Context) (*Metadata, int, error) {
	m, err := v.discover(ctx)
	if err != nil {
		return nil, 0, err
	}
	if m.JWKSURI == "" {
		return m, 0, nil
	}
	var set jose.JSONWebKeySet
	if err := v.getJSON(ctx, m.JWKSURI, &set); err != nil {
		return m, 0, fmt.Errorf("%w: keys: %w", ErrUnavailable, err)
	}
	return m, len(match(set, "", "")), nil
}
