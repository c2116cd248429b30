package settings

import (
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/agentsession"
)

var update = flag.Bool("update", false, "rewrite the README's table of variables from the registry")

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestDefaults pins a few defaults as a reader of the README knows them, and
// the rules around them (Home from HOME, the switch defaults).
func TestDefaults(t *testing.T) {
	t.Parallel()
	d := Defaults()
	checks := []struct {
		name      string
		got, want any
	}{
		{"chat timeout", d.ChatTimeout, 30 * time.Minute},
		{"retention", d.Retention, 30 * 24 * time.Hour},
		{"call timeout", d.CallTimeout, agentsession.DefaultCallTimeout},
		{"log entry max", d.LogEntryTextMax, 8000},
		{"log level", d.LogLevel, slog.LevelWarn},
		{"tmux default server", d.TmuxDefaultServer, true},
		{"terminal tools", d.TerminalTools, false},
		{"agent id", d.OpenClawAgentID, "main"},
		{"build", d.BuildSHA, "unknown"},
		{"home", d.Home, ".clawconnect"},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
	v, err := Load(envOf(map[string]string{"HOME": "/h"}))
	if err != nil || v.Home != filepath.Join("/h", ".clawconnect") {
		t.Errorf("Home from HOME = %q, %v", v.Home, err)
	}
	v, err = Load(envOf(map[string]string{"HOME": "/h", "CLAWCONNECT_HOME": " /c "}))
	if err != nil || v.Home != "/c" {
		t.Errorf("CLAWCONNECT_HOME = %q, %v", v.Home, err)
	}
}

// TestEveryExampleParsesAndChangesItsValue: each declared setting accepts
// its example and the example differs from the default, so the effect
// table of internal/cli has a value to try; each has a doc.
func TestEveryExampleParsesAndChangesItsValue(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, s := range All() {
		t.Run(s.Name, func(t *testing.T) {
			if seen[s.Name] {
				t.Fatalf("%s declared twice", s.Name)
			}
			seen[s.Name] = true
			if s.Doc == "" || s.Default == "" || s.Example == "" {
				t.Fatalf("%s lacks a doc, default or example: %+v", s.Name, s)
			}
			v, err := Load(envOf(map[string]string{s.Name: s.Example}))
			if err != nil {
				t.Fatalf("Load(%s=%q): %v", s.Name, s.Example, err)
			}
			if cmp.Equal(Defaults(), v) {
				t.Fatalf("%s=%q leaves every value at its default", s.Name, s.Example)
			}
		})
	}
}

// TestBadValues: a bad value is an error naming the variable, what is wrong
// and what to do; the setting keeps its default and the others are still
// read; a secret's value is never repeated.
func TestBadValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value, problem string
	}{
		{"CLAWCONNECT_TIMEOUT_MS", "soon", "not a number of milliseconds"},
		{"CLAWCONNECT_LEASE_MS", "0", "out of range"},
		{"CLAWCONNECT_RECOVERY_IDLE_MS", "-5", "out of range"},
		{"CLAWCONNECT_CHECK_MAX_WAIT_MS", "NaN", "not a number of milliseconds"},
		{"CLAWCONNECT_RECONCILE_QUIET_MS", "Inf", "not a number of milliseconds"},
		{"CLAWCONNECT_RETENTION_MS", "1e300", "out of range"},
		{"CLAWCONNECT_TERMINAL_RECHECK_MS", "0.0001", "out of range"},
		{"CLAWCONNECT_LOG_ENTRY_TEXT_MAX", "1.5", "not a whole number in range"},
		{"CLAWCONNECT_LOG_ENTRY_TEXT_MAX", "0", "not a whole number in range"},
		{"CLAWCONNECT_TERMINAL_TOOLS", "maybe", "not a switch"},
		{"CLAWCONNECT_TERMINAL_HOST", "my laptop", "' ' at byte 2 is not allowed in a host name"},
		{"CLAWCONNECT_TERMINAL_HOST", "-laptop", "'-' at byte 0 is not allowed in a host name"},
		{"CLAWCONNECT_TERMINAL_HOST_LEASE_MS", "1000", "below the minimum"},
		{"CLAWCONNECT_LOG_LEVEL", "loud", "not a log level"},
		{"CLAWCONNECT_HOME", "relative/dir", "not an absolute path"},
		{"OPENCLAW_URL", "ftp://gw:1", `unsupported scheme "ftp"`},
		{"OPENCLAW_URL", "ws://", "not a URL with a host"},
		{"CLAWCONNECT_DATABASE_URL", "mysql://u:hunter2@db/x", "not a postgres:// or postgresql:// URL"},
		{"CLAWCONNECT_GATEWAY_HEADERS", `["hunter2"]`, "not a JSON object"},
		{"AGENT_SESSION_CALL_TIMEOUT_MS", "fast", "not a number of milliseconds"},
		{"CLAWCONNECT_OAUTH_ISSUER", "login.example.com", "not an absolute http(s) URL without query or fragment"},
		{"CLAWCONNECT_OAUTH_RESOURCE", "https://mcp.example.com/mcp?x=1", "not an absolute http(s) URL without query or fragment"},
		{"CLAWCONNECT_PASS_PARAM", "maybe", "not a switch"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			v, err := Load(envOf(map[string]string{tt.name: tt.value, "CLAWCONNECT_CHECK_WAIT_MS": "1500"}))
			bad := Problems(err)
			if len(bad) != 1 {
				t.Fatalf("Load = %v, want one problem", err)
			}
			e := bad[0]
			s, _ := Lookup(tt.name)
			if e.Name != tt.name || e.Problem != tt.problem || e.Fix == "" {
				t.Errorf("problem = %+v, want %s: %s, with a fix", e, tt.name, tt.problem)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.name) || !strings.Contains(msg, tt.problem) {
				t.Errorf("error %q does not name %s and %q", msg, tt.name, tt.problem)
			}
			if s.Secret && strings.Contains(msg, "hunter2") {
				t.Errorf("error %q repeats a secret", msg)
			}
			if !s.Secret && !strings.Contains(msg, tt.value) {
				t.Errorf("error %q does not quote the value", msg)
			}
			// The bad one keeps its default; the good one is read.
			want := Defaults()
			want.CheckWait = 1500 * time.Millisecond
			if diff := cmp.Diff(want, v); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
		})
	}
	_, err := Load(envOf(map[string]string{"CLAWCONNECT_LEASE_MS": "x", "CLAWCONNECT_LOG_LEVEL": "y"}))
	if n := len(Problems(err)); n != 2 {
		t.Errorf("two bad variables gave %d problems: %v", n, err)
	}
}

