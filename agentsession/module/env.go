package module

import (
	"os"
	"strings"
)

// moduleEnv returns the environment of a module process: env (or, when nil,
// this process's environment) without ClawConnect's own secrets, which a
// runtime module must never inherit.
func moduleEnv(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !ownSecret(name) {
			out = append(out, kv)
		}
	}
	return out
}

// ownSecret reports whether an environment variable name carries one of
// ClawConnect's own credentials: the gateway password and tokens, the HTTP
// tokens and shared password, and any CLAWCONNECT_* variable named like a
// secret. It is the rule the executor applies to its runtimes.
func ownSecret(name string) bool {
	switch name {
	case "OPENCLAW_PASSWORD", "OPENCLAW_GATEWAY_TOKEN", "OPENCLAW_GATEWAY_PASSWORD", "OPENCLAW_TOKEN",
		"MCP_USER_TOKENS", "MCP_USER_TOKENS_FILE", "PUBLIC_MCP_PASS":
		return true
	}
	if rest, ok := strings.CutPrefix(name, "CLAWCONNECT_"); ok {
		for _, s := range []string{"TOKEN", "PASSWORD", "PASS", "SECRET", "KEY", "HEADERS", "AUTH", "CREDENTIAL", "DATABASE_URL"} {
			if strings.Contains(rest, s) {
				return true
			}
		}
	}
	return false
}
