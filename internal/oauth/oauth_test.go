package oauth_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/oauth"
)

const resource = "https://mcp.example.test/mcp"

// clock is a settable clock for the validator.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newValidator(t testing.TB, f *fakeIssuer, edit func(*oauth.Options)) *oauth.Validator {
	t.Helper()
	o := oauth.Options{Issuer: f.Issuer(), Audiences: []string{resource}, RequiredScopes: []string{"mcp"}}
	if edit != nil {
		edit(&o)
	}
	v, err := oauth.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestValidate: the claims each token is checked for, and the refusal
// each wrong one gets.
func TestValidate(t *testing.T) {
	t.Parallel()
	f := newFakeIssuer(t)
	v := newValidator(t, f, func(o *oauth.Options) { o.AllowedGroups = []string{"ops"} })
	good := func() map[string]any {
		c := f.claims("alice", resource, "openid", "mcp")
		c["groups"] = []string{"dev", "ops"}
		return c
	}
	with := func(k string, val any) map[string]any {
		c := good()
		if val == nil {
			delete(c, k)
		} else {
			c[k] = val
		}
		return c
	}
	now := time.Now()
	tests := []struct {
		name  string
		token string
		kind  error  // nil: accepted
		why   string // part of the reason
	}{
		{"valid", f.sign(t, good()), nil, ""},
		{"audience in a list", f.sign(t, with("aud", []string{"other", resource})), nil, ""},
		{"scp list", f.sign(t, with("scope", nil)), oauth.ErrInsufficientScope, "missing scope mcp"},
		{"wrong audience", f.sign(t, with("aud", "https://elsewhere.test/mcp")), oauth.ErrInvalidToken, "is not this resource"},
		{"no audience", f.sign(t, with("aud", nil)), oauth.ErrInvalidToken, "is not this resource"},
		{"expired", f.sign(t, with("exp", now.Add(-2*time.Minute).Unix())), oauth.ErrInvalidToken, "expired at"},
		{"no expiry", f.sign(t, with("exp", nil)), oauth.ErrInvalidToken, "no expiry"},
		{"not yet valid", f.sign(t, with("nbf", now.Add(5*time.Minute).Unix())), oauth.ErrInvalidToken, "not valid before"},
		{"wrong issuer", f.sign(t, with("iss", "https://evil.test")), oauth.ErrInvalidToken, "not by the configured issuer"},
		{"iss not a string", f.sign(t, with("iss", 7)), oauth.ErrInvalidToken, "iss claim is not a string"},
		{"missing scope", f.sign(t, with("scope", "openid")), oauth.ErrInsufficientScope, "missing scope mcp"},
		{"no user", f.sign(t, with("sub", nil)), oauth.ErrInvalidToken, `no "sub" claim`},
		{"not in an allowed group", f.sign(t, with("groups", []string{"dev"})), oauth.ErrInsufficientScope, "no allowed group"},
		{"unknown kid", forgeUnknownKid(t, good()), oauth.ErrInvalidToken, `key "not-published"`},
		{"alg none", forgeNone(t, good()), oauth.ErrInvalidToken, `algorithm "none", which is never accepted`},
		{"HS256 with the public key", forgeHS256(t, good()), oauth.ErrInvalidToken, `algorithm "HS256", which is never accepted`},
		{"opaque without introspection", "abc123opaque", oauth.ErrInvalidToken, "introspection"},
		{"tampered payload", tamper(f.sign(t, good())), oauth.ErrInvalidToken, "signature does not verify"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := v.Validate(t.Context(), tt.token)
			if tt.kind == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if got.User != "alice" {
					t.Errorf("user = %q, want alice", got.User)
				}
				return
			}
			if !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("Validate = %v, want %v containing %q", err, tt.kind, tt.why)
			}
			if strings.Contains(err.Error(), tt.token) {
				t.Errorf("the error quotes the token")
			}
		})
	}
}

