package sqlstore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/store"
	"github.com/clawconnect/clawconnect/termapi"
)

// TestStatusListsNameEveryStatus: the status lists the SQL sets are built
// from (termapi.TurnStatuses, store.WatchStatuses, …) name every status
// constant declared, so a status added in Go and forgotten in its list
// fails here instead of silently missing from the SQL.
func TestStatusListsNameEveryStatus(t *testing.T) {
	t.Parallel()
	termapiConsts := declaredConsts(t, filepath.Join("..", "..", "..", "termapi", "turn.go"))
	storeConsts := map[string][]string{}
	for _, f := range []string{"store.go", "transition.go", "watch.go", "hosts.go"} {
		for k, v := range declaredConsts(t, filepath.Join("..", f)) {
			storeConsts[k] = append(storeConsts[k], v...)
		}
	}
	for _, tc := range []struct {
		name     string
		declared []string
		listed   []string
	}{
		{"TurnStatus", termapiConsts["TurnStatus"], strs(termapi.TurnStatuses())},
		{"CallbackStatus", termapiConsts["CallbackStatus"], strs(termapi.CallbackStatuses())},
		{"store.Status", storeConsts["Status"], strs(store.Statuses())},
		{"transition status", storeConsts["group:TransitionPrepared"], store.TransitionStatuses()},
		{"watch status", storeConsts["group:WatchActive"], store.WatchStatuses()},
	} {
		if len(tc.declared) == 0 {
			t.Errorf("%s: no constants found: the test no longer finds their declaration", tc.name)
			continue
		}
		slices.Sort(tc.declared)
		listed := slices.Sorted(slices.Values(tc.listed))
		if !slices.Equal(tc.declared, listed) {
			t.Errorf("%s: declared %v, listed %v: add the new status to its list, and check the SQL sets built from it", tc.name, tc.declared, listed)
		}
	}
}

// TestIndexConditionsMatchTheGoSets: a migration's partial index spells a
// status set in SQL once and for all; the queries that must use it build
// the same condition from the Go predicates, and the two must be equal
// text (SQLite uses a partial index only for a query whose WHERE contains
// the index's condition).
func TestIndexConditionsMatchTheGoSets(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"tasks":        {runningTask(), endedTask()},
		"term_watches": {activeWatch()},
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?is)CREATE\s+(?:UNIQUE\s+)?INDEX\s+(\w+)\s+ON\s+(\w+)[^;]*?\bWHERE\s+(status\b[^;]*?)\s*;`)
	found := 0
	for n, m := range ms {
		for _, x := range re.FindAllStringSubmatch(m, -1) {
			found++
			index, table, cond := x[1], x[2], x[3]
			if !slices.Contains(want[table], cond) {
				t.Errorf("migration %d: index %s on %s is WHERE %s, which no Go-built condition spells (%q): build the query's condition from the Go predicate and list it here",
					n+1, index, table, cond, want[table])
			}
		}
	}
	if found == 0 {
		t.Fatal("no partial index on status found: the test no longer reads the migrations")
	}
}

// TestNoHandWrittenStatusSets: the package's queries compare status only
// with conditions built from Go (statusIn, statusNotIn), never with a
// literal.
func TestNoHandWrittenStatusSets(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	literal := regexp.MustCompile(`(?i)\bstatus\s*(=|<>|!=|\bIN\b|\bNOT\s+IN\b)\s*\(?\s*'[a-z_]`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			if literal.MatchString(line) {
				t.Errorf("%s:%d: a status set written as an SQL literal: build it with statusIn from the Go predicate\n\t%s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// declaredConsts returns the string constants of file by type name, and
// those of an untyped const block by "group:" and the block's first name.
func declaredConsts(t *testing.T, file string) map[string][]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		group := ""
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if len(vs.Values) != 1 {
				continue
			}
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			key := ""
			if id, ok := vs.Type.(*ast.Ident); ok {
				key = id.Name
			} else {
				if group == "" {
					group = "group:" + vs.Names[0].Name
				}
				key = group
			}
			out[key] = append(out[key], v)
		}
	}
	return out
}

func strs[S ~string](ss []S) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}
