package oauth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/clawconnect/clawconnect/internal/oauth/oauthtest"
)

// fakeIssuer is an in-process authorization server for unit tests: it
// publishes metadata and a key set, signs tokens with its current key, and
// answers introspection for the tokens it registered as opaque. Acceptance
// tests use a real OpenID provider instead (see the e2e test).
type fakeIssuer struct {
	srv *httptest.Server

	mu      sync.Mutex
	keys    []jose.JSONWebKey // private; the first signs
	opaque  map[string]map[string]any
	clientB string // expected Basic credentials of introspection

	jwksFetches    atomic.Int64
	introspections atomic.Int64
	metaFetches    atomic.Int64
}

var (
	rsaOnce sync.Once
	rsaKey  *rsa.PrivateKey
)

// testRSA is one RSA key per test binary: generating one is slow.
func testRSA(t testing.TB) *rsa.PrivateKey {
	rsaOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		rsaKey = k
	})
	return rsaKey
}

func newFakeIssuer(t testing.TB) *fakeIssuer {
	t.Helper()
	f := &fakeIssuer{opaque: map[string]map[string]any{}}
	f.keys = []jose.JSONWebKey{{Key: testRSA(t), KeyID: "k1", Algorithm: string(jose.RS256), Use: "sig"}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		f.metaFetches.Add(1)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": f.Issuer(), "jwks_uri": f.srv.URL + "/keys", "introspection_endpoint": f.srv.URL + "/introspect",
			"authorization_endpoint": f.srv.URL + "/authorize", "token_endpoint": f.srv.URL + "/token",
			"code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, r *http.Request) {
		f.jwksFetches.Add(1)
		f.mu.Lock()
		var set jose.JSONWebKeySet
		for _, k := range f.keys {
			set.Keys = append(set.Keys, k.Public())
		}
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(set)
	})
	mux.HandleFunc("POST /introspect", func(w http.ResponseWriter, r *http.Request) {
		f.introspections.Add(1)
		id, secret, ok := r.BasicAuth()
		f.mu.Lock()
		want := f.clientB
		claims, known := f.opaque[r.PostFormValue("token")]
		f.mu.Unlock()
		if !ok || id+":"+secret != want {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if !known {
			_ = json.NewEncoder(w).Encode(map[string]any{"active": false})
			return
		}
		_ = json.NewEncoder(w).Encode(claims)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// Issuer is the issuer identifier.
func (f *fakeIssuer) Issuer() string { return f.srv.URL }

// rotate makes a new EC key, with a new kid, the signing key; the old one
// stays published when keepOld.
func (f *fakeIssuer) rotate(t testing.TB, kid string, keepOld bool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	nk := jose.JSONWebKey{Key: k, KeyID: kid, Algorithm: string(jose.ES256), Use: "sig"}
	if keepOld {
		f.keys = append([]jose.JSONWebKey{nk}, f.keys...)
	} else {
		f.keys = []jose.JSONWebKey{nk}
	}
}

// claims is a valid claim set for user with the given scopes, issued now.
func (f *fakeIssuer) claims(user, aud string, scopes ...string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss": f.Issuer(), "sub": user, "aud": aud, "scope": strings.Join(scopes, " "),
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": user + "@" + aud,
	}
}

// sign signs claims with the current key.
func (f *fakeIssuer) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	f.mu.Lock()
	k := f.keys[0]
	f.mu.Unlock()
	return oauthtest.Sign(t, jose.SignatureAlgorithm(k.Algorithm), k, claims)
}

// forgeNone is claims under alg "none", no signature.
func forgeNone(_ testing.TB, claims map[string]any) string { return oauthtest.None(claims, "k1") }

// forgeHS256 signs claims with HS256, keyed with the issuer's public RSA
// key (PEM): the forgery a verifier that trusts the header's alg accepts.
func forgeHS256(t testing.TB, claims map[string]any) string {
	return oauthtest.HS256WithPublicKey(t, &testRSA(t).PublicKey, "k1", claims)
}

// forgeUnknownKid signs claims with a key the issuer never published.
func forgeUnknownKid(t testing.TB, claims map[string]any) string {
	return oauthtest.UnknownKey(t, "not-published", claims)
}

// registerOpaque makes tok an opaque token the introspection endpoint
// answers with reply.
func (f *fakeIssuer) registerOpaque(tok string, reply map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opaque[tok] = reply
}
