package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clawconnect/clawconnect/internal/settings"
	"github.com/clawconnect/clawconnect/taskapi"
)

// envOf is the effective settings of the environment m; a bad value there
// is a mistake in the test.
func envOf(m map[string]string) settings.Values {
	v, err := settings.Load(func(k string) string { return m[k] })
	if err != nil {
		panic(err)
	}
	return v
}

func TestParseRegistryErrors(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"invalid json", `{`, "agents.json: invalid JSON: unexpected EOF"},
		{"no agents", `{}`, `agents.json: "agents" must be a non-empty array`},
		{"agents not array", `{"agents":{"id":"a"}}`, `agents.json: "agents" must be a non-empty array`},
		{"empty agents", `{"agents":[]}`, `agents.json: "agents" must be a non-empty array`},
		{"entry not object", `{"agents":[7]}`, `agents.json: entry #0 is not an object`},
		{"missing id", `{"agents":[{"id":"a","url":"u","password":"p"},{"url":"u","password":"p"}]}`, `agents.json: entry #1 missing "id"`},
		{"blank id", `{"agents":[{"id":"  ","url":"u","password":"p"}]}`, `agents.json: entry #0 missing "id"`},
		{"non-string id", `{"agents":[{"id":3,"url":"u","password":"p"}]}`, `agents.json: entry #0 missing "id"`},
		{"missing url", `{"agents":[{"id":"a","password":"p"}]}`, `agents.json: entry "a" missing "url"`},
		{"missing password", `{"agents":[{"id":"a","url":"u","password":""}]}`, `agents.json: entry "a" missing "password"`},
		{"duplicate", `{"agents":[{"id":"a","url":"u","password":"p"},{"id":"a","url":"u","password":"p"}]}`, `agents.json: duplicate agent id "a"`},
		{"unknown default", `{"default":"zz","agents":[{"id":"a","url":"u","password":"p"}]}`, `agents.json: default "zz" is not a configured agent id`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRegistry([]byte(tt.json))
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("ParseRegistry = %v, want a *FileError with %q", err, tt.want)
			}
			if diff := cmp.Diff(tt.want, fe.Msg); diff != "" {
				t.Errorf("reference message mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAgentsFileErrorText: a broken agents.json is reported with its path,
// line and column, what was found and what the field should be, the way
// doctor reports it.
func TestAgentsFileErrorText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, json, want string
	}{
		{"array instead of an object", "[]",
			`PATH:1:1: invalid JSON: the file is an array, not an object: agents.json is one JSON object such as {"agents": [{"id": "assistant", "url": "ws://127.0.0.1:18789", "password": "..."}]}`},
		{"misspelt password", "{\n  \"agents\": [\n    {\"id\": \"a\", \"url\": \"ws://h:1\", \"pasword\": \"p\"}\n  ]\n}",
			`PATH:3:36: entry "a" missing "password": found "pasword" (did you mean "password"?); "password" is the gateway's password or token, a non-empty string`},
		{"password not a string", "{\"agents\": [{\"id\": \"a\", \"url\": \"ws://h:1\", \"password\": 7}]}",
			`PATH:1:44: entry "a" missing "password": it is a number; "password" is the gateway's password or token, a non-empty string`},
		{"misspelt agents", `{"agnets": []}`,
			`PATH:1:2: "agents" must be a non-empty array: found "agnets" (did you mean "agents"?); "agents" is a non-empty array of agents, each {"id": "...", "url": "ws://...", "password": "..."}`},
		{"empty agents", `{"agents": []}`,
			`PATH:1:2: "agents" must be a non-empty array: it is an empty array; "agents" is a non-empty array of agents, each {"id": "...", "url": "ws://...", "password": "..."}`},
		{"second entry missing id", "{\"agents\": [\n {\"id\": \"a\", \"url\": \"u\", \"password\": \"p\"},\n {\"url\": \"u\"}]}",
			`PATH:3:2: entry #1 missing "id": "id" names the agent, a non-empty string such as "assistant"`},
		{"default of the wrong type", `{"default": 3, "agents": [{"id": "a", "url": "u", "password": "p"}]}`,
			`PATH:1:2: "default" is a number: "default" is the id of one of the agents, a string`},
		{"truncated", "{\"agents\": [",
			`PATH:1:13: invalid JSON: unexpected EOF: the file ends before its JSON does`},
		{"syntax error", "{\"agents\": [}\n",
			`PATH:1:13: invalid JSON: invalid character '}' looking for beginning of value`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			writeAgents(t, home, tt.json)
			_, err := LoadRegistry(envOf(map[string]string{"CLAWCONNECT_HOME": home}))
			if err == nil {
				t.Fatal("LoadRegistry succeeded")
			}
			want := strings.ReplaceAll(tt.want, "PATH", filepath.Join(home, "agents.json"))
			if diff := cmp.Diff(want, err.Error()); diff != "" {
				t.Errorf("error text (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnknownAgentFieldIsAWarning: a field the file format does not know is
// reported with the closest known one, and does not stop the load.
func TestUnknownAgentFieldIsAWarning(t *testing.T) {
	t.Parallel()
	r, err := ParseRegistry([]byte(`{"agents": [{"id": "a", "url": "u", "password": "p", "emoij": "x", "zzz": 1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`agents.json: entry "a" has unknown field "emoij" (did you mean "emoji"?); ignored`,
		`agents.json: entry "a" has unknown field "zzz"; ignored`,
	}
	if diff := cmp.Diff(want, r.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestParseRegistryFull(t *testing.T) {
	data, err := os.ReadFile("testdata/agents.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRegistry(data)
	if err != nil {
		t.Fatalf("ParseRegistry: %v", err)
	}
	want := &taskapi.Registry{
		Default: "helper",
		Agents: []taskapi.Agent{
			{ID: "assistant", URL: "ws://127.0.0.1:18789", Password: "pw", OpenClawAgentID: "main", Emoji: "🦀", Role: "generalist", Collections: []string{"notes"}},
			{ID: "helper", URL: "ws://127.0.0.1:18790", Password: "pw2", OpenClawAgentID: "helper-agent", QMDToken: "qmd-x"},
			{ID: "third", URL: "ws://127.0.0.1:18791", Password: "pw3", OpenClawAgentID: "main"},
		},
		Groups: []taskapi.Group{
			{Name: "lab", Label: "Bakery ClawConnect", Members: []string{"assistant", "helper"}},
			{Name: "solo", Members: []string{"third"}},
		},
		Source: taskapi.SourceFile,
		Warnings: []string{
			`agents.json: group "empty" names unknown agent "ghost"; dropped`,
			`agents.json: group "empty" is empty; dropped`,
			`agents.json: group "lab" names unknown agent "nobody"; dropped`,
			`agents.json: group "notarray" is not an array; skipped`,
		},
	}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("registry mismatch (-want +got):\n%s", diff)
	}
}

func writeAgents(t *testing.T, home, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestLoadRegistry(t *testing.T) {
	t.Run("file wins over env", func(t *testing.T) {
		home := t.TempDir()
		writeAgents(t, home, `{"agents":[{"id":"a","url":"ws://x","password":"p"}]}`)
		r, err := LoadRegistry(envOf(map[string]string{"CLAWCONNECT_HOME": home, "OPENCLAW_URL": "ws://y", "OPENCLAW_PASSWORD": "q"}))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"a"}, r.IDs()); diff != "" || r.Source != taskapi.SourceFile || r.Path != filepath.Join(home, "agents.json") {
			t.Errorf("ids diff %s; source %q path %q", diff, r.Source, r.Path)
		}
	})
	t.Run("invalid file is an error, not a fallback", func(t *testing.T) {
		home := t.TempDir()
		writeAgents(t, home, `{"agents":[]}`)
		_, err := LoadRegistry(envOf(map[string]string{"CLAWCONNECT_HOME": home, "OPENCLAW_URL": "ws://y", "OPENCLAW_PASSWORD": "q"}))
		if err == nil || errors.Is(err, ErrNoConfig) {
			t.Fatalf("err = %v, want a parse error", err)
		}
	})
	t.Run("default home under HOME", func(t *testing.T) {
		home := t.TempDir()
		if err := os.Mkdir(filepath.Join(home, ".clawconnect"), 0o700); err != nil {
			t.Fatal(err)
		}
		writeAgents(t, filepath.Join(home, ".clawconnect"), `{"agents":[{"id":"h","url":"ws://x","password":"p"}]}`)
		r, err := LoadRegistry(envOf(map[string]string{"HOME": home}))
		if err != nil || r.Default != "h" {
			t.Fatalf("LoadRegistry = %+v, %v", r, err)
		}
	})
	tests := []struct {
		name string
		env  map[string]string
		want *taskapi.Registry
		err  error
	}{
		{"nothing", map[string]string{}, nil, ErrNoConfig},
		{"url only", map[string]string{"OPENCLAW_URL": "ws://x"}, nil, ErrIncompleteEnv},
		{"password only", map[string]string{"OPENCLAW_PASSWORD": "p"}, nil, ErrIncompleteEnv},
		{"env defaults", map[string]string{"OPENCLAW_URL": "ws://x", "OPENCLAW_PASSWORD": "p"},
			&taskapi.Registry{Default: "main", Agents: []taskapi.Agent{{ID: "main", URL: "ws://x", Password: "p", OpenClawAgentID: "main"}}, Source: taskapi.SourceEnv}, nil},
		{"env alias and agent id", map[string]string{"OPENCLAW_URL": "ws://x", "OPENCLAW_PASSWORD": "p", "OPENCLAW_AGENT_ID": "ops", "CLAWCONNECT_AGENT_ALIAS": "crab"},
			&taskapi.Registry{Default: "crab", Agents: []taskapi.Agent{{ID: "crab", URL: "ws://x", Password: "p", OpenClawAgentID: "ops"}}, Source: taskapi.SourceEnv}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.env["CLAWCONNECT_HOME"] = t.TempDir()
			r, err := LoadRegistry(envOf(tt.env))
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, r); diff != "" {
				t.Errorf("registry mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if got, want := ErrNoConfig.Error(), "No ClawConnect agent config found. Create ~/.clawconnect/agents.json or set OPENCLAW_URL + OPENCLAW_PASSWORD."; got != want {
		t.Errorf("ErrNoConfig = %q, want %q", got, want)
	}
}

func TestResolve(t *testing.T) {
	r, err := ParseRegistry([]byte(`{"default":"b","agents":[{"id":"a","url":"u","password":"p"},{"id":"b","url":"u","password":"p"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ id, want, err string }{
		{"", "b", ""}, {"a", "a", ""}, {" a ", "a", ""},
		{"x", "", `Unknown agent "x". Configured agents: a, b`},
	} {
		t.Run(tt.id, func(t *testing.T) {
			a, err := r.Resolve(tt.id)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err || !errors.Is(err, taskapi.ErrUnknownAgent) {
					t.Fatalf("Resolve(%q) err = %v, want %q wrapping ErrUnknownAgent", tt.id, err, tt.err)
				}
				return
			}
			if err != nil || a.ID != tt.want {
				t.Fatalf("Resolve(%q) = %q, %v; want %q", tt.id, a.ID, err, tt.want)
			}
		})
	}
}

func TestScope(t *testing.T) {
	data, err := os.ReadFile("testdata/agents.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRegistry(data)
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"assistant", "helper", "third"}
	tests := []struct {
		name           string
		groups, agents []string
		want           taskapi.Scope
		warnings       int
	}{
		{"none", nil, nil, taskapi.Scope{Allowed: all, Default: "helper", ServerName: "ClawConnect"}, 0},
		{"labelled group", []string{"lab"}, nil, taskapi.Scope{Allowed: []string{"assistant", "helper"}, Default: "helper", ServerName: "Bakery ClawConnect"}, 0},
		{"unlabelled group keeps name", []string{"solo"}, nil, taskapi.Scope{Allowed: []string{"third"}, Default: "third", ServerName: "ClawConnect"}, 0},
		{"union comma joined", []string{"solo"}, []string{"assistant,third"}, taskapi.Scope{Allowed: []string{"assistant", "third"}, Default: "assistant", ServerName: "ClawConnect"}, 0},
		{"repeated agents", nil, []string{"third", "helper"}, taskapi.Scope{Allowed: []string{"helper", "third"}, Default: "helper", ServerName: "ClawConnect"}, 0},
		{"unknown dropped", []string{"nope"}, []string{"ghost", "third"}, taskapi.Scope{Allowed: []string{"third"}, Default: "third", ServerName: "ClawConnect"}, 2},
		{"nothing resolves", []string{"nope"}, []string{"ghost"}, taskapi.Scope{Allowed: all, Default: "helper", ServerName: "ClawConnect"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, warnings := r.Scope(tt.groups, tt.agents)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("scope mismatch (-want +got):\n%s", diff)
			}
			if len(warnings) != tt.warnings {
				t.Errorf("warnings = %q, want %d", warnings, tt.warnings)
			}
		})
	}
}

func TestTimeoutsFrom(t *testing.T) {
	def := DefaultTimeouts()
	custom := def
	custom.CheckWait = 1500 * time.Millisecond
	custom.Chat = 2500 * time.Microsecond
	custom.LogEntryTextMax = 100
	tests := []struct {
		name string
		env  map[string]string
		want Timeouts
	}{
		{"defaults", nil, def},
		{"valid", map[string]string{"CLAWCONNECT_CHECK_WAIT_MS": " 1500 ", "CLAWCONNECT_TIMEOUT_MS": "2.5", "CLAWCONNECT_LOG_ENTRY_TEXT_MAX": "100"}, custom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, TimeoutsFrom(envOf(tt.env))); diff != "" {
				t.Errorf("timeouts mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
