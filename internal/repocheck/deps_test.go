package repocheck

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// publicEmbedPackages are the packages a host outside the module imports to
// embed the MCP server with its own task service.
var publicEmbedPackages = []string{"server", "server/servertest", "taskapi"}

// forbiddenEmbedDeps are what those packages must never link: the storage
// drivers and the wiring that opens them (internal/bridge).
var forbiddenEmbedDeps = []string{
	"modernc.org/sqlite",
	"github.com/jackc/pgx",
	module + "internal/bridge",
	module + "internal/store/sqlite",
	module + "internal/store/postgres",
	module + "internal/store/sqlstore",
	module + "gateway",
}

// TestPublicServerLinksNoStore lists the transitive dependencies of the
// public embedding packages with `go list -deps` and fails on a storage
// driver or the bridge's wiring among them: importing server must cost a
// host neither SQLite nor pgx.
func TestPublicServerLinksNoStore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	args := []string{"list", "-deps"}
	for _, p := range publicEmbedPackages {
		args = append(args, module+p)
	}
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	n := 0
	for dep := range strings.Lines(string(out)) {
		dep = strings.TrimSpace(dep)
		n++
		for _, bad := range forbiddenEmbedDeps {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("%v link %s; move whatever imports it under internal/ (see docs/ARCHITECTURE.md)", publicEmbedPackages, dep)
			}
		}
	}
	if n < 10 {
		t.Fatalf("go list -deps listed only %d packages; the check would prove nothing", n)
	}
}

// TestTaskAPIIsStandardLibraryOnly keeps taskapi a vocabulary: it imports
// nothing outside the standard library.
func TestTaskAPIIsStandardLibraryOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+"taskapi").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	if got := strings.Fields(string(out)); len(got) != 1 || got[0] != module+"taskapi" {
		t.Errorf("taskapi links %v; it must depend on the standard library only", got)
	}
}

// TestEmbedExampleUsesOnlyPublicPackages parses the server's embedding
// example, which stands for a host outside the module, and fails if it
// imports an internal package (which such a host could not).
func TestEmbedExampleUsesOnlyPublicPackages(t *testing.T) {
	path := filepath.Join("..", "..", "server", "example_test.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("parse the embedding example: %v", err)
	}
	if len(f.Imports) == 0 {
		t.Fatal("the embedding example imports nothing")
	}
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if strings.Contains(p, "/internal/") || strings.HasSuffix(p, "/internal") {
			t.Errorf("%s imports %s: a host outside the module cannot", path, p)
		}
	}
}
