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
// embed the MCP server (and the terminal executor adapter) with its own
// task and Turn services.
var publicEmbedPackages = []string{"server", "server/servertest", "runtime/terminal", "taskapi", "termapi"}

// forbiddenEmbedDeps are what those packages must never link: the storage
// drivers, the gateway client, and any internal package (whose types a host
// could not name, and which is where the wiring lives).
var forbiddenEmbedDeps = []string{
	"modernc.org/sqlite",
	"github.com/jackc/pgx",
	module + "gateway",
	module + "internal",
}

// TestPublicServerLinksNoStore lists the transitive dependencies of the
// public embedding packages with `go list -deps` and fails on a storage
// driver, the gateway client or an internal package among them: importing
// server must cost a host neither SQLite nor pgx, and its API must speak
// only public types.
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

// TestVocabulariesAreStandardLibraryOnly keeps taskapi and termapi
// vocabularies: they import nothing outside the standard library.
func TestVocabulariesAreStandardLibraryOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	for _, pkg := range []string{"taskapi", "termapi"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", module+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		if got := strings.Fields(string(out)); len(got) != 1 || got[0] != module+pkg {
			t.Errorf("%s links %v; it must depend on the standard library only", pkg, got)
		}
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