// TestValues: the parsers' accepted forms.
func TestValues(t *testing.T) {
	t.Parallel()
	v, err := Load(envOf(map[string]string{
		"CLAWCONNECT_TIMEOUT_MS":          "2.5",
		"CLAWCONNECT_TMUX_DEFAULT_SERVER": "OFF",
		"CLAWCONNECT_SHARED_TASK_VIEW":    "true",
		"CLAWCONNECT_ALLOWED_ORIGINS":     " http://a , ,http://b ",
		"CLAWCONNECT_EXEC_PASSENV":        "A B,C",
		"CLAWCONNECT_LOG_LEVEL":           "Debug",
		"OPENCLAW_URL":                    "127.0.0.1:18789",
		"CLAWCONNECT_DATABASE_URL":        "postgresql://u@h/db",
	}))
	if err != nil {
		t.Fatal(err)
	}
	got := []any{v.ChatTimeout, v.TmuxDefaultServer, v.SharedTaskView, v.AllowedOrigins, v.ExecPassEnv, v.LogLevel, v.OpenClawURL, v.DatabaseURL}
	want := []any{2500 * time.Microsecond, false, true, []string{"http://a", "http://b"}, []string{"A", "B", "C"}, slog.LevelDebug,
		"127.0.0.1:18789", "postgresql://u@h/db"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
}

// TestSetRedactsSecrets: doctor's list of set variables never shows a
// secret, and leaves out the ambient ones.
func TestSetRedactsSecrets(t *testing.T) {
	t.Parallel()
	got := Set(envOf(map[string]string{
		"OPENCLAW_PASSWORD": "hunter2", "CLAWCONNECT_DATABASE_URL": "postgres://u:hunter2@h/db", "MCP_USER_TOKENS": "a:hunter2",
		"PUBLIC_MCP_PASS": "hunter2", "OPENCLAW_GATEWAY_TOKEN": "hunter2", "CLAWCONNECT_GATEWAY_HEADERS": `{"a":"hunter2"}`,
		"CLAWCONNECT_LEASE_MS": "5000", "HOME": "/h", "TMUX": "x", "NOT_OURS": "1",
	}))
	want := []Entry{
		{"OPENCLAW_PASSWORD", "(redacted)"}, {"OPENCLAW_GATEWAY_TOKEN", "(redacted)"},
		{"CLAWCONNECT_GATEWAY_HEADERS", "(redacted)"}, {"CLAWCONNECT_DATABASE_URL", "(redacted)"},
		{"MCP_USER_TOKENS", "(redacted)"}, {"PUBLIC_MCP_PASS", "(redacted)"}, {"CLAWCONNECT_LEASE_MS", "5000"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Set (-want +got):\n%s", diff)
	}
}

// The README's table of variables between these markers is MarkdownTable.
const (
	tableBegin = "<!-- settings table: generated from internal/settings by `go test ./internal/settings -update` -->\n"
	tableEnd   = "<!-- end of settings table -->\n"
)

// envName matches a variable's name as the README quotes it.
var envName = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$`)

// TestREADMETable: the README lists every registered variable with its
// default and doc, and no other; -update rewrites it.
func TestREADMETable(t *testing.T) {
	path := filepath.Join("..", "..", "README.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, tableBegin), strings.Index(readme, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the settings table markers %q ... %q", tableBegin, tableEnd)
	}
	got, want := readme[i+len(tableBegin):j], MarkdownTable()
	if *update {
		if err := os.WriteFile(path, []byte(readme[:i+len(tableBegin)]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("README.md's table differs from the registry (-registry +README); run go test ./internal/settings -update:\n%s", diff)
	}
	// Every variable the README's Configuration section names is declared.
	section := readme[strings.Index(readme, "## Configuration"):]
	if k := strings.Index(section[3:], "\n## "); k >= 0 {
		section = section[:k+3]
	}
	for _, f := range strings.Split(section, "`") {
		if envName.MatchString(f) {
			if _, ok := Lookup(f); !ok {
				t.Errorf("README's Configuration names %s, which the registry does not declare", f)
			}
		}
	}
}

// FuzzLoad: no value of any setting makes Load panic, and a value is
// either accepted or reported against its own variable.
func FuzzLoad(f *testing.F) {
	for _, s := range All() {
		f.Add(s.Name, s.Example)
	}
	f.Add("CLAWCONNECT_TIMEOUT_MS", "9e18")
	f.Add("CLAWCONNECT_GATEWAY_HEADERS", "null")
	f.Fuzz(func(t *testing.T, name, value string) {
		_, err := Load(envOf(map[string]string{name: value}))
		for _, e := range Problems(err) {
			if e.Name != name {
				t.Fatalf("%s=%q reported against %s", name, value, e.Name)
			}
		}
		if err != nil && len(Problems(err)) == 0 {
			t.Fatalf("error without a problem: %v", err)
		}
	})
}
