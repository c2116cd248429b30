package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/clawconnect/clawconnect/internal/settings"
)

// TestDoctorChecksIssuer: doctor reads the issuer's metadata and keys, and
// says what to fix when the issuer string differs from the metadata's,
// the issuer does not answer, or the resource is not set.
func TestDoctorChecksIssuer(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var srv *httptest.Server
	var claimed atomic.Value // the issuer the metadata names, "" for its own
	claimed.Store("")
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			iss := srv.URL
			if c := claimed.Load().(string); c != "" {
				iss = c
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss, "jwks_uri": srv.URL + "/keys",
				"authorization_endpoint": srv.URL + "/auth", "token_endpoint": srv.URL + "/token"})
		case "/keys":
			_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k", Use: "sig"}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	sv := func(issuer, resource string) settings.Values {
		v, err := settings.Load(func(k string) string {
			return map[string]string{"CLAWCONNECT_OAUTH_ISSUER": issuer, "CLAWCONNECT_OAUTH_RESOURCE": resource, "CLAWCONNECT_OAUTH_CLIENT_ID": "dash"}[k]
		})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	summary := func(vs []verdict) string {
		var b strings.Builder
		for _, v := range vs {
			b.WriteString(map[bool]string{true: "ok ", false: "FAIL "}[v.ok] + v.detail + " / " + v.fix + "\n")
		}
		return b.String()
	}
	good := checkOAuth(t.Context(), sv(srv.URL, "https://mcp.example.test/mcp"))
	if s := summary(good); strings.Contains(s, "FAIL") || !strings.Contains(s, "1 signing keys") || !strings.Contains(s, "https://mcp.example.test/mcp") {
		t.Errorf("a reachable issuer:\n%s", s)
	}
	claimed.Store("https://other.example.test")
	if s := summary(checkOAuth(t.Context(), sv(srv.URL, "https://mcp.example.test/mcp"))); !strings.Contains(s, "FAIL") || !strings.Contains(s, `names issuer "https://other.example.test"`) {
		t.Errorf("metadata of another issuer:\n%s", s)
	}
	if s := summary(checkOAuth(t.Context(), sv("http://127.0.0.1:1", "https://mcp.example.test/mcp"))); !strings.Contains(s, "FAIL") || !strings.Contains(s, "reaches it") {
		t.Errorf("an issuer that does not answer:\n%s", s)
	}
	if s := summary(checkOAuth(t.Context(), sv(srv.URL, ""))); !strings.Contains(s, "FAIL") || !strings.Contains(s, "CLAWCONNECT_OAUTH_RESOURCE is not") {
		t.Errorf("no resource:\n%s", s)
	}
	if vs := checkOAuth(t.Context(), sv("", "")); vs != nil {
		t.Errorf("OAuth off: %v", vs)
	}
	// doctor itself runs the check.
	claimed.Store("")
	vars := map[string]string{"CLAWCONNECT_HOME": t.TempDir(), "CLAWCONNECT_OAUTH_ISSUER": srv.URL, "CLAWCONNECT_OAUTH_RESOURCE": "https://mcp.example.test/mcp"}
	all := runDoctor(t.Context(), Env{Getenv: func(k string) string { return vars[k] }, Stderr: io.Discard}, time.Second)
	if !slices.ContainsFunc(all, func(v verdict) bool { return v.area == "oauth" && v.ok && strings.Contains(v.detail, "signing keys") }) {
		t.Errorf("doctor has no oauth verdict:\n%s", summary(all))
	}
}

// TestServeRefusesIncompleteOAuth: OAuth mode without the resource URL,
// or with introspection but no client, stops serve before it listens,
// with exit code 3 and what to set.
func TestServeRefusesIncompleteOAuth(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"CLAWCONNECT_OAUTH_ISSUER": "https://login.example.test"}, "CLAWCONNECT_OAUTH_RESOURCE is not"},
		{map[string]string{"CLAWCONNECT_OAUTH_ISSUER": "https://login.example.test", "CLAWCONNECT_OAUTH_RESOURCE": "https://mcp.example.test/mcp",
			"CLAWCONNECT_OAUTH_INTROSPECT": "1"}, "introspection needs a client id"},
	} {
		tt.vars["CLAWCONNECT_HOME"] = t.TempDir()
		var errb strings.Builder
		env := Env{Args: []string{"serve", "--addr", "127.0.0.1:0"}, Stdout: io.Discard, Stderr: &errb, Getenv: func(k string) string { return tt.vars[k] }}
		err := Run(t.Context(), env)
		if ExitCode(err) != ExitConfig || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("serve with %v = %v (exit %d), want exit %d naming %q", tt.vars, err, ExitCode(err), ExitConfig, tt.want)
		}
	}
}
