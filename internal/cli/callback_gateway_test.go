package cli

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestCallbackCredentialsStayWithTheirGateway checks which credentials a
// callback's recorded gateway URL is dialled with. A Turn or watch records
// whatever --gateway-url its caller gave (a coding agent in the pane can
// run `clawconnect terminal watch --gateway-url ...`), and the host that
// delivers it holds the operator's token: that token, password and
// headers go only to the gateway they were configured for.
func TestCallbackCredentialsStayWithTheirGateway(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	envm := map[string]string{
		"CLAWCONNECT_HOME":            home,
		"OPENCLAW_URL":                "ws://127.0.0.1:18789",
		"OPENCLAW_PASSWORD":           "env-pass",
		"OPENCLAW_GATEWAY_TOKEN":      "env-token",
		"CLAWCONNECT_GATEWAY_HEADERS": `{"cf-access-client-secret":"env-header"}`,
	}
	env := Env{Getenv: func(k string) string { return envm[k] }, Stdout: io.Discard, Stderr: io.Discard}
	tests := []struct {
		name, url       string
		token, password string
		headers         bool
	}{
		{"no recorded URL: the configured gateway", "", "env-token", "env-pass", true},
		{"the configured gateway", "ws://127.0.0.1:18789", "env-token", "env-pass", true},
		{"the configured gateway, written differently", "ws://127.0.0.1:18789/", "env-token", "env-pass", true},
		{"another gateway: no credentials", "ws://127.0.0.1:9999", "", "", false},
		{"another host: no credentials", "ws://203.0.113.7:18789", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := callbackGatewayFor(env, tt.url)
			if o.Token != tt.token || o.Password != tt.password || (len(o.Headers) > 0) != tt.headers {
				t.Fatalf("dial %q with token %q password %q headers %v; want %q %q headers %v",
					tt.url, o.Token, o.Password, o.Headers, tt.token, tt.password, tt.headers)
			}
			if tt.url != "" && !sameGatewayURL(o.URL, tt.url) {
				t.Fatalf("dial URL %q, want %q", o.URL, tt.url)
			}
		})
	}

	// A gateway named in agents.json gets that agent's password.
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(`{"default":"a","agents":[
		{"id":"a","url":"ws://127.0.0.1:18789","password":"a-pass"},
		{"id":"b","url":"ws://127.0.0.1:28789","password":"b-pass"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if o := callbackGatewayFor(env, "ws://127.0.0.1:28789"); o.Password != "b-pass" {
		t.Fatalf("registered gateway dialled with password %q, want b-pass", o.Password)
	}
	if o := callbackGatewayFor(env, "ws://127.0.0.1:9999"); o.Token != "" || o.Password != "" || len(o.Headers) > 0 {
		t.Fatalf("unregistered gateway dialled with credentials %+v", o)
	}
}
