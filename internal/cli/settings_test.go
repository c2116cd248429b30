package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/config"
	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/internal/task"
	"github.com/clawconnect/clawconnect/runtime/claudecode"
	"github.com/clawconnect/clawconnect/runtime/codex"
	"github.com/clawconnect/clawconnect/taskapi"
)

// wired is what internal/cli hands the rest of the program from the
// settings, each field built by the function production code uses.
type wired struct {
	Task      task.Options       // what bridge.Open gives each task manager (ApplySettings)
	Timeouts  []time.Duration    // serverOptions: the MCP tools' waits (CheckWait, CheckMaxWait)
	Server    []any              // serverOptions: origins, shared view, trusted proxies, build
	Dashboard bool               // dashboardOptions: the session cookie's Secure opt-out
	Terminal  config.Terminal    // newTerminalService, runTerminalHost
	TermTools bool               // terminalToolsOn: the MCP terminal tools of mcp and serve
	MCPHost   bool               // mcpHostsTerminals: an mcp with the terminal tools is a monitor host
	Auth      config.AuthOptions // serve's authenticator
	OAuth     oauthConfig        // oauthFrom: serve's OAuth mode and ?pass=
	Agents    []taskapi.Agent    // config.RegistryFromEnv: the agents without agents.json
	Gateway   []any              // gatewayFlags.options: the gateway and exec commands, callbacks
	Bridge    []any              // what bridge.Open reads besides the task options
	Store     []string           // storeInfo: where state lives
	LogLevels []slog.Level       // newLogger: the levels that are logged
	ExecBins  []string           // cliBinary: the CLIs exec starts
	ExecEnv   []string           // execEnviron: what a CLI runtime inherits
	Modules   bool               // loadRuntimes tried to start a module
}

// wiringOf builds the wiring of the environment vars.
func wiringOf(t *testing.T, vars map[string]string) wired {
	t.Helper()
	env := Env{Stderr: io.Discard, Getenv: func(k string) string { return vars[k] }}
	sv := settingsOf(env)
	var w wired
	w.Task.ApplySettings(sv)
	so := serverOptions(sv)
	w.Timeouts = []time.Duration{so.CheckWait, so.CheckMaxWait}
	w.Server = []any{so.AllowedOrigins, so.SharedTaskView, so.TrustedProxies, so.Build, so.AppForAll}
	w.Dashboard = dashboardOptions(sv).InsecureCookie
	w.Terminal = config.TerminalFrom(sv)
	w.TermTools = terminalToolsOn(env, false)
	w.MCPHost = mcpHostsTerminals(env, true)
	w.Auth = config.AuthFrom(sv)
	w.OAuth = oauthFrom(sv)
	if r, err := config.RegistryFromEnv(sv); err == nil {
		w.Agents = r.Agents
	}
	g := (&gatewayFlags{}).options(env)
	w.Gateway = []any{g.URL, g.Token, g.Password, g.Headers}
	w.Bridge = []any{sv.CallTimeout, sv.DatabaseURL}
	w.Store = []string{storeInfo(sv, nil)}
	logger := newLogger(env)
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if logger.Enabled(context.Background(), l) {
			w.LogLevels = append(w.LogLevels, l)
		}
	}
	w.ExecBins = []string{cliBinary(sv, claudecode.ID), cliBinary(sv, codex.ID)}
	w.ExecEnv = execEnviron(env)
	var logs bytes.Buffer
	_, _, stop := loadRuntimes(t.Context(), env, slog.New(slog.NewTextHandler(&logs, nil)))
	stop()
	w.Modules = logs.Len() > 0
	return w
}

