package executor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const executorImportPath = "github.com/clawconnect/clawconnect/executor"

var (
	kindConstNames = map[string]bool{
		"KindTextDelta": true, "KindToolCall": true, "KindToolResult": true, "KindStatus": true,
		"KindCost": true, "KindDone": true, "KindError": true,
	}
	payloadTypeNames = map[string]bool{
		"TextDelta": true, "ToolCall": true, "ToolResult": true, "Status": true,
		"Cost": true, "Done": true, "Error": true,
	}
)

// kindSwitchViolations returns "file:line: message" for every switch in f
// that names some but not all of the seven kinds (as Kind constants in an
// expression switch, or as payload types in a type switch).
func kindSwitchViolations(fset *token.FileSet, f *ast.File) []string {
	local := f.Name.Name == "executor"
	var pkgName string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if p != executorImportPath {
			continue
		}
		pkgName = "executor"
		if imp.Name != nil {
			pkgName = imp.Name.Name
		}
	}
	if !local && pkgName == "" {
		return nil
	}
	name := func(e ast.Expr) string {
		if s, ok := e.(*ast.StarExpr); ok {
			e = s.X
		}
		switch x := e.(type) {
		case *ast.Ident:
			if local {
				return x.Name
			}
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == pkgName && pkgName != "" {
				return x.Sel.Name
			}
		}
		return ""
	}
	var out []string
	check := func(pos token.Pos, body *ast.BlockStmt, set map[string]bool, what string) {
		seen := map[string]bool{}
		for _, st := range body.List {
			cc, ok := st.(*ast.CaseClause)
			if !ok {
				continue
			}
			for _, e := range cc.List {
				if n := name(e); set[n] {
					seen[n] = true
				}
			}
		}
		if len(seen) == 0 || len(seen) == len(set) {
			return
		}
		var missing []string
		for n := range set {
			if !seen[n] {
				missing = append(missing, n)
			}
		}
		sort.Strings(missing)
		out = append(out, fset.Position(pos).String()+": switch over event "+what+" misses "+strings.Join(missing, ", "))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.SwitchStmt:
			check(s.Pos(), s.Body, kindConstNames, "kinds")
		case *ast.TypeSwitchStmt:
			check(s.Pos(), s.Body, payloadTypeNames, "payloads")
		}
		return true
	})
	return out
}

func TestKindSwitchCheckerFindsGaps(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want int
	}{
		{"complete const switch", `package p
import "github.com/clawconnect/clawconnect/executor"
func f(k executor.Kind) { switch k { case executor.KindTextDelta, executor.KindToolCall, executor.KindToolResult:
case executor.KindStatus, executor.KindCost: case executor.KindDone: case executor.KindError: } }`, 0},
		{"const switch forgets error", `package p
import "github.com/clawconnect/clawconnect/executor"
func f(k executor.Kind) { switch k { case executor.KindTextDelta, executor.KindToolCall, executor.KindToolResult:
case executor.KindStatus, executor.KindCost: case executor.KindDone: default: } }`, 1},
		{"aliased type switch forgets cost", `package p
import ex "github.com/clawconnect/clawconnect/executor"
func f(p ex.Payload) { switch p.(type) { case ex.TextDelta, ex.ToolCall, ex.ToolResult, ex.Status, ex.Done, ex.Error: } }`, 1},
		{"unrelated switch", `package p
func f(x int) { switch x { case 1: } }`, 0},
		{"local package switch forgets done", `package executor
func f(k Kind) { switch k { case KindTextDelta: } }`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "x.go", tt.src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			if got := kindSwitchViolations(fset, f); len(got) != tt.want {
				t.Errorf("violations = %v, want %d", got, tt.want)
			}
		})
	}
}

// TestEveryKindSwitchIsExhaustive scans every Go file of the module: a
// switch that names some event kinds must name all seven, so adding a kind
// fails here until every switch handles it. Use an if for a one-kind check.
func TestEveryKindSwitchIsExhaustive(t *testing.T) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Dir(dir) // executor sits at the module root
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found above %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	var violations []string
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			// Another engineer's file mid-edit; the compiler reports it.
			t.Logf("skip %s: %v", path, err)
			return nil
		}
		files++
		violations = append(violations, kindSwitchViolations(fset, f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("scanned no Go files")
	}
	if diff := cmp.Diff([]string(nil), violations); diff != "" {
		t.Errorf("non-exhaustive switches over event kinds (-want +got):\n%s", diff)
	}
}
