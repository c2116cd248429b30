package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
)

func runCLIEnv(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = Run(t.Context(), Env{Args: args, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string { return env[k] }})
	return out.String(), errOut.String(), err
}

func TestGatewayPing(t *testing.T) {
	gw := fakegateway.New(t, fakegateway.Options{Token: "tok"})
	env := map[string]string{"OPENCLAW_URL": gw.HTTPURL(), "OPENCLAW_GATEWAY_TOKEN": "tok",
		"CLAWCONNECT_GATEWAY_HEADERS": `{"X-Test":"1"}`}
	out, _, err := runCLIEnv(t, env, "gateway", "ping")
	if err != nil {
		t.Fatalf("ping: %v", err)
	}
	for _, want := range []string{"protocol  4", "role      operator", "operator.admin", "agent.wait"} {
		if !strings.Contains(out, want) {
			t.Errorf("ping output lacks %q:\n%s", want, out)
		}
	}
	if got := gw.UpgradeHeaders()[0].Get("X-Test"); got != "1" {
		t.Errorf("extra header X-Test = %q", got)
	}
	out, _, err = runCLIEnv(t, env, "gateway", "ping", "--json")
	var res pingResult
	if err != nil || json.Unmarshal([]byte(out), &res) != nil || res.Protocol != 4 {
		t.Errorf("ping --json = %q, %v", out, err)
	}
}

func TestGatewayCall(t *testing.T) {
	gw := fakegateway.New(t, fakegateway.Options{Token: "tok"})
	gw.Handle("plugin.echo", func(_ context.Context, p json.RawMessage) (any, error) {
		return map[string]any{"echo": p}, nil
	})
	tests := []struct {
		name     string
		env      map[string]string
		args     []string
		wantOut  string
		wantCode int
	}{
		{"flags, raw json", nil, []string{"gateway", "call", "plugin.echo", "--url", gw.URL(), "--token", "tok", "--params", `{"a":1}`, "--json"},
			`{"echo":{"a":1}}` + "\n", ExitOK},
		{"env, pretty", map[string]string{"OPENCLAW_URL": gw.URL(), "OPENCLAW_GATEWAY_TOKEN": "tok"},
			[]string{"gateway", "call", "plugin.echo", "--params", `{"a":1}`}, "{\n  \"echo\": {\n    \"a\": 1\n  }\n}\n", ExitOK},
		{"flag beats env", map[string]string{"OPENCLAW_URL": gw.URL(), "OPENCLAW_GATEWAY_TOKEN": "wrong"},
			[]string{"gateway", "call", "health", "--token", "tok", "--json"}, "", ExitOK},
		{"bad params", nil, []string{"gateway", "call", "health", "--url", gw.URL(), "--params", `{`}, "", ExitUsage},
		{"missing method", nil, []string{"gateway", "call", "--url", gw.URL()}, "", ExitUsage},
		{"wrong token", nil, []string{"gateway", "call", "health", "--url", gw.URL(), "--token", "bad"}, "", ExitFailure},
		{"unknown method", nil, []string{"gateway", "call", "nope", "--url", gw.URL(), "--token", "tok"}, "", ExitFailure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runCLIEnv(t, tt.env, tt.args...)
			if got := ExitCode(err); got != tt.wantCode {
				t.Fatalf("exit code %d (err %v), want %d", got, err, tt.wantCode)
			}
			if tt.wantOut != "" && out != tt.wantOut {
				t.Errorf("stdout = %q, want %q", out, tt.wantOut)
			}
		})
	}
}
