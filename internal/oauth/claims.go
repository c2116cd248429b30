package oauth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// claims is a token's claim set, from a JWT payload or an introspection
// reply, with the registered claims read out.
type claims struct {
	raw                         map[string]any
	Issuer                      string
	Audience                    []string
	Expiry, NotBefore, IssuedAt time.Time
	introspected                bool
}

// parseClaims reads a JSON claim set. A registered claim of the wrong type
// is an error rather than absent, so that a token cannot slip past a check
// by a shape the check does not read.
func parseClaims(data []byte) (claims, error) {
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || raw == nil {
		return claims{}, invalid("its claims are not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return claims{}, invalid("its claims have data after the JSON object")
	}
	c := claims{raw: raw}
	var ok bool
	if v, has := raw["iss"]; has {
		if c.Issuer, ok = v.(string); !ok {
			return claims{}, invalid("its iss claim is not a string")
		}
	}
	switch a := raw["aud"].(type) {
	case nil:
	case string:
		c.Audience = []string{a}
	case []any:
		for _, e := range a {
			s, ok := e.(string)
			if !ok {
				return claims{}, invalid("its aud claim lists a non-string")
			}
			c.Audience = append(c.Audience, s)
		}
	default:
		return claims{}, invalid("its aud claim is neither a string nor a list")
	}
	for name, dst := range map[string]*time.Time{"exp": &c.Expiry, "nbf": &c.NotBefore, "iat": &c.IssuedAt} {
		t, err := numericDate(raw[name])
		if err != nil {
			return claims{}, invalid("its %s claim %v", name, err)
		}
		*dst = t
	}
	return c, nil
}

// numericDate reads an RFC 7519 NumericDate (seconds since the epoch,
// possibly fractional); nil gives the zero time.
func numericDate(v any) (time.Time, error) {
	if v == nil {
		return time.Time{}, nil
	}
	n, ok := v.(json.Number)
	if !ok {
		return time.Time{}, fmt.Errorf("is not a number")
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
		return time.Time{}, fmt.Errorf("is not a date in range")
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), nil
}

// str is a string claim, or a number written as one (some issuers give
// numeric user ids); "" when absent or of another type.
func (c claims) str(name string) string {
	switch v := c.raw[name].(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	}
	return ""
}

// list is a claim holding a list of strings or one space-separated
// string; elements of other types are skipped.
func (c claims) list(name string) []string {
	switch v := c.raw[name].(type) {
	case string:
		return strings.Fields(v)
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// scopes are the granted scopes: the standard "scope" (RFC 8693, RFC 9068:
// space-separated), else the "scp" list some issuers use.
func (c claims) scopes() []string {
	if s := c.list("scope"); s != nil {
		return s
	}
	return c.list("scp")
}
