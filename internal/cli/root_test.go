package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = Run(t.Context(), Env{Args: args, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
	return out.String(), errOut.String(), err
}

func TestVersion(t *testing.T) {
	out, _, err := runCLI(t, "version")
	if err != nil {
		t.Fatalf("version: %v", err)
	}
	if !strings.HasPrefix(out, "clawconnect ") {
		t.Errorf("version output = %q, want prefix %q", out, "clawconnect ")
	}
}

func TestHelpListsCommands(t *testing.T) {
	out, _, err := runCLI(t, "help")
	if err != nil {
		t.Fatalf("help: %v", err)
	}
	for _, want := range []string{"version", "Usage:"} {
		if !strings.Contains(out, want) {
			t.Errorf("help output lacks %q:\n%s", want, out)
		}
	}
}

func TestUnknownFlagIsUsageError(t *testing.T) {
	_, _, err := runCLI(t, "version", "--no-such-flag")
	if got := ExitCode(err); got != ExitUsage {
		t.Errorf("ExitCode = %d, want %d (err %v)", got, ExitUsage, err)
	}
}

// TestExitCodesAndHelp pins what a user meets first: the exit codes the
// README promises and the help of the commands.
func TestExitCodesAndHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		code    int
		inErr   string // in the error, when code != 0
		inOut   string // in stdout
		notInEr string
	}{
		{"unknown command", []string{"nosuch"}, ExitUsage, `unknown command "nosuch"`, "", ""},
		{"unknown command with a suggestion", []string{"statsu"}, ExitUsage, "did you mean status?", "", ""},
		{"unknown gateway subcommand", []string{"gateway", "pong"}, ExitUsage, `unknown command "pong" for "clawconnect gateway"`, "", ""},
		{"gateway alone shows its help", []string{"gateway"}, ExitOK, "", "ping", ""},
		{"help on an unknown topic", []string{"help", "nosuch"}, ExitUsage, `unknown command "nosuch"`, "", ""},
		{"help on an unknown subcommand", []string{"help", "gateway", "nosuch"}, ExitUsage, `unknown command "nosuch"`, "", ""},
		{"help on a command", []string{"help", "run"}, ExitOK, "", "Examples:", ""},
		{"--version", []string{"--version"}, ExitOK, "", "clawconnect ", ""},
		{"gateway call without a method", []string{"gateway", "call"}, ExitUsage, "name the METHOD to call", "", "accepts 1 arg"},
		{"gateway call with two methods", []string{"gateway", "call", "a", "b"}, ExitUsage, "one METHOD", "", ""},
		{"no command", nil, ExitOK, "", "Available Commands:", ""},
		{"an argument to a command that takes none", []string{"version", "extra"}, ExitUsage, `clawconnect version takes no arguments, got ["extra"]`, "", "unknown command"},
		{"an argument to a terminal command that takes none", []string{"terminal", "list", "extra"}, ExitUsage, "clawconnect terminal list takes no arguments", "", ""},
		{"unknown terminal subcommand", []string{"terminal", "lst"}, ExitUsage, "did you mean list?", "", ""},
		{"terminal alone shows its help", []string{"terminal"}, ExitOK, "", "new-thread", ""},
		{"terminal subcommand help has the exit codes", []string{"terminal", "threads", "--help"}, ExitOK, "", "4 no such Session, Turn or", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, _, err := runCLI(t, tt.args...)
			if got := ExitCode(err); got != tt.code {
				t.Fatalf("exit code %d (%v), want %d", got, err, tt.code)
			}
			if tt.inErr != "" && (err == nil || !strings.Contains(err.Error(), tt.inErr)) {
				t.Errorf("error %v, want it to contain %q", err, tt.inErr)
			}
			if tt.notInEr != "" && err != nil && strings.Contains(err.Error(), tt.notInEr) {
				t.Errorf("error %v contains %q", err, tt.notInEr)
			}
			if !strings.Contains(out, tt.inOut) {
				t.Errorf("stdout lacks %q:\n%s", tt.inOut, out)
			}
		})
	}
}