// effectOf names, for every registered setting, the part of the wiring
// it must change. A setting added to the registry without an entry here,
// or with no effect on its part, fails TestEverySettingHasAnEffect.
var effectOf = map[string]string{
	"CLAWCONNECT_HOME":            "Store",
	"HOME":                        "Store",
	"TMUX":                        "Terminal",
	"OPENCLAW_URL":                "Agents",
	"OPENCLAW_PASSWORD":           "Agents",
	"OPENCLAW_AGENT_ID":           "Agents",
	"CLAWCONNECT_AGENT_ALIAS":     "Agents",
	"OPENCLAW_GATEWAY_TOKEN":      "Gateway",
	"CLAWCONNECT_GATEWAY_HEADERS": "Gateway",
	"CLAWCONNECT_DATABASE_URL":    "Store",
	"CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES": "Modules",
	"AGENT_SESSION_CALL_TIMEOUT_MS":             "Bridge",
	"MCP_USER_TOKENS":                           "Auth",
	"MCP_USER_TOKENS_FILE":                      "Auth",
	"PUBLIC_MCP_PASS":                           "Auth",
	"CLAWCONNECT_SHARED_TASK_VIEW":              "Server",
	"CLAWCONNECT_PASS_PARAM":                    "OAuth",
	"CLAWCONNECT_OAUTH_ISSUER":                  "OAuth",
	"CLAWCONNECT_OAUTH_RESOURCE":                "OAuth",
	"CLAWCONNECT_OAUTH_AUDIENCES":               "OAuth",
	"CLAWCONNECT_OAUTH_SCOPES":                  "OAuth",
	"CLAWCONNECT_OAUTH_USER_CLAIM":              "OAuth",
	"CLAWCONNECT_OAUTH_GROUPS_CLAIM":            "OAuth",
	"CLAWCONNECT_OAUTH_ALLOWED_GROUPS":          "OAuth",
	"CLAWCONNECT_OAUTH_INTROSPECT":              "OAuth",
	"CLAWCONNECT_OAUTH_CLIENT_ID":               "OAuth",
	"CLAWCONNECT_OAUTH_CLIENT_SECRET":           "OAuth",
	"CLAWCONNECT_OAUTH_CLOCK_SKEW_MS":           "OAuth",
	"CLAWCONNECT_OAUTH_STATIC_TOKENS":           "OAuth",
	"ENABLE_CHATGPT_UI_WIDGET":                  "Server",
	"CLAWCONNECT_ALLOWED_ORIGINS":               "Server",
	"CLAWCONNECT_TRUSTED_PROXIES":               "Server",
	"CLAWCONNECT_INSECURE_COOKIE":               "Dashboard",
	"CLAWCONNECT_TIMEOUT_MS":                    "Task",
	"CLAWCONNECT_RECOVERY_TIMEOUT_MS":           "Task",
	"CLAWCONNECT_RECOVERY_IDLE_MS":              "Task",
	"CLAWCONNECT_RECOVERY_INTERVAL_MS":          "Task",
	"CLAWCONNECT_CHECK_WAIT_MS":                 "Timeouts",
	"CLAWCONNECT_CHECK_MAX_WAIT_MS":             "Timeouts",
	"CLAWCONNECT_RECONCILE_QUIET_MS":            "Task",
	"CLAWCONNECT_RECONCILE_SAMPLE_INTERVAL_MS":  "Task",
	"CLAWCONNECT_LAZY_RECHECK_SPACING_MS":       "Task",
	"CLAWCONNECT_LAZY_RECHECK_INTERVAL_MS":      "Task",
	"CLAWCONNECT_COSMETIC_POLL_DEBOUNCE_MS":     "Task",
	"CLAWCONNECT_LOG_ENTRY_TEXT_MAX":            "Task",
	"CLAWCONNECT_LEASE_MS":                      "Task",
	"CLAWCONNECT_RETENTION_MS":                  "Task",
	"CLAWCONNECT_LOG_LEVEL":                     "LogLevels",
	"CLAWCONNECT_CLAUDE_BIN":                    "ExecBins",
	"CLAWCONNECT_CODEX_BIN":                     "ExecBins",
	"CLAWCONNECT_EXEC_PASSENV":                  "ExecEnv",
	"CLAWCONNECT_TMUX_SOCKETS":                  "Terminal",
	"CLAWCONNECT_TMUX_DEFAULT_SERVER":           "Terminal",
	"CLAWCONNECT_TERMINAL_INACTIVITY_MS":        "Terminal",
	"CLAWCONNECT_TERMINAL_HARD_MS":              "Terminal",
	"CLAWCONNECT_TERMINAL_RECHECK_MS":           "Terminal",
	"CLAWCONNECT_TERMINAL_TOOLS":                "TermTools",
	"CLAWCONNECT_TERMINAL_UNPROVEN":             "Terminal",
	"CLAWCONNECT_TERMINAL_AUTO_APPROVE_FILE":    "Terminal",
	"CLAWCONNECT_MCP_TERMINAL_HOST":             "MCPHost",
	"CLAWCONNECT_TERMINAL_HOST":                 "Terminal",
	"CLAWCONNECT_TERMINAL_HOST_LEASE_MS":        "Terminal",
	"CLAWCONNECT_BUILD_SHA":                     "Server",
}

