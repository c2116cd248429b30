package oauth_test

import (
	"errors"
	"testing"

	"github.com/clawconnect/clawconnect/internal/oauth"
)

// FuzzValidate: no token makes the validator panic; any token is either
// accepted as the user it was signed for or refused as invalid_token or
// insufficient_scope, never taken for an unreachable issuer, and a refusal
// never quotes it.
func FuzzValidate(f *testing.F) {
	iss := newFakeIssuer(f)
	good := iss.claims("alice", resource, "mcp")
	f.Add(iss.sign(f, good))
	f.Add(forgeNone(f, good))
	f.Add(forgeHS256(f, good))
	f.Add(forgeUnknownKid(f, good))
	f.Add("eyJhbGciOiJSUzI1NiJ9.e30.")
	f.Add("a.b.c")
	f.Add("opaque")
	v := newValidator(f, iss, nil)
	f.Fuzz(func(t *testing.T, token string) {
		got, err := v.Validate(t.Context(), token)
		if err == nil {
			if got.User != "alice" {
				t.Fatalf("accepted a token for %q", got.User)
			}
			return
		}
		var e *oauth.Error
		if !errors.As(err, &e) || (e.Kind != oauth.ErrInvalidToken && e.Kind != oauth.ErrInsufficientScope) {
			t.Fatalf("Validate = %v, want a refusal", err)
		}
	})
}