// TestVersionFlagMatchesCommand: --version prints what version prints.
func TestVersionFlagMatchesCommand(t *testing.T) {
	t.Parallel()
	cmdOut, _, err := runCLI(t, "version")
	if err != nil {
		t.Fatal(err)
	}
	flagOut, _, err := runCLI(t, "--version")
	if err != nil || flagOut != cmdOut {
		t.Errorf("--version = %q (%v), want %q", flagOut, err, cmdOut)
	}
}

// TestEveryCommandHasExamples: every command a user can call shows at least
// one example in its --help.
func TestEveryCommandHasExamples(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "completion" {
				continue
			}
			if sub.Example == "" {
				t.Errorf("%s has no examples", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(newRootCmd(Env{}))
}

// TestEveryCommandSaysItsExitCodes: every command a user can run names its
// exit codes in its --help, so a script can branch on them without the
// README.
func TestEveryCommandSaysItsExitCodes(t *testing.T) {
	t.Parallel()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "completion" || sub.Name() == "help" {
				continue
			}
			long := strings.ToLower(strings.Join(strings.Fields(sub.Long), " "))
			if sub.Runnable() && !sub.HasSubCommands() && !strings.Contains(long, "exit code") {
				t.Errorf("%s --help does not say its exit codes", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(newRootCmd(Env{}))
}

// TestReadmeListsEveryCommand keeps the README's command list complete:
// every command a user can call is named in its "## Commands" block.
func TestReadmeListsEveryCommand(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n## Commands\n")
	block, _, _ := strings.Cut(rest, "\n## ")
	if !ok {
		t.Fatal("README.md has no \"## Commands\" section")
	}
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(block, func(r rune) bool { return r == ' ' || r == '\n' || r == '|' || r == ',' }) {
		words[w] = true
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "completion" {
				continue
			}
			if !words[sub.Name()] {
				t.Errorf("README.md's command list does not name %s", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(newRootCmd(Env{}))
}

// TestTopCommandsAreNamedAsBuilt keeps topCommands true: each entry's name
// is the name of the command it builds, and the full tree has exactly
// those commands (besides help and completion, which cobra adds).
func TestTopCommandsAreNamedAsBuilt(t *testing.T) {
	t.Parallel()
	listed := map[string]bool{}
	for _, c := range topCommands() {
		if got := c.build(Env{}).Name(); got != c.name {
			t.Errorf("topCommands entry %q builds a command named %q", c.name, got)
		}
		listed[c.name] = true
	}
	for _, cmd := range newRootCmd(Env{}).Commands() {
		if !listed[cmd.Name()] && cmd.Name() != "help" && cmd.Name() != "completion" {
			t.Errorf("the root has %q, which topCommands does not list", cmd.Name())
		}
	}
}

// TestNamedCommandAloneBehavesAsInTheFullTree runs command lines that name
// a top-level command twice, once as Run does (that command alone under the
// root) and once in the full tree, and wants the same output and exit code.
func TestNamedCommandAloneBehavesAsInTheFullTree(t *testing.T) {
	t.Parallel()
	var lines [][]string
	for _, c := range topCommands() {
		lines = append(lines, []string{c.name, "--help"}, []string{c.name, "--no-such-flag"})
	}
	lines = append(lines, []string{"mcp", "extra"}, []string{"terminal", "nosuch"}, []string{"gateway", "--help"}, []string{"version"})
	type result struct {
		code        int
		err, stdout string
		stderr      string
	}
	run := func(args, built []string) (result, int) {
		var out, errOut bytes.Buffer
		root := newRootCmd(Env{Args: built, Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut})
		n := len(root.Commands()) // before cobra adds help and completion
		root.SetArgs(args)
		err := root.ExecuteContext(t.Context())
		r := result{code: ExitCode(err), stdout: out.String(), stderr: errOut.String()}
		if err != nil {
			r.err = err.Error()
		}
		return r, n
	}
	for _, args := range lines {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			alone, n := run(args, args)
			if n != 1 {
				t.Errorf("the root built for %q has %d commands, want the named one alone", args, n)
			}
			full, _ := run(args, nil)
			if d := cmp.Diff(full, alone, cmp.AllowUnexported(result{})); d != "" {
				t.Errorf("%q alone differs from the full tree (-full +alone):\n%s", args, d)
			}
		})
	}
}
