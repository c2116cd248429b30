package oneproc

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestApplies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		args       []string
		gomaxprocs string
		want       bool
	}{
		{"mcp", []string{"mcp"}, "", true},
		{"mcp with a flag", []string{"mcp", "--terminal-tools"}, "", true},
		{"GOMAXPROCS chosen", []string{"mcp"}, "2", false},
		{"another command", []string{"serve"}, "", false},
		{"help about mcp", []string{"help", "mcp"}, "", false},
		{"no command", nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			getenv := func(k string) string {
				if k == "GOMAXPROCS" {
					return tc.gomaxprocs
				}
				return ""
			}
			if got := applies(tc.args, getenv); got != tc.want {
				t.Errorf("applies(%q, GOMAXPROCS=%q) = %v, want %v", tc.args, tc.gomaxprocs, got, tc.want)
			}
		})
	}
}

// heavyInits are the dependencies whose inits take the most of a start
// (GODEBUG=inittrace=1, ≥ 0.1 ms each; encoding/gob and runtime/metrics,
// of the standard library, initialize before os, so before any package
// that imports it).
var heavyInits = []string{
	"github.com/prometheus/client_golang/prometheus",
	"github.com/prometheus/procfs",
	"github.com/google/jsonschema-go/jsonschema",
	"golang.org/x/text/secure/precis",
	"modernc.org/libc",
	"google.golang.org/protobuf/internal/detrand",
}

// TestInitializesBeforeDependencies replays, over the binary's packages as
// go list reports them, the order in which Go initializes packages (the
// first, by import path, of those whose imports are initialized) and fails
// when one of heavyInits would initialize before this package: a new
// import here or a rename that sorts after them would leave the GOMAXPROCS
// change to after their inits.
func TestInitializesBeforeDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the binary's dependencies")
	}
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", "github.com/clawconnect/clawconnect/cmd/clawconnect").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	type pkg struct {
		ImportPath string
		Imports    []string
	}
	pkgs := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	for _, heavy := range heavyInits {
		if _, ok := pkgs[heavy]; !ok {
			t.Errorf("%s is no longer linked: update heavyInits", heavy)
		}
	}
	self := "github.com/clawconnect/clawconnect/cmd/clawconnect/internal/oneproc"
	if _, ok := pkgs[self]; !ok {
		t.Fatalf("%s is not linked into cmd/clawconnect", self)
	}
	var order []string
	for path := range pkgs {
		order = append(order, path)
	}
	slices.Sort(order)
	done := map[string]bool{"unsafe": true}
	for !done[self] {
		next := ""
		for _, path := range order {
			if done[path] {
				continue
			}
			ready := true
			for _, imp := range pkgs[path].Imports {
				if _, linked := pkgs[imp]; linked && !done[imp] {
					ready = false
					break
				}
			}
			if ready {
				next = path
				break
			}
		}
		if next == "" {
			t.Fatal("no package is ready to initialize: an import cycle in go list's answer?")
		}
		if slices.Contains(heavyInits, next) {
			t.Fatalf("%s initializes before %s", next, self)
		}
		done[next] = true
	}
}
