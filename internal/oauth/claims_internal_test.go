package oauth

import (
	"encoding/json"
	"errors"
	"testing"
)

// FuzzParseClaims: any payload (a signed token's, or an introspection
// reply's) is read or refused as invalid_token, without a panic, and the
// registered claims read are the payload's own.
func FuzzParseClaims(f *testing.F) {
	f.Add([]byte(`{"iss":"https://i","aud":["a","b"],"exp":1.5e9,"nbf":1,"sub":"u","scope":"a b","groups":["g"]}`))
	f.Add([]byte(`{"aud":"a","exp":"soon"}`))
	f.Add([]byte(`{"exp":1e300}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"scp":[1,"x"],"sub":42}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := parseClaims(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("parseClaims = %v, want invalid_token", err)
			}
			return
		}
		var raw map[string]any
		if json.Unmarshal(data, &raw) != nil {
			t.Fatalf("accepted claims that are not JSON: %q", data)
		}
		if s, ok := raw["iss"].(string); ok && s != c.Issuer {
			t.Fatalf("iss %q read as %q", s, c.Issuer)
		}
		_ = c.scopes()
		_ = c.str("sub")
		_ = c.list("groups")
	})
}

// TestParseClaimsTrailingData: a claim set followed by more data is
// refused, as a strict JSON reader would.
func TestParseClaimsTrailingData(t *testing.T) {
	t.Parallel()
	if _, err := parseClaims([]byte(`{"sub":"a"} {"sub":"b"}`)); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("parseClaims = %v, want invalid_token", err)
	}
}
