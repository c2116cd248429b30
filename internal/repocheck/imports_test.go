package repocheck

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const module = "github.com/clawconnect/clawconnect/"

// TestImportsMatchTheArchitecture lists every package's imports with
// `go list` and compares the module's own with the "Who imports whom"
// block of docs/ARCHITECTURE.md, both ways: the document is the one
// picture of the package boundaries, so an import it does not show fails,
// and so does an arrow the code no longer has or a package it omits.
func TestImportsMatchTheArchitecture(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	doc, err := os.ReadFile("../../docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	block, err := importsBlock(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	want, err := parseImports(block)
	if err != nil {
		t.Fatalf("docs/ARCHITECTURE.md, \"Who imports whom\": %v", err)
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	got := map[string][]string{}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		own := []string{}
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				own = append(own, rel)
			}
		}
		slices.Sort(own)
		got[pkg] = own
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the module's imports differ from docs/ARCHITECTURE.md's \"Who imports whom\" (-document +code); "+
			"if the change is meant, change the document's block:\n%s", diff)
	}
	for pkg, imps := range got {
		for _, imp := range imps {
			if strings.HasPrefix(imp, "internal/testbed/") && !strings.HasPrefix(pkg, "internal/testbed/") {
				t.Errorf("%s imports the test peer %s outside its tests", pkg, imp)
			}
		}
	}
}

// importsBlock is the fenced block that follows the "Who imports whom"
// heading.
func importsBlock(doc string) (string, error) {
	_, rest, ok := strings.Cut(doc, "\n## Who imports whom\n")
	if !ok {
		return "", fmt.Errorf("docs/ARCHITECTURE.md has no \"## Who imports whom\" section")
	}
	_, rest, ok = strings.Cut(rest, "\n```\n")
	if !ok {
		return "", fmt.Errorf("\"Who imports whom\" has no fenced block")
	}
	block, _, ok := strings.Cut(rest, "\n```\n")
	if !ok {
		return "", fmt.Errorf("\"Who imports whom\"'s block is not closed")
	}
	return block, nil
}

var (
	commentary = regexp.MustCompile(`\([^()]*\)`)
	braces     = regexp.MustCompile(`^([^{}]*)\{([^{}]*)\}(.*)$`)
	pkgPath    = regexp.MustCompile(`^[a-z0-9][a-z0-9_./-]*$`)
)

// parseImports reads the block's grammar (see ARCHITECTURE.md): lines
// "importers -> imported [-> imported …]", continued by lines that start
// with a space, {x,y} expanded, parentheses dropped, "standard library
// only" for none. Every package named on the left is in the result, with
// its imports sorted.
func parseImports(block string) (map[string][]string, error) {
	var logical []string
	for line := range strings.Lines(block) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, " ") && len(logical) > 0 {
			logical[len(logical)-1] += " " + strings.TrimSpace(line)
			continue
		}
		logical = append(logical, line)
	}
	edges := map[string]map[string]bool{}
	for _, line := range logical {
		stripped := line
		for {
			next := commentary.ReplaceAllString(stripped, "")
			if next == stripped {
				break
			}
			stripped = next
		}
		if strings.ContainsAny(stripped, "()") {
			return nil, fmt.Errorf("unbalanced parentheses in %q", line)
		}
		parts := strings.Split(stripped, "->")
		if len(parts) < 2 {
			return nil, fmt.Errorf("no arrow in %q", line)
		}
		for i := 0; i+1 < len(parts); i++ {
			from, err := pkgList(parts[i])
			if err != nil {
				return nil, fmt.Errorf("%q: %w", line, err)
			}
			to, err := pkgList(parts[i+1])
			if err != nil {
				return nil, fmt.Errorf("%q: %w", line, err)
			}
			if i > 0 && len(from) != 1 {
				return nil, fmt.Errorf("%q: the middle of a chain names one package", line)
			}
			for _, f := range from {
				if edges[f] == nil {
					edges[f] = map[string]bool{}
				}
				for _, t := range to {
					edges[f][t] = true
				}
			}
		}
	}
	out := map[string][]string{}
	for pkg, to := range edges {
		imps := []string{}
		for t := range to {
			imps = append(imps, t)
		}
		slices.Sort(imps)
		out[pkg] = imps
	}
	return out, nil
}

// pkgList reads "a, b/{c,d}" as package paths; "standard library only" is
// none.
func pkgList(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "standard library only" {
		return nil, nil
	}
	var out []string
	for _, item := range splitTop(s) {
		item = strings.TrimSpace(item)
		for _, p := range expand(item) {
			if !pkgPath.MatchString(p) {
				return nil, fmt.Errorf("%q is not a package path", p)
			}
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no package in %q", s)
	}
	return out, nil
}

// splitTop splits s at the commas outside braces.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// expand expands the braces of one item: "a{,/b}" is "a" and "a/b".
func expand(item string) []string {
	m := braces.FindStringSubmatch(item)
	if m == nil {
		return []string{item}
	}
	var out []string
	for _, alt := range strings.Split(m[2], ",") {
		out = append(out, expand(m[1]+strings.TrimSpace(alt)+m[3])...)
	}
	return out
}

func TestParseImports(t *testing.T) {
	t.Parallel()
	got, err := parseImports("a -> b/{c,d}, e (why, and more)\n" +
		"f, g -> h -> i{,/j}\n" +
		"   (a comment line) \n" +
		"k -> standard library only\n" +
		"a -> l\n" +
		"m -> n,\n o (continued)")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"a": {"b/c", "b/d", "e", "l"}, "f": {"h"}, "g": {"h"}, "h": {"i", "i/j"}, "k": {}, "m": {"n", "o"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseImports (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"a b", "a -> (open", "a, b -> c -> d, e -> f", "a -> B!"} {
		if _, err := parseImports(bad); err == nil {
			t.Errorf("parseImports(%q) took it", bad)
		}
	}
}