// TestEverySettingHasAnEffect sets each registered setting, alone, to its
// example (a valid value other than the default) and checks that the part
// of the wiring named in effectOf changes. The base environment has a
// single-agent configuration and the variable CLAWCONNECT_EXEC_PASSENV's
// example names, so those settings have something to change.
func TestEverySettingHasAnEffect(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"OPENCLAW_URL": "ws://base.invalid:1", "OPENCLAW_PASSWORD": "base-pw", "HOME": "/home/base",
		"MY_PROVIDER_KEY": "k",
	}
	before := wiringOf(t, base)
	registered := map[string]bool{}
	for _, s := range settings.All() {
		registered[s.Name] = true
		t.Run(s.Name, func(t *testing.T) {
			part, ok := effectOf[s.Name]
			if !ok {
				t.Fatalf("%s is registered but effectOf does not say what it changes: wire it (or remove it from the registry) and add it here", s.Name)
			}
			vars := map[string]string{}
			for k, v := range base {
				vars[k] = v
			}
			if s.Example == base[s.Name] {
				t.Fatalf("%s's example %q is the base value", s.Name, s.Example)
			}
			vars[s.Name] = s.Example
			after := wiringOf(t, vars)
			field := reflect.ValueOf(before).FieldByName(part)
			if !field.IsValid() {
				t.Fatalf("effectOf[%s] = %q, which is no part of the wiring", s.Name, part)
			}
			if cmp.Equal(field.Interface(), reflect.ValueOf(after).FieldByName(part).Interface()) {
				t.Errorf("%s=%q left %s unchanged: the setting has no effect", s.Name, s.Example, part)
			}
		})
	}
	for name := range effectOf {
		if !registered[name] {
			t.Errorf("effectOf lists %s, which the registry does not declare", name)
		}
	}
}

// TestBadSettingStopsCommands: a bad value fails a command with ExitConfig
// and a message naming the variable before it does anything; help,
// version and doctor still run.
func TestBadSettingStopsCommands(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"CLAWCONNECT_LEASE_MS": "soon", "CLAWCONNECT_HOME": t.TempDir()}
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := Run(t.Context(), Env{Args: args, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] }})
		return out.String(), err
	}
	for _, args := range [][]string{{"status", "job-1"}, {"agents"}, {"terminal", "list"}, {"gateway", "call", "health"}} {
		_, err := run(args...)
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitConfig || !strings.Contains(err.Error(), `CLAWCONNECT_LEASE_MS="soon": not a number of milliseconds`) {
			t.Errorf("%v: err = %v, want ExitConfig naming CLAWCONNECT_LEASE_MS", args, err)
		}
	}
	for _, args := range [][]string{{"version"}, {"help", "run"}, {"--help"}, {}} {
		if _, err := run(args...); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	out, _ := run("doctor", "--timeout", "1s")
	if !strings.Contains(out, "CLAWCONNECT_LEASE_MS") || !strings.Contains(out, "not a number of milliseconds") {
		t.Errorf("doctor does not report the bad setting:\n%s", out)
	}
}

