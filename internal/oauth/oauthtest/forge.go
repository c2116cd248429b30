// Package oauthtest makes the tokens the OAuth tests present: JWTs signed
// with a test key, and the forgeries a resource server must refuse (alg
// "none", HS256 keyed with the issuer's public key, a key the issuer never
// published). Tests only; never linked into clawconnect.
package oauthtest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Sign signs claims as a JWT of type at+jwt with key (a private key, or a
// jose.JSONWebKey naming its kid) under alg.
func Sign(t testing.TB, alg jose.SignatureAlgorithm, key any, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// None is claims under alg "none" with kid, and no signature.
func None(claims map[string]any, kid string) string {
	p, _ := json.Marshal(claims)
	h, _ := json.Marshal(map[string]string{"alg": "none", "typ": "at+jwt", "kid": kid})
	enc := base64.RawURLEncoding.EncodeToString
	return enc(h) + "." + enc(p) + "."
}

// HS256WithPublicKey signs claims with HS256 keyed with pub's PEM
// encoding, under kid: the forgery a verifier that trusts the header's alg
// would accept with the issuer's own (public) key.
func HS256WithPublicKey(t testing.TB, pub crypto.PublicKey, kid string, claims map[string]any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return Sign(t, jose.HS256, jose.JSONWebKey{Key: pemKey, KeyID: kid}, claims)
}

// UnknownKey signs claims (ES256) with a fresh key under kid, one no
// issuer published.
func UnknownKey(t testing.TB, kid string, claims map[string]any) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Sign(t, jose.ES256, jose.JSONWebKey{Key: k, KeyID: kid}, claims)
}
