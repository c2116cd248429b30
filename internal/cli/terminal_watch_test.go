package cli

import (
	"strings"
	"testing"
)

func TestTerminalWatchAndInspectArguments(t *testing.T) {
	envm := map[string]string{"CLAWCONNECT_HOME": t.TempDir(), "CLAWCONNECT_TMUX_DEFAULT_SERVER": "off"}
	const tid = "terminal:v2:tmux:codex:work:0.0:4242"
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"watch", "pane-1", "--origin", "agent:main:main"}, ExitUsage},
		{[]string{"watch", tid}, ExitUsage},
		{[]string{"watch", tid, "--origin", "agent main"}, ExitUsage},
		{[]string{"watch", tid, "--origin", "--json"}, ExitUsage},
		{[]string{"watch", tid, "--origin", "agent:main:main"}, ExitNotFound},
		// A --gateway-url that no gateway can have is bad input, refused
		// before anything is recorded (it was recorded before).
		{[]string{"watch", tid, "--origin", "agent:main:main", "--gateway-url", "file:///etc/passwd"}, ExitUsage},
		{[]string{"watch", tid, "--origin", "agent:main:main", "--gateway-url", "ws://"}, ExitUsage},
		{[]string{"watch", tid, "--origin", "agent:main:main", "--gateway-url", "ws://127.0.0.1:18789"}, ExitNotFound},
		{[]string{"send", "--terminal", tid, "--origin-session", "agent:main:main", "--gateway-url", "gopher://x", "hi"}, ExitUsage},
		{[]string{"watch"}, ExitUsage},
		{[]string{"unwatch", "watch-20260101T000000-00000000"}, ExitNotFound},
		{[]string{"unwatch", tid}, ExitNotFound},
		{[]string{"unwatch", tid, "--for-session", "agent:main:main"}, ExitNotFound},
		{[]string{"watch-status", tid}, ExitNotFound},
		{[]string{"watches", "extra"}, ExitUsage},
		{[]string{"unwatch", "nope"}, ExitUsage},
		{[]string{"watch-status", "watch-20260101T000000-00000000", "--json"}, ExitNotFound},
		{[]string{"watch-status", "turn-1"}, ExitUsage},
		{[]string{"inspect", "pane-1"}, ExitUsage},
		{[]string{"inspect", tid, "--json"}, ExitNotFound},
	} {
		_, _, err := runTerminal(t.Context(), envm, tc.args...)
		if got := ExitCode(err); got != tc.want {
			t.Errorf("terminal %v: exit %d (%v), want %d", tc.args, got, err, tc.want)
		}
	}
}

func TestTerminalWatchesListsNoneOnAFreshStore(t *testing.T) {
	envm := map[string]string{"CLAWCONNECT_HOME": t.TempDir(), "CLAWCONNECT_TMUX_DEFAULT_SERVER": "off"}
	out, _, err := runTerminal(t.Context(), envm, "watches")
	if err != nil || out != "no active watch\n" {
		t.Fatalf("watches: %q, %v", out, err)
	}
	out, _, err = runTerminal(t.Context(), envm, "watches", "--json")
	if err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("watches --json: %q, %v", out, err)
	}
}