// TestRunReadsTheSettingsOnce: a Run reads each setting's variable once,
// however many times its command asks for the settings (mcp asks five
// times before it serves), and what it read still reaches the command.
func TestRunReadsTheSettingsOnce(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"CLAWCONNECT_HOME": t.TempDir(), "OPENCLAW_URL": "ws://127.0.0.1:9", "OPENCLAW_PASSWORD": "x",
		"OPENCLAW_AGENT_ID": "helper"}
	var mu sync.Mutex
	reads := map[string]int{}
	getenv := func(k string) string {
		mu.Lock()
		defer mu.Unlock()
		reads[k]++
		return vars[k]
	}
	var out, errOut bytes.Buffer
	// Input that ends at once: mcp answers nothing and returns.
	if err := Run(t.Context(), Env{Args: []string{"mcp"}, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: getenv}); err != nil {
		t.Fatalf("mcp: %v\n%s", err, errOut.String())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"CLAWCONNECT_HOME", "OPENCLAW_URL", "CLAWCONNECT_LOG_LEVEL", "CLAWCONNECT_TERMINAL_TOOLS", "CLAWCONNECT_CHECK_WAIT_MS"} {
		if reads[name] != 1 {
			t.Errorf("%s read %d times, want once", name, reads[name])
		}
	}
	if want := "agents=helper"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr lacks %q (the agent of OPENCLAW_AGENT_ID):\n%s", want, errOut.String())
	}
}

// TestDoctorListsSettingsRedacted: doctor shows the variables set, never a
// secret's value.
func TestDoctorListsSettingsRedacted(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"CLAWCONNECT_LEASE_MS": "5000", "PUBLIC_MCP_PASS": "hunter2", "CLAWCONNECT_HOME": t.TempDir()}
	vs := settingsVerdicts(Env{Getenv: func(k string) string { return vars[k] }}, nil)
	got := vs[0].detail
	if !vs[0].ok || !strings.Contains(got, "CLAWCONNECT_LEASE_MS=5000") || !strings.Contains(got, "PUBLIC_MCP_PASS=(redacted)") || strings.Contains(got, "hunter2") {
		t.Errorf("settings verdict = %+v", vs[0])
	}
	if i := slices.IndexFunc(vs, func(v verdict) bool { return !v.ok }); i >= 0 {
		t.Errorf("failed verdict %+v", vs[i])
	}
}

// TestBadAutoApproveFileStopsTerminalCommands: a rules file with a rule
// that could not match exactly stops a terminal command with an error that
// names the variable, the file, the line and the rule.
func TestBadAutoApproveFileStopsTerminalCommands(t *testing.T) {
	t.Parallel()
	rules := filepath.Join(t.TempDir(), "auto-approve.json")
	if err := os.WriteFile(rules, []byte(`{"rules": [{"agent": "codex", "workspace": "/w", "argv": ["make test"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"CLAWCONNECT_TERMINAL_AUTO_APPROVE_FILE": rules, "CLAWCONNECT_HOME": t.TempDir(),
		"CLAWCONNECT_TMUX_DEFAULT_SERVER": "off"}
	var out, errOut bytes.Buffer
	err := Run(t.Context(), Env{Args: []string{"terminal", "list"}, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string { return vars[k] }})
	if err == nil || !strings.Contains(err.Error(), "CLAWCONNECT_TERMINAL_AUTO_APPROVE_FILE") || !strings.Contains(err.Error(), rules) ||
		!strings.Contains(err.Error(), `auto-approve rules, line 1: rule 1: argv word "make test"`) {
		t.Fatalf("terminal list = %v (stderr %s)", err, errOut.String())
	}
}
