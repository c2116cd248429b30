package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/clawconnect/clawconnect/internal/testbed/fakegateway"
)

func TestTermSafe(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain\ttext\nnext line", "plain\ttext\nnext line"},
		{"\x1b]0;pwned\x07title", `\x1b]0;pwned\x07title`},
		{"\x1b[2J\rclear", `\x1b[2J\x0dclear`},
		{"c1 \u009b31m and del \x7f", `c1 \u009b31m and del \x7f`},
		{"bidi \u202eevil", `bidi \u202eevil`},
		{"bad \xff utf8 ✓", `bad \xff utf8 ✓`},
	}
	for _, tt := range tests {
		if got := termSafe(tt.in); got != tt.want {
			t.Errorf("termSafe(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestRepliesCannotDriveTheTerminal is issue 11 item 10: an agent reply
// carrying terminal escape sequences (retitle the window, clear the
// screen) reaches run --wait, status and logs as visible text, never as
// raw control characters; --json output stays exact.
func TestRepliesCannotDriveTheTerminal(t *testing.T) {
	const evil = "\x1b]0;pwned\x07\x1b[2Jreply \u202eevil"
	e := newBridgeEnv(t, func(fakegateway.Submit) fakegateway.Turn {
		return fakegateway.Turn{Reply: evil, Chunks: 2}
	})
	out, errOut, err := e.run(t, "", "run", "say", "something", "--wait")
	if err != nil {
		t.Fatalf("run --wait: %v\n%s", err, errOut)
	}
	outputs := map[string]string{"run --wait": out + errOut}
	jsonOut, _, err := e.run(t, "", "run", "again", "--wait", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var snap struct {
		JobID   string `json:"jobId"`
		Summary string `json:"summary"`
	}
	if err := json.Unmarshal([]byte(jsonOut), &snap); err != nil || snap.Summary != evil {
		t.Fatalf("run --json lost the exact reply: %q %v", snap.Summary, err)
	}
	for _, args := range [][]string{{"status", snap.JobID}, {"logs", snap.JobID}, {"sessions"}} {
		o, eo, err := e.run(t, "", args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		outputs[strings.Join(args[:1], " ")] = o + eo
	}
	for name, o := range outputs {
		if strings.ContainsAny(o, "\x1b\x07\u202e") {
			t.Errorf("%s printed raw control characters: %q", name, o)
		}
	}
	if !strings.Contains(outputs["run --wait"], `\x1b]0;pwned\x07`) {
		t.Errorf("run --wait does not show the escaped reply: %q", outputs["run --wait"])
	}
}
