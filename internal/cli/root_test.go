package cli

import (
	"bytes"
	"strings"
	"testing"
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
