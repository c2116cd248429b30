package repocheck

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const module = "github.com/clawconnect/clawconnect/"

// allowedImports is the picture of docs/ARCHITECTURE.md's "Who imports
// whom" as data: for each package of the module, the module packages its
// non-test code may import. A package missing here, or an import not listed,
// fails TestImportsMatchTheArchitecture: change the picture and this table in
// the same commit.
var allowedImports = map[string][]string{
	"agentsession":                nil,
	"agentsession/module":         {"agentsession"},
	"agentsession/storetest":      {"agentsession"},
	"cmd/clawconnect":             {"internal/cli"},
	"examples/local-tmux-runtime": {"agentsession", "agentsession/module"},
	"executor":                    nil,
	"executor/contract":           {"executor"},
	"gateway":                     {"internal/jsonscan"},
	// The wiring of stores, gateways and task managers behind server.Tasks:
	// internal, so that server's importers link neither SQLite nor pgx.
	"internal/bridge": {"agentsession", "gateway", "internal/config", "internal/store", "internal/store/owner",
		"internal/settings", "internal/store/postgres", "internal/store/sqlite", "internal/task", "server"},
	"internal/cli": {"agentsession", "agentsession/module", "executor", "gateway", "internal/bridge", "internal/config",
		"internal/dashboard", "internal/oauth", "internal/settings", "internal/store", "internal/store/postgres", "internal/store/sqlite",
		"internal/task", "internal/terminal", "internal/terminal/fswatch", "internal/terminal/sessionrt", "internal/terminal/tmux", "runtime/claudecode", "runtime/codex",
		"runtime/openclaw", "runtime/terminal", "server"},
	"internal/config":    {"internal/settings", "taskapi"},
	"internal/dashboard": {"agentsession", "internal/config", "internal/store", "internal/task", "internal/terminal", "server"},
	"internal/jsonscan":  nil,
	// OAuth mode's token check, a server.TokenVerifier.
	"internal/oauth":           {"server", "taskapi"},
	"internal/oauth/oauthtest": nil,
	"internal/repocheck":       nil,
	"internal/settings":        nil,
	"internal/store":           {"taskapi", "termapi"},
	"internal/store/owner":     {"internal/store", "internal/terminal/proc"},
	"internal/store/postgres":  {"internal/store/sqlstore"},
	"internal/store/sqlite":    {"internal/store", "internal/store/sqlstore"},
	"internal/store/sqlstore":  {"internal/store", "termapi"},
	"internal/store/storetest": {"internal/store", "internal/store/owner", "termapi"},
	"internal/task":            {"agentsession", "gateway", "internal/config", "internal/settings", "internal/store", "internal/store/owner", "taskapi"},
	"internal/terminal": {"internal/store", "internal/store/owner", "internal/terminal/agentproc", "internal/terminal/claude",
		"internal/terminal/codex", "internal/terminal/fswatch", "internal/terminal/native", "internal/terminal/proc", "internal/terminal/redact",
		"internal/terminal/request", "internal/terminal/screen", "internal/terminal/tmux", "termapi"},
	// The readers never import the Turn service that drives them.
	"internal/terminal/agentproc": {"internal/terminal/proc", "internal/terminal/tmux"},
	"internal/terminal/claude":    {"internal/terminal/native", "internal/terminal/redact", "internal/terminal/screen"},
	"internal/terminal/codex": {"internal/terminal/native", "internal/terminal/redact", "internal/terminal/request",
		"internal/terminal/screen"},
	"internal/terminal/fswatch": nil,
	"internal/terminal/native":  nil,
	"internal/terminal/proc":    nil,
	"internal/terminal/redact":  nil,
	"internal/terminal/request": nil,
	"internal/terminal/screen":  nil,
	"internal/terminal/tmux":    nil,
	// The terminal Turns as an agent-session runtime (served by a module).
	"internal/terminal/sessionrt": {"agentsession", "internal/store", "internal/terminal"},
	// Test peers: imported by tests only (checked below).
	"internal/testbed/cmd/installpeers": {"internal/testbed/peers"},
	"internal/testbed/cmd/localgateway": {"internal/testbed/peers", "internal/testbed/realgateway"},
	"internal/testbed/cmd/localterminal": {"internal/testbed/fakemodel", "internal/testbed/peers", "internal/testbed/realcli",
		"internal/testbed/realtui"},
	"internal/testbed/chromium":    nil,
	"internal/testbed/fakegateway": nil,
	"internal/testbed/fakemodel":   nil,
	"internal/testbed/peers":       nil,
	"internal/testbed/pgtest":      nil,
	"internal/testbed/realcli":     {"internal/testbed/fakemodel", "internal/testbed/peers"},
	"internal/testbed/realgateway": {"internal/testbed/fakemodel", "internal/testbed/peers"},
	"internal/testbed/realtui":     {"internal/terminal/proc", "internal/testbed/fakemodel", "internal/testbed/realcli"},
	"plugins/openclaw":             nil,
	"runtime/claudecode":           {"executor", "internal/jsonscan", "runtime/internal/oneshot"},
	"runtime/codex":                {"executor", "internal/jsonscan", "runtime/internal/oneshot"},
	"runtime/internal/fakecli":     {"executor", "executor/contract"},
	"runtime/internal/oneshot":     {"executor"},
	"runtime/openclaw":             {"executor", "gateway", "internal/jsonscan"},
	"runtime/terminal":             {"executor", "termapi"},
	"server":                       {"taskapi", "termapi"},
	"server/e2e":                   nil,
	"server/servertest":            {"server", "taskapi"},
	// The public vocabulary of server and the task service behind it:
	// standard library only.
	"taskapi": nil,
	// The public vocabulary of terminal Turns: standard library only.
	"termapi": nil,
}

// TestImportsMatchTheArchitecture lists every package's imports with
// `go list` and compares the module's own with allowedImports, so the
// picture in ARCHITECTURE.md cannot drift from the code unnoticed.
func TestImportsMatchTheArchitecture(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	got := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		var own []string
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				own = append(own, rel)
			}
		}
		slices.Sort(own)
		got[pkg] = own
	}
	want := map[string][]string{}
	for pkg, imps := range allowedImports {
		imps = slices.Clone(imps)
		slices.Sort(imps)
		want[pkg] = imps
	}
	if diff := cmp.Diff(want, got, cmp.Transformer("nilIsEmpty", func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	})); diff != "" {
		t.Errorf("the module's imports differ from the architecture's picture (-picture +code); "+
			"if the change is meant, update docs/ARCHITECTURE.md's \"Who imports whom\" and allowedImports together:\n%s", diff)
	}
	for pkg, imps := range got {
		for _, imp := range imps {
			if strings.HasPrefix(imp, "internal/testbed/") && !strings.HasPrefix(pkg, "internal/testbed/") {
				t.Errorf("%s imports the test peer %s outside its tests", pkg, imp)
			}
		}
	}
}
