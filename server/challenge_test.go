package server_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/clawconnect/clawconnect/server"
)

// TestBearerChallenge: the challenge's parameters in RFC 6750's order,
// empty ones left out, and values that would break the header cut down.
func TestBearerChallenge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		meta, code, desc, scope, want string
	}{
		{"https://h/.well-known/oauth-protected-resource/mcp", "", "", "mcp", `Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", scope="mcp"`},
		{"https://h/m", "invalid_token", `bad "quote" \ and` + "\r\nX-Injected: 1", "a b",
			`Bearer resource_metadata="https://h/m", error="invalid_token", error_description="bad 'quote' / and??X-Injected: 1", scope="a b"`},
		{"", "insufficient_scope", "café", "", `Bearer error="insufficient_scope", error_description="caf?"`},
		{"", "", "", "", `Bearer`},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, server.BearerChallenge(tt.meta, tt.code, tt.desc, tt.scope)); diff != "" {
			t.Errorf("BearerChallenge (-want +got):\n%s", diff)
		}
	}
}

// FuzzBearerChallenge: whatever the values, the header is printable ASCII
// that parses (with the MCP SDK's client-side parser) as exactly one
// Bearer challenge carrying exactly the non-empty parameters given.
func FuzzBearerChallenge(f *testing.F) {
	f.Add("https://mcp.example.com/.well-known/oauth-protected-resource/mcp", "invalid_token", "expired at 2026-01-01T00:00:00Z", "mcp openid")
	f.Add("x", "insufficient_scope", `a "b", c=d \"`, "")
	f.Add("", "", ",", "=")
	f.Fuzz(func(t *testing.T, meta, code, desc, scope string) {
		h := server.BearerChallenge(meta, code, desc, scope)
		for i := 0; i < len(h); i++ {
			if h[i] < 0x20 || h[i] > 0x7e {
				t.Fatalf("byte %#x at %d of %q", h[i], i, h)
			}
		}
		cs, err := oauthex.ParseWWWAuthenticate([]string{h})
		if err != nil {
			t.Fatalf("parse %q: %v", h, err)
		}
		if len(cs) != 1 || cs[0].Scheme != "bearer" {
			t.Fatalf("%q parsed as %+v, want one bearer challenge", h, cs)
		}
		got := cs[0].Params
		if got == nil {
			got = map[string]string{}
		}
		// Each given value comes back whole when it needed no change.
		for name, v := range map[string]string{"resource_metadata": meta, "error": code, "error_description": desc, "scope": scope} {
			if clean(v) && v != "" && got[name] != v {
				t.Fatalf("%s = %q came back as %q in %q", name, v, got[name], h)
			}
			if _, ok := got[name]; ok && v == "" {
				t.Fatalf("%s was empty but appears in %q", name, h)
			}
		}
		if len(got) > 4 {
			t.Fatalf("%q smuggled parameters: %v", h, got)
		}
	})
}

// clean reports whether v passes into a challenge unchanged.
func clean(v string) bool {
	if len(v) > 512 || len(v) == 0 || v[0] == ' ' || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e || v[i] == '"' || v[i] == '\\' {
			return false
		}
	}
	return true
}