// tamper makes a JWT's subject mallory, keeping the signature.
func tamper(tok string) string {
	p := strings.Split(tok, ".")
	b, _ := base64.RawURLEncoding.DecodeString(p[1])
	b = []byte(strings.Replace(string(b), `"sub":"alice"`, `"sub":"mallory"`, 1))
	p[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(p, ".")
}

// TestScpAndUserClaim: scopes from an "scp" list and the user from a
// configured claim.
func TestScpAndUserClaim(t *testing.T) {
	t.Parallel()
	f := newFakeIssuer(t)
	v := newValidator(t, f, func(o *oauth.Options) { o.UserClaim = "email" })
	c := f.claims("id-1", resource)
	delete(c, "scope")
	c["scp"] = []string{"mcp", "other"}
	c["email"] = "alice@example.test"
	got, err := v.Validate(t.Context(), f.sign(t, c))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(oauth.Token{User: "alice@example.test", Scopes: []string{"mcp", "other"}, Expiry: time.Unix(c["exp"].(int64), 0)}, got); diff != "" {
		t.Errorf("token (-want +got):\n%s", diff)
	}
}

// TestClockSkew: exp and nbf are honoured within the skew and no further.
func TestClockSkew(t *testing.T) {
	t.Parallel()
	f := newFakeIssuer(t)
	clk := &clock{t: time.Now()}
	v := newValidator(t, f, func(o *oauth.Options) { o.ClockSkew = 30 * time.Second; o.Now = clk.Now })
	c := f.claims("alice", resource, "mcp")
	exp := clk.Now().Add(time.Minute)
	c["exp"] = exp.Unix()
	c["nbf"] = clk.Now().Add(20 * time.Second).Unix()
	tok := f.sign(t, c)
	if _, err := v.Validate(t.Context(), tok); err != nil {
		t.Fatalf("nbf 20 s ahead, within a 30 s skew: %v", err)
	}
	clk.Add(time.Minute + 25*time.Second) // 25 s past exp
	if _, err := v.Validate(t.Context(), tok); err != nil {
		t.Fatalf("25 s past exp, within a 30 s skew: %v", err)
	}
	clk.Add(10 * time.Second) // 35 s past exp
	if _, err := v.Validate(t.Context(), tok); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Fatalf("35 s past exp = %v, want invalid", err)
	}
	// A skew beyond the bound is cut to it.
	w := newValidator(t, f, func(o *oauth.Options) { o.ClockSkew = time.Hour; o.Now = clk.Now })
	clk.Add(oauth.MaxClockSkew)
	if _, err := w.Validate(t.Context(), tok); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Fatalf("an hour's skew was not bounded: %v", err)
	}
}

