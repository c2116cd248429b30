package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/internal/store/sqlite"
	"github.com/clawconnect/clawconnect/internal/terminal/agentproc"
)

// TestDoctorListsTerminalHosts: doctor lists each published terminal host
// with its liveness, last heartbeat and panes; an away host is reported,
// not failed.
func TestDoctorListsTerminalHosts(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: filepath.Join(t.TempDir(), sqlite.FileName)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for _, h := range []store.TerminalHost{
		{Host: "laptop", Owner: "laptop/1/a", PublishedAt: now.Add(-5 * time.Second).UnixMilli(),
			Panes: json.RawMessage(`{"lease_ms":30000,"terminals":[{"id":"terminal:v3:laptop:tmux:codex:w:0.0:7","activity_state":"idle"}]}`)},
		{Host: "studio", Owner: "studio/1/b", PublishedAt: now.Add(-time.Minute).UnixMilli(), Panes: json.RawMessage(`{"lease_ms":30000}`)},
	} {
		if err := st.PublishTerminalHost(t.Context(), h); err != nil {
			t.Fatal(err)
		}
	}
	vs := listTerminalHosts(t.Context(), st, now)
	if len(vs) != 2 {
		t.Fatalf("verdicts %+v, want one per host", vs)
	}
	for i, want := range []string{
		"host laptop: live, last heartbeat 2026-12-02T11:59:55Z, 1 pane(s): terminal:v3:laptop:tmux:codex:w:0.0:7 idle",
		"host studio: away (",
	} {
		if !vs[i].ok || !strings.HasPrefix(vs[i].detail, want) {
			t.Errorf("verdict %d = %+v, want ok and %q", i, vs[i], want)
		}
	}
}

// TestCallbackRouteFollowsTheConfiguredGateways: with hosts on several
// machines a host delivers only callbacks of the gateways it is
// configured with; on one machine's store it delivers every one.
func TestCallbackRouteFollowsTheConfiguredGateways(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	envOf := func(vars map[string]string) Env {
		return Env{Getenv: func(k string) string {
			if k == "CLAWCONNECT_HOME" {
				return home
			}
			return vars[k]
		}}
	}
	gw := "ws://gateway.example:18789"
	for _, tc := range []struct {
		name     string
		vars     map[string]string
		hostMode bool
		url      string
		want     bool
	}{
		{"one machine delivers all", nil, false, gw, true},
		{"configured gateway", map[string]string{"OPENCLAW_URL": gw, "OPENCLAW_PASSWORD": "p"}, true, gw, true},
		{"configured gateway, spelled with a slash", map[string]string{"OPENCLAW_URL": gw}, true, gw + "/", true},
		{"another gateway", map[string]string{"OPENCLAW_URL": "ws://other.example:18789", "OPENCLAW_PASSWORD": "p"}, true, gw, false},
		{"none configured: not a remote gateway", nil, true, gw, false},
		{"none configured: the local default", nil, true, DefaultGatewayURL, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			route := callbackRoute(envOf(tc.vars), tc.hostMode)
			got := route == nil || route(tc.url)
			if got != tc.want {
				t.Fatalf("delivers %s = %v, want %v", tc.url, got, tc.want)
			}
		})
	}
}

// FuzzTerminalHostSetting: CLAWCONNECT_TERMINAL_HOST accepts exactly the
// host names a terminal id can carry.
func FuzzTerminalHostSetting(f *testing.F) {
	for _, s := range []string{"laptop", "studio-2.lan", "a_b", "-x", "my laptop", "x:y", "é", strings.Repeat("a", 254)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		if strings.TrimSpace(h) == "" {
			return // unset: the machine's own host name
		}
		_, err := settings.Load(func(k string) string {
			if k == "CLAWCONNECT_TERMINAL_HOST" {
				return h
			}
			return ""
		})
		// Settings are read without their surrounding spaces.
		if want := agentproc.CheckHostName(strings.TrimSpace(h)); (err == nil) != (want == nil) {
			t.Fatalf("host %q: setting says %v, terminal ids say %v", h, err, want)
		}
	})
}

// TestTerminalHostSetting: the setting names the machine on a shared store.
func TestTerminalHostSetting(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	env := Env{Getenv: func(k string) string {
		return map[string]string{"CLAWCONNECT_HOME": home, "CLAWCONNECT_TERMINAL_HOST": "studio-2",
			"CLAWCONNECT_DATABASE_URL": "postgres://u@127.0.0.1:1/x"}[k]
	}}
	host, key, err := terminalHost(env)
	if err != nil || host != "studio-2" || len(key) != 32 {
		t.Fatalf("terminalHost = %q, %d key bytes, %v", host, len(key), err)
	}
}
