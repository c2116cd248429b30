package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clawconnect/clawconnect/internal/testbed/fakemodel"
	"github.com/clawconnect/clawconnect/internal/testbed/peers"
	"github.com/clawconnect/clawconnect/internal/testbed/realcli"
	"github.com/clawconnect/clawconnect/internal/testbed/realtui"
)

// TestTSClientTerminalTools drives a real Codex TUI in a private tmux
// server with the TypeScript SDK, through `clawconnect mcp --terminal-tools`
// (stdio), then through `clawconnect serve` with
// CLAWCONNECT_TERMINAL_TOOLS=1 (streamable HTTP): terminal_list finds the
// pane, terminal_send types the request, and a waiting terminal_status
// returns the fake model's exact reply.
func TestTSClientTerminalTools(t *testing.T) {
	t.Parallel() // own home and processes; the shared gateway is never restarted
	peers.RequireE2E(t)
	in := peers.Require(t, peers.Node, peers.MCPSDK)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	model := fakemodel.New(t, fakemodel.Options{})
	tui := realtui.Require(t, realcli.Codex, model, realtui.Options{Width: 200, Height: 50})
	home := t.TempDir()
	// The task bridge needs an agent to start; no gateway listens there
	// and none is used.
	if err := os.WriteFile(filepath.Join(home, "agents.json"), []byte(`{"agents":[{"id":"main","url":"ws://127.0.0.1:9","password":"p"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fixture{bin: bin, home: home, in: in,
		extraEnv: []string{"CLAWCONNECT_TMUX_SOCKETS=" + tui.Socket, "CLAWCONNECT_TMUX_DEFAULT_SERVER=off"}}

	dir := t.TempDir()
	script, err := os.ReadFile("testdata/terminal.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "terminal.mjs"), script, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(in.NodeModules(peers.MCPSDK), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	client := func(reply string, target ...string) map[string]any {
		t.Helper()
		c := in.MustCommand(t, peers.MCPSDK)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		cmd := c.Cmd(ctx, append([]string{filepath.Join(dir, "terminal.mjs")}, target...)...)
		cmd.Env = append(f.env(), c.Env...)
		cmd.Env = append(cmd.Env, "TERMINAL_REQUEST=ECHO="+reply)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			screen, _ := tui.Capture(context.Background())
			t.Fatalf("ts client: %v\nstdout: %s\nstderr: %s\nscreen:\n%s", err, out, stderr.String(), screen)
		}
		return decode(t, out, stderr.String())
	}
	check(t, client("mcp-terminal-ok", bin, "mcp", "--terminal-tools"), "mcp-terminal-ok")
	f.extraEnv = append(f.extraEnv, "CLAWCONNECT_TERMINAL_TOOLS=1")
	check(t, client("http-terminal-ok", f.serve(t)), "http-terminal-ok")
}

// check asserts on the output of terminal.mjs.
func check(t *testing.T, doc map[string]any, reply string) {
	t.Helper()
	var tools []string
	for _, x := range doc["tools"].([]any) {
		tools = append(tools, x.(string))
	}
	want := append(slices.Clone(allTools), "terminal_approve", "terminal_cancel", "terminal_list", "terminal_respond", "terminal_send", "terminal_status")
	slices.Sort(want)
	if !slices.Equal(tools, want) {
		t.Errorf("tools = %v, want %v", tools, want)
	}
	if row := doc["row"].(map[string]any); row["agent"] != "codex" {
		t.Errorf("row = %v", row)
	}
	if s := doc["send"].(map[string]any); s["submission_outcome"] != "agent_accepted" {
		t.Errorf("send = %v", s)
	}
	st := doc["status"].(map[string]any)
	turn := st["turn"].(map[string]any)
	res, _ := turn["result"].(map[string]any)
	if turn["status"] != "idle" || res == nil || res["text"] != reply || st["running"] != false {
		t.Errorf("status = %v", st)
	}
	if text, _ := doc["text"].(string); !strings.Contains(text, reply) {
		t.Errorf("status text = %q", text)
	}
	t.Logf("progress notifications while the Turn ran: %v", doc["progress"])
}

func decode(t *testing.T, out []byte, stderr string) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("client output is not JSON: %v\n%s\nstderr: %s", err, out, stderr)
	}
	return doc
}
