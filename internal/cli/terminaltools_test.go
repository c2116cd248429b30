package cli

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// mcpToolsList runs `clawconnect args...` as a stdio server, asks
// tools/list and returns the answer line.
func mcpToolsList(t *testing.T, vars map[string]string, args ...string) string {
	t.Helper()
	in := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}
{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}
`
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	var errOut bytes.Buffer
	go func() {
		done <- Run(t.Context(), Env{Args: args, Stdin: inR, Stdout: outW, Stderr: &errOut, Getenv: func(k string) string { return vars[k] }})
		_ = outW.Close()
	}()
	go func() { _, _ = io.WriteString(inW, in) }()
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<24)
	answer := ""
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"id":2`) {
			answer = sc.Text()
			break
		}
	}
	_ = inW.Close()
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("mcp: %v\nstderr: %s", err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("mcp did not exit within 30s of stdin closing")
	}
	return answer
}

// TestMCPTerminalToolsOptIn: the terminal tools are listed only with
// --terminal-tools or CLAWCONNECT_TERMINAL_TOOLS=1.
func TestMCPTerminalToolsOptIn(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  string
		args []string
		want bool
	}{
		{"off by default", "", []string{"mcp"}, false},
		{"variable", "1", []string{"mcp"}, true},
		{"flag", "", []string{"mcp", "--terminal-tools"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"CLAWCONNECT_HOME": t.TempDir(), "OPENCLAW_URL": "ws://127.0.0.1:1", "OPENCLAW_PASSWORD": "x",
				"CLAWCONNECT_TERMINAL_TOOLS": tc.env, "CLAWCONNECT_TMUX_DEFAULT_SERVER": "off"}
			got := mcpToolsList(t, vars, tc.args...)
			if !strings.Contains(got, `"run_task"`) {
				t.Fatalf("tools/list = %.300s", got)
			}
			for _, name := range []string{"terminal_list", "terminal_send", "terminal_status", "terminal_respond", "terminal_approve", "terminal_cancel"} {
				if strings.Contains(got, `"`+name+`"`) != tc.want {
					t.Errorf("%s listed = %v, want %v", name, !tc.want, tc.want)
				}
			}
		})
	}
}
