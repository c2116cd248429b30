package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

var updateREADME = flag.Bool("update", false, "rewrite the README's exit codes table from the command tree")

// commands returns every command of the tree that runs something of its
// own (the root and the commands that only group others left out), help
// included, in command-path order.
func commands() []*cobra.Command {
	root := newRootCmd(Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}})
	root.InitDefaultHelpCmd()
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root && !c.HasSubCommands() {
			out = append(out, c)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	slices.SortFunc(out, func(a, b *cobra.Command) int { return strings.Compare(a.CommandPath(), b.CommandPath()) })
	return out
}

// TestEveryCommandHasJSON: every command that prints a result has --json;
// the others (servers, protocol speakers, help) say why they have none.
func TestEveryCommandHasJSON(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		has, why := c.Flags().Lookup("json") != nil, c.Annotations[noJSON]
		switch {
		case !has && why == "":
			t.Errorf("%s has no --json (give it one, or say why not in markNoJSON)", c.CommandPath())
		case has && why != "":
			t.Errorf("%s has --json but is marked %q", c.CommandPath(), why)
		}
	}
}

// exitCodes is the "Exit codes:" paragraph of c's help, on one line.
func exitCodes(c *cobra.Command) string {
	i := strings.Index(c.Long, "Exit codes:")
	if i < 0 {
		return ""
	}
	p := c.Long[i+len("Exit codes:"):]
	if j := strings.Index(p, "\n\n"); j >= 0 {
		p = p[:j]
	}
	return strings.Join(strings.Fields(p), " ")
}

// exitCodesTable is the README's table: one row per distinct exit codes
// paragraph, naming the commands that share it.
func exitCodesTable(t *testing.T) string {
	var order []string
	names := map[string][]string{}
	for _, c := range commands() {
		codes := exitCodes(c)
		if codes == "" {
			t.Errorf("%s's help has no \"Exit codes:\" paragraph", c.CommandPath())
			continue
		}
		if _, ok := names[codes]; !ok {
			order = append(order, codes)
		}
		names[codes] = append(names[codes], "`"+strings.TrimPrefix(c.CommandPath(), "clawconnect ")+"`")
	}
	var b strings.Builder
	b.WriteString("| Command | Exit codes |\n|---|---|\n")
	for _, codes := range order {
		fmt.Fprintf(&b, "| %s | %s |\n", strings.Join(names[codes], ", "), codes)
	}
	return b.String()
}

// The README's exit codes table between these markers is exitCodesTable.
const (
	exitTableBegin = "<!-- exit codes table: generated from the command tree by `go test ./internal/cli -run TestREADMEExitCodes -update` -->\n"
	exitTableEnd   = "<!-- end of exit codes table -->\n"
)

// TestREADMEExitCodes: the README's exit codes table covers every command
// with the codes its own help gives; -update rewrites it.
func TestREADMEExitCodes(t *testing.T) {
	path := filepath.Join("..", "..", "README.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, exitTableBegin), strings.Index(readme, exitTableEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the exit codes table markers %q ... %q", exitTableBegin, exitTableEnd)
	}
	got, want := readme[i+len(exitTableBegin):j], exitCodesTable(t)
	if *updateREADME {
		if err := os.WriteFile(path, []byte(readme[:i+len(exitTableBegin)]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("README.md's exit codes table differs from the commands' help (-help +README); run go test ./internal/cli -run TestREADMEExitCodes -update:\n%s", diff)
	}
}

// TestJSONShapes: version, doctor and logs print the documented JSON
// shapes.
func TestJSONShapes(t *testing.T) {
	e := newBridgeEnv(t, nil)
	out, _, err := e.run(t, "", "version", "--json")
	var v struct{ Version, Go string }
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.Version == "" || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("version --json = %q, %v", out, err)
	}

	out, _, err = e.run(t, "", "doctor", "--json", "--timeout", "5s")
	var d struct {
		OK     bool `json:"ok"`
		Failed int  `json:"failed"`
		Checks []struct {
			OK     bool   `json:"ok"`
			Area   string `json:"area"`
			Detail string `json:"detail"`
			Fix    string `json:"fix"`
		} `json:"checks"`
	}
	if jerr := json.Unmarshal([]byte(out), &d); jerr != nil || len(d.Checks) == 0 {
		t.Fatalf("doctor --json = %q: %v", out, jerr)
	}
	failed, areas := 0, map[string]bool{}
	for _, c := range d.Checks {
		areas[c.Area] = true
		if !c.OK {
			failed++
		}
	}
	if d.Failed != failed || d.OK != (failed == 0) || (failed > 0) != (ExitCode(err) == ExitFailure) {
		t.Errorf("doctor --json: ok %v, failed %d, %d failed checks, exit %d", d.OK, d.Failed, failed, ExitCode(err))
	}
	for _, a := range []string{"config", "store", "runtimes"} {
		if !areas[a] {
			t.Errorf("doctor --json has no %q check: %q", a, out)
		}
	}

	out, _, err = e.run(t, "", "run", "--wait", "--json", "say", "hello")
	var run struct {
		JobID string `json:"jobId"`
	}
	if err != nil || json.Unmarshal([]byte(out), &run) != nil || run.JobID == "" {
		t.Fatalf("run --wait --json = %q, %v", out, err)
	}
	out, _, err = e.run(t, "", "logs", run.JobID, "--json")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for n, line := range lines {
		var l struct {
			Seq  int64  `json:"seq"`
			TS   int64  `json:"ts"`
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Type == "" || l.TS == 0 || l.Seq != int64(n+1) {
			t.Errorf("logs --json line %d = %q (%v)", n+1, line, err)
		}
	}
}
