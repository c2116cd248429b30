package repocheck

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// These tests keep the agent-session boundary honest (runtime-boundary
// seed, "Keeping this boundary honest"): ClawConnect ships no runtime, so no
// runtime-specific name appears outside the example that defines one, no
// document carries a machine's absolute path, and no entry point registers a
// runtime of its own.

// runtimeSpecificNames are names that belong to one runtime. They are built
// by concatenation so that this file does not contain them.
var runtimeSpecificNames = []string{
	"claude-" + "fleet",          // the example runtime's id
	"fleet-" + "transcript",      // the removed result source naming that runtime
	"LocalTmux" + "FleetAdapter", // the removed built-in adapter
}

// runtimeNameAllowed lists where a runtime-specific name may appear: the
// example that defines the runtime, and the documents that describe it.
func runtimeNameAllowed(rel string) bool {
	return strings.HasPrefix(rel, "examples/") || rel == "docs/runtime-modules.md"
}

// repoFiles walks the module's files, skipping VCS and dependency
// directories, and calls f with each regular file's slash path relative to
// the root.
func repoFiles(t *testing.T, root string, f func(rel, path string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		f(filepath.ToSlash(rel), path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// readText returns a file's content, or false for binary files.
func readText(t *testing.T, path string) ([]byte, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	head := b[:min(len(b), 8000)]
	return b, !bytes.Contains(head, []byte{0})
}

// TestNoRuntimeSpecificNamesOutsideExamples fails when a runtime's own id or
// constant appears in shipped code or docs outside examples/.
func TestNoRuntimeSpecificNamesOutsideExamples(t *testing.T) {
	root := moduleRoot(t)
	scanned := 0
	repoFiles(t, root, func(rel, path string) {
		if runtimeNameAllowed(rel) {
			return
		}
		b, ok := readText(t, path)
		if !ok {
			return
		}
		scanned++
		for _, name := range runtimeSpecificNames {
			if i := bytes.Index(b, []byte(name)); i >= 0 {
				line := 1 + bytes.Count(b[:i], []byte("\n"))
				t.Errorf("%s:%d names runtime-specific %q; runtimes live in examples/ and reach a deployment through CLAWCONNECT_AGENT_SESSION_RUNTIME_MODULES", rel, line, name)
			}
		}
	})
	if scanned == 0 {
		t.Fatal("scanned no files; the walk is broken")
	}
}

// machinePathRE matches absolute paths of a particular machine or user:
// /work/..., /root, /home/<user>, /Users/<user>, C:\Users\<user>. A path
// written relative to $HOME or ~ is fine.
var machinePathRE = regexp.MustCompile(`(^|[^A-Za-z0-9_.~$/-])(/work/|/root\b|/home/[A-Za-z]|/Users/[A-Za-z]|[A-Za-z]:\\Users\\)`)

// TestDocumentsCarryNoAbsoluteMachinePath fails when a document names an
// absolute path of some machine.
func TestDocumentsCarryNoAbsoluteMachinePath(t *testing.T) {
	root := moduleRoot(t)
	docs := 0
	repoFiles(t, root, func(rel, path string) {
		if !strings.HasSuffix(rel, ".md") && !strings.HasSuffix(rel, ".txt") {
			return
		}
		docs++
		b, _ := readText(t, path)
		for i, line := range strings.Split(string(b), "\n") {
			if m := machinePathRE.FindStringSubmatch(line); m != nil {
				t.Errorf("%s:%d carries the absolute machine path %q; write it relative to the repository, $HOME or a placeholder", rel, i+1, m[2])
			}
		}
	})
	if docs == 0 {
		t.Fatal("found no documents; the walk is broken")
	}
}

func TestMachinePathPattern(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"see /work/main/docs", true},
		{"run as /root", true},
		{"cd /home/alice/x", true},
		{`C:\Users\bob\x`, true},
		{"open /Users/carol/Library", true},
		{"internal/cli/root.go", false},
		{"~/.clawconnect/home/x", false},
		{"$HOME/modules/x", false},
		{"docs/work/notes.md", false},
		{"/etc/passwd", false},
	} {
		if got := machinePathRE.MatchString(tc.line); got != tc.want {
			t.Errorf("machinePathRE.MatchString(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

// entryPointDirs are the directories whose code starts ClawConnect: the
// binary, its command tree, and the server factory hosts embed. Those that
// do not exist yet are skipped.
var entryPointDirs = []string{"cmd", "internal/cli", "server", "internal/server"}

const (
	agentsessionImport = "github.com/clawconnect/clawconnect/agentsession"
	moduleImport       = "github.com/clawconnect/clawconnect/agentsession/module"
	// sessionrtImport is the terminal runtime ClawConnect can serve as a
	// module; an entry point may hand it only to module.Serve (its own
	// process, which an operator names in the modules variable), never to
	// a registry it loads or serves tools with.
	sessionrtImport = "github.com/clawconnect/clawconnect/internal/terminal/sessionrt"
)

// runtimeRegistrations returns, for one Go source file, every place that
// builds a runtime of its own: an agentsession.Runtime composite literal or
// an import of an example module.
func runtimeRegistrations(fset *token.FileSet, f *ast.File) []string {
	var found []string
	aliases := map[string]bool{}
	var sessionrtAt token.Pos
	moduleName := ""
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if strings.Contains(path, "/examples/") {
			found = append(found, fset.Position(imp.Pos()).String()+": imports example "+path)
		}
		switch path {
		case sessionrtImport:
			sessionrtAt = imp.Pos()
		case moduleImport:
			moduleName = "module"
			if imp.Name != nil {
				moduleName = imp.Name.Name
			}
		}
		if path == agentsessionImport {
			name := "agentsession"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			aliases[name] = true
		}
	}
	serves, loads := false, false
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok && moduleName != "" {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == moduleName {
				serves = serves || sel.Sel.Name == "Serve"
				loads = loads || sel.Sel.Name == "Load"
			}
		}
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		if sel, ok := lit.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Runtime" {
			if id, ok := sel.X.(*ast.Ident); ok && aliases[id.Name] {
				found = append(found, fset.Position(lit.Pos()).String()+": builds an agentsession.Runtime")
			}
		}
		return true
	})
	if sessionrtAt.IsValid() && (!serves || loads) {
		found = append(found, fset.Position(sessionrtAt).String()+": uses the terminal runtime other than as a module of its own (module.Serve only)")
	}
	return found
}

// TestEntryPointsRegisterNoRuntime fails when the binary, the command tree
// or the server registers a runtime of its own. Runtimes come only from the
// embedding host or from operator-configured modules (module.Load).
func TestEntryPointsRegisterNoRuntime(t *testing.T) {
	root := moduleRoot(t)
	files := 0
	for _, dir := range entryPointDirs {
		abs := filepath.Join(root, filepath.FromSlash(dir))
		if _, err := os.Stat(abs); err != nil {
			continue
		}
		repoFiles(t, abs, func(rel, path string) {
			if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || strings.Contains(rel, "testdata/") {
				return
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Errorf("parse %s/%s: %v", dir, rel, err)
				return
			}
			files++
			for _, v := range runtimeRegistrations(fset, f) {
				t.Errorf("entry point registers a runtime of its own: %s", v)
			}
		})
	}
	if files == 0 {
		t.Fatal("found no entry-point source; cmd/ should exist")
	}
}

// TestRuntimeRegistrationDetector proves the source scan catches what it
// must, so that a clean result means something.
func TestRuntimeRegistrationDetector(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want int
	}{
		{"registers a runtime", `package p
import as "github.com/clawconnect/clawconnect/agentsession"
func f(r *as.Registry) { _ = r.Register(as.Runtime{ID: "x"}) }`, 1},
		{"imports an example", `package p
import _ "github.com/clawconnect/clawconnect/examples/local-tmux-runtime"`, 1},
		{"loads operator modules only", `package p
import (
	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/agentsession/module"
)
func f() { r := agentsession.NewRegistry(); module.Load(nil, "", r, module.LoadOptions{}) }`, 0},
		{"serves the terminal runtime as a module", `package p
import (
	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/agentsession/module"
	"github.com/clawconnect/clawconnect/internal/terminal/sessionrt"
)
func f() { r := agentsession.NewRegistry(); _ = r.Register(sessionrt.Runtime(nil)); module.Serve(nil, r, nil, nil) }`, 0},
		{"registers the terminal runtime in a host", `package p
import (
	"github.com/clawconnect/clawconnect/agentsession"
	"github.com/clawconnect/clawconnect/agentsession/module"
	"github.com/clawconnect/clawconnect/internal/terminal/sessionrt"
)
func f() { r := agentsession.NewRegistry(); _ = r.Register(sessionrt.Runtime(nil)); module.Load(nil, "", r, module.LoadOptions{}) }`, 1},
		{"another package's Runtime type", `package p
import "example.com/other"
var _ = other.Runtime{}`, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x.go", tc.src, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := runtimeRegistrations(fset, f); len(got) != tc.want {
				t.Errorf("found %v, want %d findings", got, tc.want)
			}
		})
	}
}
