package oneshot

// This file holds what the engine checks and passes on about a run's
// environment: the scrubbing of ClawConnect's own secrets from the
// environment a runtime process inherits, and the resolution of the
// runtime's binary against the PATH that process will see.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ScrubEnv returns environ without ClawConnect's own secrets (gateway
// passwords and tokens, MCP tokens and passwords, secret-bearing
// CLAWCONNECT_* variables such as CLAWCONNECT_DATABASE_URL), then extra laid over it, so a runtime's own
// configuration (PATH, HOME, CODEX_HOME, ANTHROPIC_*, OPENAI_*, provider
// keys) passes through and an explicitly granted variable is restored.
func ScrubEnv(environ, extra []string) []string {
	out := make([]string, 0, len(environ)+len(extra))
	seen := map[string]int{}
	add := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := seen[k]; ok {
			out[i] = kv
			return
		}
		seen[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !IsOwnSecret(k) {
			add(kv)
		}
	}
	for _, kv := range extra {
		add(kv)
	}
	return out
}

// IsOwnSecret reports whether the environment variable name carries one of
// ClawConnect's own secrets, which a runtime subprocess must not inherit.
func IsOwnSecret(name string) bool {
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

// LookPath resolves bin against the PATH in environ (bin containing a slash
// is checked as is). The error says what is missing and how to fix it.
func LookPath(bin string, environ []string) (string, error) {
	if strings.Contains(bin, "/") {
		if err := executable(bin); err != nil {
			return "", fmt.Errorf("%s is not an executable file: %w", bin, err)
		}
		return bin, nil
	}
	var path string
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, bin)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on PATH; install it or configure the binary path", bin)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("not executable")
	}
	return nil
}
