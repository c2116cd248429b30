package openclaw

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestE2EInstalledPluginShipsOnlyWhatRuns: the shared rig's gateway runs
// the plugin as `openclaw plugins install` copied it, and that copy holds
// exactly the plugin folder's files, none of the Go or node tests.
func TestE2EInstalledPluginShipsOnlyWhatRuns(t *testing.T) {
	requireE2E(t)
	g, _, _, _, _ := sharedRig(t)
	tree := func(root string) []string {
		t.Helper()
		var out []string
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}
	installed := tree(g.InstalledDir("clawconnect"))
	if diff := cmp.Diff(tree(Dir()), installed); diff != "" {
		t.Errorf("installed plugin differs from the plugin folder (-folder +installed):\n%s", diff)
	}
	for _, f := range installed {
		if strings.HasSuffix(f, ".go") || strings.HasPrefix(f, "test/") || strings.Contains(f, ".test.") {
			t.Errorf("the installed plugin ships a test: %s", f)
		}
	}
	for _, want := range []string{"index.mjs", "openclaw.plugin.json", "package.json", "lib/callback.mjs"} {
		if !slices.Contains(installed, want) {
			t.Errorf("the installed plugin lacks %s", want)
		}
	}
}