// TestKeyRotation: a token signed by a key published after the first fetch
// is accepted (the unknown kid makes the validator fetch again), at once
// when the key came just after that fetch, and tokens naming unknown keys
// cost at most one fetch per KeyRefresh.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	f := newFakeIssuer(t)
	clk := &clock{t: time.Now()}
	v := newValidator(t, f, func(o *oauth.Options) { o.Now = clk.Now; o.KeyRefresh = 10 * time.Second })
	if _, err := v.Validate(t.Context(), f.sign(t, f.claims("alice", resource, "mcp"))); err != nil {
		t.Fatal(err)
	}
	if n := f.jwksFetches.Load(); n != 1 {
		t.Fatalf("%d key fetches for the first token, want 1", n)
	}
	// The issuer rotates its key right after the first fetch: the new
	// key's first token is accepted without waiting out KeyRefresh.
	f.rotate(t, "k2", false)
	if _, err := v.Validate(t.Context(), f.sign(t, f.claims("alice", resource, "mcp"))); err != nil {
		t.Fatalf("token of a key rotated in just after the first fetch: %v", err)
	}
	if n := f.jwksFetches.Load(); n != 2 {
		t.Fatalf("%d key fetches after the first rotation, want 2", n)
	}
	// A flood of unknown kids right after that fetch: no more fetches.
	for range 20 {
		if _, err := v.Validate(t.Context(), forgeUnknownKid(t, f.claims("alice", resource, "mcp"))); !errors.Is(err, oauth.ErrInvalidToken) {
			t.Fatalf("unknown kid = %v", err)
		}
	}
	if n := f.jwksFetches.Load(); n != 2 {
		t.Fatalf("%d key fetches after a flood of unknown kids within the refresh interval, want 2", n)
	}
	f.rotate(t, "k3", false)
	tok := f.sign(t, f.claims("alice", resource, "mcp"))
	if _, err := v.Validate(t.Context(), tok); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Fatalf("a new key within KeyRefresh of a fetch for an unknown kid: %v, want refused until the interval passes", err)
	}
	clk.Add(11 * time.Second)
	if _, err := v.Validate(t.Context(), tok); err != nil {
		t.Fatalf("token of the rotated key: %v", err)
	}
	if n := f.jwksFetches.Load(); n != 3 {
		t.Fatalf("%d key fetches after the second rotation, want 3", n)
	}
	// The known key is not fetched again until KeyMaxAge.
	for range 5 {
		if _, err := v.Validate(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.jwksFetches.Load(); n != 3 {
		t.Fatalf("%d key fetches for a known key, want 3", n)
	}
	clk.Add(oauth.DefaultKeyMaxAge + time.Second)
	if _, err := v.Validate(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	if n := f.jwksFetches.Load(); n != 4 {
		t.Fatalf("%d key fetches after KeyMaxAge, want 4", n)
	}
	if n := f.metaFetches.Load(); n != 1 {
		t.Errorf("%d metadata fetches, want 1 (kept once read)", n)
	}
}

// TestIntrospection: an opaque token is sent to the introspection endpoint
// with the client's credentials; active, issuer, audience and scopes are
// checked as for a JWT.
func TestIntrospection(t *testing.T) {
	t.Parallel()
	f := newFakeIssuer(t)
	f.clientB = "rs:s3cret"
	v := newValidator(t, f, func(o *oauth.Options) { o.Introspect, o.ClientID, o.ClientSecret = true, "rs", "s3cret" })
	exp := time.Now().Add(time.Hour).Unix()
	f.registerOpaque("op-alice", map[string]any{"active": true, "sub": "alice", "scope": "mcp openid", "exp": exp})
	f.registerOpaque("op-aud", map[string]any{"active": true, "sub": "bob", "scope": "mcp", "exp": exp, "aud": "elsewhere"})
	f.registerOpaque("op-scope", map[string]any{"active": true, "sub": "bob", "scope": "openid", "exp": exp})
	f.registerOpaque("op-revoked", map[string]any{"active": false, "sub": "bob", "scope": "mcp", "exp": exp})
	f.registerOpaque("op-iss", map[string]any{"active": true, "sub": "bob", "scope": "mcp", "exp": exp, "iss": "https://evil.test"})
	got, err := v.Validate(t.Context(), "op-alice")
	if err != nil || got.User != "alice" {
		t.Fatalf("active token = %+v, %v", got, err)
	}
	for tok, want := range map[string]error{"op-unknown": oauth.ErrInvalidToken, "op-revoked": oauth.ErrInvalidToken, "op-aud": oauth.ErrInvalidToken,
		"op-scope": oauth.ErrInsufficientScope, "op-iss": oauth.ErrInvalidToken} {
		if _, err := v.Validate(t.Context(), tok); !errors.Is(err, want) {
			t.Errorf("%s = %v, want %v", tok, err, want)
		}
	}
	// Wrong client credentials: the issuer refuses to answer; that is not
	// the token's fault.
	w := newValidator(t, f, func(o *oauth.Options) { o.Introspect, o.ClientID, o.ClientSecret = true, "rs", "wrong" })
	if _, err := w.Validate(t.Context(), "op-alice"); !errors.Is(err, oauth.ErrUnavailable) {
		t.Errorf("introspection refused = %v, want unavailable", err)
	}
}

// TestIntrospectionCache: an accepted answer is reused for
// IntrospectionTTL (never past the token's expiry), a refusal never is.
func TestIntrospectionCache(t *testing.T) {
	t.Parallel()
	f := newFakeIssuer(t)
	f.clientB = "rs:s3cret"
	clk := &clock{t: time.Now()}
	v := newValidator(t, f, func(o *oauth.Options) {
		o.Introspect, o.ClientID, o.ClientSecret, o.Now = true, "rs", "s3cret", clk.Now
	})
	f.registerOpaque("op-alice", map[string]any{"active": true, "sub": "alice", "scope": "mcp", "exp": clk.Now().Add(time.Hour).Unix()})
	f.registerOpaque("op-short", map[string]any{"active": true, "sub": "bob", "scope": "mcp", "exp": clk.Now().Add(10 * time.Second).Unix()})
	validate := func(tok string) {
		t.Helper()
		if _, err := v.Validate(t.Context(), tok); err != nil {
			t.Fatalf("%s: %v", tok, err)
		}
	}
	for range 3 {
		validate("op-alice")
	}
	if n := f.introspections.Load(); n != 1 {
		t.Fatalf("%d introspections for three uses, want 1", n)
	}
	for range 2 {
		if _, err := v.Validate(t.Context(), "op-unknown"); !errors.Is(err, oauth.ErrInvalidToken) {
			t.Fatal(err)
		}
	}
	if n := f.introspections.Load(); n != 3 {
		t.Fatalf("%d introspections, want 3: a refusal is asked again", n)
	}
	validate("op-short")
	clk.Add(oauth.IntrospectionTTL - time.Second)
	validate("op-alice")
	if n := f.introspections.Load(); n != 4 {
		t.Fatalf("%d introspections within the TTL, want 4", n)
	}
	validate("op-short") // past its exp (within the skew): asked again
	if n := f.introspections.Load(); n != 5 {
		t.Fatalf("a token past its expiry was answered from the cache (%d introspections, want 5)", n)
	}
	clk.Add(2 * time.Second)
	validate("op-alice")
	if n := f.introspections.Load(); n != 6 {
		t.Fatalf("%d introspections after the TTL, want 6", n)
	}
}

// TestUnreachableIssuer: no answer from the issuer is ErrUnavailable, and
// discovery is not retried at once.
func TestUnreachableIssuer(t *testing.T) {
	t.Parallel()
	f := newFakeIssuer(t)
	clk := &clock{t: time.Now()}
	v := newValidator(t, f, func(o *oauth.Options) { o.Now = clk.Now })
	tok := f.sign(t, f.claims("alice", resource, "mcp"))
	f.srv.Close()
	for range 2 {
		if _, err := v.Validate(t.Context(), tok); !errors.Is(err, oauth.ErrUnavailable) {
			t.Fatalf("Validate = %v, want unavailable", err)
		}
	}
	if _, _, err := v.Check(context.Background()); !errors.Is(err, oauth.ErrUnavailable) {
		t.Errorf("Check = %v, want unavailable", err)
	}
}

// TestNewRefusesBadConfig: the options New refuses, each with what to do.
func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	for _, o := range []oauth.Options{
		{Issuer: "", Audiences: []string{resource}},
		{Issuer: "http://login.example.test", Audiences: []string{resource}},
		{Issuer: "https://login.example.test?x=1", Audiences: []string{resource}},
		{Issuer: "https://login.example.test"},
		{Issuer: "https://login.example.test", Audiences: []string{resource}, Introspect: true},
	} {
		if _, err := oauth.New(o); !errors.Is(err, oauth.ErrConfig) {
			t.Errorf("New(%+v) = %v, want ErrConfig", o, err)
		}
	}
}
